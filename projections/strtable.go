package projections

import "hash/maphash"

// idxTable maps strings (event, item and call ids) to references, small
// non-negative ints, for the session's indexes that only ever grow. It
// holds no keys: the caller keeps each key where it keeps the thing the
// reference names (an item's id in the item, a mark's in its state), and
// gives the table a keyOf function that returns the key of a reference.
// So a table costs 8-byte slots and nothing per entry the GC must scan.
//
// It does what a Go map would, at less cost on the path every observed
// event takes: its slots hold half of each key's hash beside its
// reference, so growing moves 8-byte words without hashing or reading the
// keys again (a Go map's growth hashes every key again, a cache miss each:
// about 40% of Observe in a rebuild's profile). A key is read only when a
// lookup meets a slot with its tag. Entries are never removed.
//
// The zero value is an empty table. The hash seed is random per table: it
// decides where entries sit, never what a lookup returns.
type idxTable struct {
	seed maphash.Seed
	// slots is empty or a power of two long, at most 3/4 used; a slot is
	// 0 when free, else the entry's tag (the upper half of its hash,
	// whose low bits are its home slot) above its reference plus 1.
	// Collisions probe the next slots.
	slots []uint64
	n     int // entries
}

// idxSpot is where find found no key: the key's tag and the free slot
// where it would go.
type idxSpot struct {
	tag  uint64
	slot uint64
}

// maxRef bounds the references a table holds (they fill the slot's lower
// 32 bits, plus 1).
const maxRef = 1<<32 - 2

// strTableMinSlots is the slot count of a table's first allocation.
const strTableMinSlots = 8

// len returns the number of entries.
func (t *idxTable) len() int { return t.n }

// tag returns k's tag.
func (t *idxTable) tag(k string) uint64 { return maphash.String(t.seed, k) >> 32 }

// lookup returns k's reference, or -1 and the free slot where k would go.
// The table has slots.
func (t *idxTable) lookup(k string, tag uint64, keyOf func(int) string) (ref int, free uint64) {
	mask := uint64(len(t.slots) - 1)
	for j := tag & mask; ; j = (j + 1) & mask {
		s := t.slots[j]
		if s == 0 {
			return -1, j
		}
		if s>>32 == tag {
			if r := int(uint32(s)) - 1; keyOf(r) == k {
				return r, 0
			}
		}
	}
}

// find returns k's reference, or -1. It never writes: readers may call it
// concurrently.
func (t *idxTable) find(k string, keyOf func(int) string) int {
	if t.n == 0 {
		return -1
	}
	r, _ := t.lookup(k, t.tag(k), keyOf)
	return r
}

// probe returns k's reference, or -1 and the spot where add would put k.
// Nothing may be added between a probe and the add of its spot.
func (t *idxTable) probe(k string, keyOf func(int) string) (int, idxSpot) {
	if t.slots == nil {
		t.seed = maphash.MakeSeed()
		t.slots = make([]uint64, strTableMinSlots)
	}
	tag := t.tag(k)
	r, free := t.lookup(k, tag, keyOf)
	return r, idxSpot{tag: tag, slot: free}
}

// add enters reference ref (at most maxRef) for the key probe gave spot
// sp for. keyOf is not called.
func (t *idxTable) add(sp idxSpot, ref int) {
	if ref < 0 || ref > maxRef {
		panic("projections: idxTable reference out of range")
	}
	t.n++
	s := sp.tag<<32 | uint64(ref+1)
	if 4*t.n <= 3*len(t.slots) {
		t.slots[sp.slot] = s
		return
	}
	// Past 3/4: double the slots, placing every entry again from its
	// slot word alone, then this one.
	old := t.slots
	t.slots = make([]uint64, 2*len(old))
	for _, w := range old {
		if w != 0 {
			t.place(w)
		}
	}
	t.place(s)
}

// insert adds k with reference ref unless k is there already, and returns
// k's reference and whether it was added.
func (t *idxTable) insert(k string, ref int, keyOf func(int) string) (int, bool) {
	r, sp := t.probe(k, keyOf)
	if r >= 0 {
		return r, false
	}
	t.add(sp, ref)
	return ref, true
}

// place puts slot word s in the first free slot from its home slot.
func (t *idxTable) place(s uint64) {
	mask := uint64(len(t.slots) - 1)
	for j := (s >> 32) & mask; ; j = (j + 1) & mask {
		if t.slots[j] == 0 {
			t.slots[j] = s
			return
		}
	}
}

// strTable maps strings to values: an idxTable whose references are
// positions in its own entries, which hold the keys in insertion order.
// For an index whose keys live nowhere else (call ids).
type strTable[V any] struct {
	idx     idxTable
	entries []strEntry[V]
}

// strEntry is one key and its value.
type strEntry[V any] struct {
	key string
	val V
}

// len returns the number of entries.
func (t *strTable[V]) len() int { return len(t.entries) }

// key returns entry i's key.
func (t *strTable[V]) key(i int) string { return t.entries[i].key }

// val returns a pointer to entry i's value, valid until the next insert.
func (t *strTable[V]) val(i int) *V { return &t.entries[i].val }

// find returns the index of k's entry, or -1.
func (t *strTable[V]) find(k string) int { return t.idx.find(k, t.key) }

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
	e, sp := t.idx.probe(k, t.key)
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
	t.idx.add(sp, e)
	return e, true
}
