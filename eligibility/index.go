package eligibility

import "hash/maphash"

// itemIndex maps item ids to items (Core.byID): open addressing with linear
// probing over pointer-free slots holding a 32-bit hash of the id and the
// item's position in Core.items. The garbage collector never scans it,
// storing into it needs no write barrier, and growing it hashes no id again
// (a slot's place follows from its stored hash). Items are never removed.
// The zero value is empty; set seed (maphash.MakeSeed) before the first add.
// Lookups only: nothing depends on the seed or the slot order.
type itemIndex struct {
	seed  maphash.Seed
	slots []idxSlot // len is 0 or a power of two
	n     int
}

// idxSlot is one slot: pos is the item's position + 1 (0: empty).
type idxSlot struct {
	hash uint32
	pos  uint32
}

// minIndexSlots is the first table size.
const minIndexSlots = 64

func (x *itemIndex) hash(id string) uint32 {
	h := maphash.String(x.seed, id)
	return uint32(h) ^ uint32(h>>32)
}

// get returns the item with id, or nil. items is Core.items.
func (x *itemIndex) get(items *itemList, id string) *item {
	if x.n == 0 {
		return nil
	}
	return x.getHash(items, id, x.hash(id))
}

// getHash is get with the id's hash (x.hash(id)) known.
func (x *itemIndex) getHash(items *itemList, id string, h uint32) *item {
	if x.n == 0 {
		return nil
	}
	mask := uint32(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := x.slots[i]
		if s.pos == 0 {
			return nil
		}
		if s.hash == h {
			if it := items.at(int(s.pos - 1)); it.id == id {
				return it
			}
		}
	}
}

// add records that the item at position pos has the id whose hash (x.hash) is h; the id
// must not be in the index yet.
func (x *itemIndex) add(h uint32, pos int) {
	if 2*(x.n+1) > len(x.slots) {
		x.grow()
	}
	x.put(idxSlot{hash: h, pos: uint32(pos) + 1})
	x.n++
}

// put stores s in the first empty slot from its home on.
func (x *itemIndex) put(s idxSlot) {
	mask := uint32(len(x.slots) - 1)
	i := s.hash & mask
	for x.slots[i].pos != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = s
}

// grow doubles the table (keeping the load at most 1/2, so that probing
// for an absent id, what every new item does, stays short).
func (x *itemIndex) grow() {
	old := x.slots
	size := 2 * len(old)
	if size < minIndexSlots {
		size = minIndexSlots
	}
	x.slots = make([]idxSlot, size)
	for _, s := range old {
		if s.pos != 0 {
			x.put(s)
		}
	}
}
