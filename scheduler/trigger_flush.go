package scheduler

// ruleManualFlush (trigger manual_flush): a person asked, through Flush,
// for everything pending to apply at the next request, whatever it costs.
func ruleManualFlush(c *Core) bool { return c.flush }
