package projections

import "hash/maphash"

// strTable maps strings (event, item and call ids) to values, for the
// session's indexes that only ever grow. It does what a Go map would, at
// less cost on the path every observed event takes: its entries are kept
// in insertion order in a dense slice, and its slots hold half of each
// entry's hash beside the entry's position, so growing the slots moves
// 8-byte words without hashing or reading the keys again (a Go map's
// growth hashes every key again, a cache miss each: about 40% of Observe
// in a rebuild's profile). Entries are never removed.
//
// The zero value is an empty table. The hash seed is random per table: it
// decides where entries sit, never what a lookup returns.
type strTable[V any] struct {
	seed maphash.Seed
	// slots is empty or a power of two long, at most 3/4 used; a slot is
	// 0 when free, else the entry's tag (the upper half of its hash,
	// whose low bits are its home slot) above its index in entries
	// plus 1.
	// Collisions probe the next slots.
	slots   []uint64
	entries []strEntry[V]
}

// strEntry is one key and its value.
type strEntry[V any] struct {
	key string
	val V
}

// strTableMinSlots is the slot count of a table's first allocation.
const strTableMinSlots = 8

// len returns the number of entries.
func (t *strTable[V]) len() int { return len(t.entries) }

// key returns entry i's key.
func (t *strTable[V]) key(i int) string { return t.entries[i].key }

// val returns a pointer to entry i's value, valid until the next insert.
func (t *strTable[V]) val(i int) *V { return &t.entries[i].val }

// tag returns k's tag.
func (t *strTable[V]) tag(k string) uint64 { return maphash.String(t.seed, k) >> 32 }

// lookup returns the index of k's entry, or -1 and the free slot where k
// would go. The table has slots.
func (t *strTable[V]) lookup(k string, tag uint64) (e int, free uint64) {
	mask := uint64(len(t.slots) - 1)
	for j := tag & mask; ; j = (j + 1) & mask {
		s := t.slots[j]
		if s == 0 {
			return -1, j
		}
		if s>>32 == tag {
			if e := int(uint32(s)) - 1; t.entries[e].key == k {
				return e, 0
			}
		}
	}
}

// find returns the index of k's entry, or -1.
func (t *strTable[V]) find(k string) int {
	if len(t.entries) == 0 {
		return -1
	}
	e, _ := t.lookup(k, t.tag(k))
	return e
}

// get returns k's value and whether k is in the table.
func (t *strTable[V]) get(k string) (V, bool) {
	if e := t.find(k); e >= 0 {
		return t.entries[e].val, true
	}
	var zero V
	return zero, false
}

// at returns k's value, the zero value when k is not in the table (as
// indexing a map does).
func (t *strTable[V]) at(k string) V {
	v, _ := t.get(k)
	return v
}

// insert adds k with value v unless k is there already, and returns the
// index of k's entry and whether it was added.
func (t *strTable[V]) insert(k string, v V) (i int, added bool) {
	if t.slots == nil {
		t.seed = maphash.MakeSeed()
		t.slots = make([]uint64, strTableMinSlots)
	}
	tag := t.tag(k)
	e, free := t.lookup(k, tag)
	if e >= 0 {
		return e, false
	}
	e = len(t.entries)
	if e == cap(t.entries) {
		// Double, as the slots do: append grows a long slice by about a
		// quarter, and the arrays allocated on the way would add up to
		// about five times the final one (twice when doubling), every
		// entry copied about four times (once).
		grown := make([]strEntry[V], e, max(2*e, strTableMinSlots))
		copy(grown, t.entries)
		t.entries = grown
	}
	t.entries = append(t.entries, strEntry[V]{k, v})
	if 4*len(t.entries) <= 3*len(t.slots) {
		t.slots[free] = tag<<32 | uint64(e+1)
		return e, true
	}
	// Past 3/4: double the slots, placing every entry again from its
	// slot word alone, then this one.
	old := t.slots
	t.slots = make([]uint64, 2*len(old))
	for _, s := range old {
		if s != 0 {
			t.place(s)
		}
	}
	t.place(tag<<32 | uint64(e+1))
	return e, true
}

// place puts slot word s in the first free slot from its home slot.
func (t *strTable[V]) place(s uint64) {
	mask := uint64(len(t.slots) - 1)
	for j := (s >> 32) & mask; ; j = (j + 1) & mask {
		if t.slots[j] == 0 {
			t.slots[j] = s
			return
		}
	}
}
