package scheduler

import "github.com/prunesched/prunesched/events"

// trigger is one row of the scheduled mode's trigger table. Every rule has
// one signature: it looks at the moment a request is about to be sent (and
// the session's facts in the core) and says whether it fires.
type trigger struct {
	name  events.Trigger
	fires func(c *Core, m moment) bool
	scope scope
	// served, when set, records that the trigger consumed what made it
	// fire (a flush request is served once).
	served func(c *Core, m moment)
}

// scope is what a trigger releases when it fires.
type scope uint8

const (
	// releaseAll applies everything pending.
	releaseAll scope = iota
	// releaseClosedWork applies the marks on items inside the subtasks
	// just closed; the others go mark by mark (perMark).
	releaseClosedWork
)

// triggers is the scheduled mode's ordered trigger table: the first rule
// that fires decides. When none fires, marks go one by one (perMark:
// restores at next_request, never-sent prunes at never_sent, sent prunes by
// break_even).
var triggers = [...]trigger{
	{name: events.TriggerManual, fires: ruleManualFlush, scope: releaseAll, served: flushServed},
	{name: events.TriggerNeverSent, fires: ruleFirstRequest, scope: releaseAll},
	{name: events.TriggerCacheExpired, fires: ruleCacheExpired, scope: releaseAll},
	{name: events.TriggerPressure, fires: rulePressure, scope: releaseAll},
	{name: events.TriggerSubtask, fires: ruleSubtaskBoundary, scope: releaseClosedWork},
}

// ruleFirstRequest (trigger never_sent): no request was sent before this
// one, so nothing is cached and every pending mark applies at once.
func ruleFirstRequest(_ *Core, m moment) bool { return m.cs.prev < 0 }
