package scheduler

import (
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

func TestNextRequestAppliesEligibleRespectingCauseIndex(t *testing.T) {
	b := newSession()
	b.msg("u1", 100)
	b.result("a", 2000)
	b.req("r1")
	cb := b.result("b", 2000)
	ma := b.mark("a", events.Prune, cb) // eligible at r2
	r2 := b.req("r2")
	// A mark caused by the request fact itself is not eligible at it,
	// even though it is observed before Decide is called for r2.
	mb := b.mark("b", events.Prune, r2)
	b.req("r3")

	c := New(pol(policy.ModeNextRequest), "", "s1")
	var apps []events.Event
	for _, ev := range b.evs {
		if ev.Type == events.TypeMark {
			c.Observe(ev) // marks first: only CauseIndex may gate them
		}
	}
	for _, ev := range b.evs {
		if r, ok := ev.Data.(*events.ModelRequest); ok {
			if a := c.Decide(ev.Time, r.Request, c.facts); a != nil {
				apps = append(apps, *a)
			}
		}
		c.Observe(ev)
	}
	require_eq(t, "applications", len(apps), 2)
	a0, a1 := appOf(apps[0]), appOf(apps[1])
	require_eq(t, "app0 request", a0.Request, "r2")
	require_eq(t, "app0 marks", len(a0.Marks), 1)
	require_eq(t, "app0 mark", a0.Marks[0], ma)
	require_eq(t, "app0 trigger", a0.Trigger, events.TriggerNextRequest)
	require_eq(t, "app0 after", a0.AfterIndex, r2)
	ph := PlaceholderEstimate(&events.Mark{Rung: events.L0, Reason: events.ReasonDuplicateOutput}, 2000)
	require_eq(t, "app0 placeholder (placeholder.Tokens, not an assumed 60)", a0.PlaceholderTokens, ph)
	require_eq(t, "app0 tokens removed", a0.TokensRemoved, 2000-ph)
	require_eq(t, "app1 request", a1.Request, "r3")
	require_eq(t, "app1 mark", a1.Marks[0], mb)
	require_eq(t, "app id", apps[0].ID, events.DerivedID("apply", "", "s1", "r2"))
	// Deciding the same request again applies nothing twice.
	if a := c.Decide(t0, "r2", r2); a != nil {
		t.Fatalf("second Decide for r2 returned %v", a)
	}
	if p := c.Pending(); len(p) != 0 {
		t.Fatalf("pending after all applied: %v", p)
	}
}

func TestNextRequestFirstDivergenceAndRadius(t *testing.T) {
	b := newSession()
	b.msg("sys", 1500)
	b.result("a", 2000)
	b.msg("m", 500)
	b.req("r1")
	cb := b.result("b", 2000)
	b.mark("a", events.Prune, cb)
	b.at(time.Minute).req("r2")
	_, apps := drive(t, pol(policy.ModeNextRequest), b.evs)
	require_eq(t, "applications", len(apps), 1)
	a := appOf(apps[0])
	require_eq(t, "first divergence", a.FirstDivergence, 1500)
	require_eq(t, "mutation radius", a.MutationRadius, 4000-1500)
	// sonnet 5m: (3.75 - 0.30) per MTok.
	require_near(t, "cache cost", a.CacheCost, 2500*3.45/1e6)
}

func TestLatestMarkWinsAndDeferCancels(t *testing.T) {
	b := newSession()
	b.result("a", 2000)
	c1 := b.msg("x", 10)
	b.mark("a", events.Prune, c1)
	c2 := b.msg("y", 10)
	b.add(&events.Mark{Item: "a", Decision: events.Abstain, Reason: events.ReasonStateChanged, Cause: "e9", CauseIndex: c2, PolicyVersion: "test@1"})
	b.req("r1")
	_, apps := drive(t, pol(policy.ModeNextRequest), b.evs)
	require_eq(t, "applications", len(apps), 0)
}

func TestKeepRestoresAppliedPrune(t *testing.T) {
	b := newSession()
	b.msg("sys", 3000)
	b.result("a", 2000)
	c1 := b.msg("x", 10)
	b.mark("a", events.Prune, c1)
	b.req("r1")
	c2 := b.msg("y", 10)
	mk := b.mark("a", events.Keep, c2)
	b.req("r2")
	c, apps := drive(t, pol(policy.ModeScheduled), b.evs)
	require_eq(t, "applications", len(apps), 2)
	a := appOf(apps[1])
	require_eq(t, "restore mark", a.Marks[0], mk)
	require_eq(t, "restore trigger", a.Trigger, events.TriggerNextRequest)
	require_eq(t, "restore net", a.TokensRemoved, -(2000 - PlaceholderEstimate(&events.Mark{Rung: events.L0, Reason: events.ReasonDuplicateOutput}, 2000)))
	l := c.Economics()
	require_eq(t, "r2 tokens", l.Requests[1].Tokens, 3000+2000+20)
}
