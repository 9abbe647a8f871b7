package scheduler

import "sort"

// closedSubtask is a SubtaskClosed fact and the fact index its subtask
// opened at.
type closedSubtask struct {
	fact, opened int
}

// ruleSubtaskBoundary (trigger subtask_boundary): one or more subtasks
// closed between the previous request and this one (subtasksClosed). Work just closed
// sits at the end of the cached prefix, so cutting inside it invalidates
// only that tail: pending marks on items inside the closed subtasks apply
// at the boundary (still priced on the application), while marks on
// earlier items, whose cut would break the whole cached suffix, go by
// break-even like any other. The Context Lab showed why: releasing every
// pending mark at a boundary broke 0.81 M cached tokens for 2.80 USD of
// cache writes against 0.86 USD of expected saving.
func ruleSubtaskBoundary(c *Core, m moment) bool {
	_, ok := subtasksClosed(c, m)
	return ok
}

// subtasksClosed returns the earliest fact index at which the subtasks
// that closed between the previous request and this one opened; ok is
// false when none closed.
func subtasksClosed(c *Core, m moment) (lo int, ok bool) {
	if m.cs.prev < 0 {
		return 0, false
	}
	after := c.reqs[m.cs.prev].fact
	k := sort.Search(len(c.subtasks), func(i int) bool { return c.subtasks[i].fact > after })
	lo, found := 0, false
	for ; k < len(c.subtasks) && c.subtasks[k].fact < m.f; k++ {
		if !found || c.subtasks[k].opened < lo {
			lo = c.subtasks[k].opened
		}
		found = true
	}
	return lo, found
}
