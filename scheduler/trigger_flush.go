package scheduler

import "sort"

// ruleManualFlush (trigger manual_flush): a FlushRequest fact lies before
// this request and after the last request the flush already served. A
// person asked for everything pending to apply now, whatever it costs. The
// flush is a fact, so a replay of the log reproduces it.
func ruleManualFlush(c *Core, m moment) bool {
	k := sort.SearchInts(c.flushes, c.flushServed)
	return k < len(c.flushes) && c.flushes[k] < m.f
}

// flushServed records that the flushes before this request are served.
func flushServed(c *Core, m moment) { c.flushServed = m.f }
