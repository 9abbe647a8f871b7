package scheduler

import "sort"

// ruleSubtaskBoundary (trigger subtask_boundary): a SubtaskClosed fact lies
// between the previous request and this one. Work just closed is where a
// break invalidates the least that will be reused, so everything pending
// applies, at its priced cost.
func ruleSubtaskBoundary(c *Core, m moment) bool {
	if m.cs.prev < 0 {
		return false
	}
	after := c.reqs[m.cs.prev].fact
	k := sort.SearchInts(c.subtasks, after+1)
	return k < len(c.subtasks) && c.subtasks[k] < m.f
}
