package scheduler

import "sort"

// span is the part of c.items in the bundle rendered at fact index f:
// items that entered before f and after the last host compaction before f.
type span struct{ f, lo, hi int }

func (c *Core) spanAt(f int) span {
	hi := sort.Search(len(c.items), func(i int) bool { return c.items[i].fact >= f })
	lo := 0
	if h := c.lastCompactionBefore(f); h >= 0 {
		lo = sort.Search(len(c.items), func(i int) bool { return c.items[i].fact >= h })
	}
	return span{f: f, lo: lo, hi: max(lo, hi)}
}

// lastCompactionBefore is the fact index of the last HostCompaction before
// f, or -1.
func (c *Core) lastCompactionBefore(f int) int {
	k := sort.SearchInts(c.compactions, f)
	if k == 0 {
		return -1
	}
	return c.compactions[k-1]
}

// tokens is the rendered size of the bundle in s, as decisions count it.
func (c *Core) tokens(s span) int { return c.tokensAs(s, false) }

// tokensAs is tokens, priced as the economics price when priced (see
// item.sizeAt).
func (c *Core) tokensAs(s span, priced bool) int {
	n := 0
	for _, it := range c.items[s.lo:s.hi] {
		_, sz := it.sizeAt(s.f, priced)
		n += sz
	}
	return n
}

// commonPrefix is the token length of the longest item-aligned common
// prefix of the bundles rendered in a and b: the same items in the same
// render state, priced as the economics price (only the economics ask).
// Bundles on either side of a host compaction share nothing.
func (c *Core) commonPrefix(a, b span) int {
	if a.lo != b.lo {
		return 0
	}
	n := 0
	for i := a.lo; i < a.hi && i < b.hi; i++ {
		it := c.items[i]
		pa, sa := it.sizeAt(a.f, true)
		pb, sb := it.sizeAt(b.f, true)
		if pa != pb || sa != sb {
			return n
		}
		n += sa
	}
	return n
}

// offsets returns the token offset of every item of s within the bundle
// rendered in s, indexed by position in c.items minus s.lo, and the total.
// The slice is reused by the next call.
func (c *Core) offsets(s span) ([]int, int) {
	off := c.scratch.off
	if n := s.hi - s.lo; cap(off) >= n {
		off = off[:n]
	} else {
		off = make([]int, n, n+n/4)
	}
	c.scratch.off = off
	n := 0
	for i, it := range c.items[s.lo:s.hi] {
		off[i] = n
		_, sz := it.stateAt(s.f)
		n += sz
	}
	return off, n
}
