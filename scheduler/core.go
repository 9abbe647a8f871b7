package scheduler

import (
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

// moment is everything a trigger may look at when the request at fact
// index f is about to be sent at time at.
type moment struct {
	f         int
	at        time.Time
	cs        cacheState
	prev      span // bundle of the previous request (empty when none)
	cur       span // bundle at f before this decision
	prevTotal int  // tokens of prev
	curTotal  int  // tokens of cur
	horizon   int
	// samePrefix is true when prev and cur render the same context (no
	// host compaction between), so offsets in prev are meaningful.
	samePrefix bool
	// prevOff are the token offsets of prev's items (offsets), when
	// samePrefix.
	prevOff []int
}

// Decide is called for the model request that is the session's fact number
// factIndex, dispatched at time at, with request id req. It returns the
// application to publish (id events.DerivedID("apply", tenant, session,
// req), Time at, AfterIndex factIndex) or nil when nothing applies now, and
// records the application in the core as if observed. Deciding a request
// whose application was already observed returns nil.
//
// Only facts with index < factIndex and marks with CauseIndex < factIndex
// are considered, so the answer does not depend on what else the core has
// seen. Marks not applied stay pending; Pending reports why.
func (c *Core) Decide(at time.Time, req string, factIndex int) *events.Event {
	id := events.DerivedID("apply", c.tenant, c.session, req)
	if c.appsSeen[id] {
		return nil
	}
	m, chosen, trig := c.judge(at, factIndex)
	if len(chosen) == 0 {
		return nil
	}
	chosen = flatten(chosen)
	app := c.build(m, req, chosen, trig)
	ev := events.New(id, c.tenant, c.session, at, app)
	c.Observe(ev)
	for _, cd := range chosen {
		delete(c.reasons, cd.mk.id)
	}
	return &ev
}

// judge is Decide without its record: it picks the marks to apply at fact
// index f at time at and sets c.reasons (and the triggers' served state)
// as of this decision.
func (c *Core) judge(at time.Time, f int) (moment, []candidate, events.Trigger) {
	cands := c.candidates(f)
	clear(c.reasons)
	if len(cands) == 0 {
		return moment{}, nil, ""
	}
	m := c.momentAt(f, at)
	for i := range cands {
		cd := &cands[i]
		if m.samePrefix && cd.pos >= m.prev.lo && cd.pos < m.prev.hi {
			cd.sent = true
			cd.offset = m.prevOff[cd.pos-m.prev.lo]
		}
	}
	chosen, trig := c.choose(m, cands)
	return m, chosen, trig
}

// ObserveDecided observes an application Decide made (in this process or
// another, before a restart) at the core's current position: its
// AfterIndex is Facts() and its id is Decide's for its request. Before
// observing it, the core judges that request again at the application's
// time, as Decide did, so the reasons Pending gives for the marks it left
// waiting, and the triggers' state, are that decision's and not the
// previous one's. Any other application is observed as Observe does.
func (c *Core) ObserveDecided(ev events.Event) {
	p, ok := ev.Data.(*events.Application)
	if !ok || !c.owns(ev) || c.appsSeen[ev.ID] || p.AfterIndex != c.facts ||
		ev.ID != events.DerivedID("apply", c.tenant, c.session, p.Request) {
		c.Observe(ev)
		return
	}
	c.judge(ev.Time, p.AfterIndex)
	c.Observe(ev)
	for _, id := range p.Marks {
		delete(c.reasons, id)
	}
}

// Feed feeds one event of the session in log order, the rule every
// replay of a session follows (the pipeline's worker, its rebuilds, the
// lab, Simulate): a model request is first decided, at its own fact index
// (Decide(ev.Time, request, Facts()) before the core observes it, so only
// what came before it counts and the application takes effect in the
// bundle the request sends), then observed. It returns the application so
// decided, already recorded as observed, or nil: not a model request of
// this session, nothing to apply, or the request's application was
// already observed. Marks and applications are observed as Observe does.
func (c *Core) Feed(ev events.Event) *events.Event {
	var app *events.Event
	if r, ok := ev.Data.(*events.ModelRequest); ok && c.owns(ev) {
		app = c.Decide(ev.Time, r.Request, c.facts)
	}
	c.Observe(ev)
	return app
}

func (c *Core) momentAt(f int, at time.Time) moment {
	m := moment{f: f, at: at, cs: c.cacheAt(f, at, true), cur: c.spanAt(f)}
	// The horizon from the session itself: the requests of the warm run
	// so far (a run that has lasted k requests is expected to last about k
	// more before the cache goes cold, a free point);
	// policy.Scheduler.Horizon bounds it, or fixes it.
	run := 0
	if k := m.cs.prev; k >= 0 {
		run = k + 1 - c.reqs[k].runStart
	}
	m.horizon = c.pol.Scheduler.Horizon(run)
	m.curTotal = c.tokens(m.cur)
	if m.cs.prev >= 0 {
		m.prev = c.spanAt(c.reqs[m.cs.prev].fact)
		m.samePrefix = m.prev.lo == m.cur.lo
		if m.samePrefix {
			// One pass for both (Decide needs the offsets then).
			m.prevOff, m.prevTotal = c.offsets(m.prev)
		} else {
			m.prevTotal = c.tokens(m.prev)
		}
	}
	return m
}

// choose picks the marks to apply now and the trigger, recording in
// c.reasons why the others wait.
func (c *Core) choose(m moment, cands []candidate) ([]candidate, events.Trigger) {
	if c.plan != nil {
		return c.planned(cands)
	}
	switch c.pol.Scheduler.Mode {
	case policy.ModeNextRequest:
		return cands, events.TriggerNextRequest
	case policy.ModeImmediate:
		return cands, events.TriggerImmediate
	}
	for _, t := range triggers {
		if !t.fires(c, m) {
			continue
		}
		if t.served != nil {
			t.served(c, m)
		}
		if t.scope == releaseAll {
			return cands, t.name
		}
		return c.closedWork(m, cands)
	}
	return c.perMark(m, cands)
}

// closedWork releases the marks on items inside the subtasks that closed
// since the previous request (ruleSubtaskBoundary) and decides the others
// mark by mark.
func (c *Core) closedWork(m moment, cands []candidate) ([]candidate, events.Trigger) {
	lo, _ := subtasksClosed(c, m)
	inside := 0
	for i := range cands {
		if cands[i].it.fact >= lo {
			cands[i].boundary = true
			inside++
		}
	}
	chosen, trig := c.perMark(m, cands)
	if inside > 0 && len(chosen) > 0 {
		trig = events.TriggerSubtask
	}
	return chosen, trig
}

// build fills the application record for the chosen marks.
func (c *Core) build(m moment, req string, chosen []candidate, trig events.Trigger) *events.Application {
	app := &events.Application{Request: req, Trigger: trig, AfterIndex: m.f, PolicyVersion: c.version}
	for _, cd := range chosen {
		app.Marks = append(app.Marks, cd.mk.id)
		app.Items = append(app.Items, cd.mk.m.Item)
		app.TokensRemoved += cd.net
		app.PlaceholderTokens += cd.ph
	}
	app.FirstDivergence = c.firstDivergence(m, chosen)
	cached := 0
	if m.cs.warm {
		cached = m.cs.cached
	}
	app.MutationRadius = max(0, cached-app.FirstDivergence)
	app.CacheCost = breakCost(m.cs.pr, app.MutationRadius)
	app.ExpectedSaving = expectedSaving(m.cs.pr, app.TokensRemoved, m.horizon)
	return app
}

// firstDivergence is the token offset, in the bundle as last sent, of the
// first item the application changes. Items that were never sent diverge
// at the end of that bundle. With no previous request in the same context
// (none yet, or a host compaction since) it is the item's offset in the
// bundle about to be sent.
func (c *Core) firstDivergence(m moment, chosen []candidate) int {
	if !m.samePrefix {
		off, _ := c.offsets(m.cur)
		d := m.curTotal
		for _, cd := range chosen {
			d = min(d, off[cd.pos-m.cur.lo])
		}
		return d
	}
	d := m.prevTotal
	for _, cd := range chosen {
		if cd.sent {
			d = min(d, cd.offset)
		}
	}
	return d
}

// planned is choose under a hindsight plan: restores apply at once, a
// PRUNE when the plan's request has come (this request is c.reqs' next).
func (c *Core) planned(cands []candidate) ([]candidate, events.Trigger) {
	k := len(c.reqs)
	var chosen []candidate
	for _, cd := range cands {
		if at, ok := c.plan[cd.mk.id]; !cd.prune || (ok && at <= k) {
			chosen = append(chosen, cd)
		}
	}
	if len(chosen) == 0 {
		return nil, ""
	}
	sortByPos(chosen)
	return chosen, events.TriggerNextRequest
}
