package scheduler

import (
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
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
	testutil.Equal(t, len(apps), 2, "applications")
	a0, a1 := appOf(apps[0]), appOf(apps[1])
	testutil.Equal(t, a0.Request, "r2", "app0 request")
	testutil.Equal(t, len(a0.Marks), 1, "app0 marks")
	testutil.Equal(t, a0.Marks[0], ma, "app0 mark")
	testutil.Equal(t, a0.Trigger, events.TriggerNextRequest, "app0 trigger")
	testutil.Equal(t, a0.AfterIndex, r2, "app0 after")
	ph := PlaceholderEstimate(&events.Mark{Rung: events.L0, Reason: events.ReasonDuplicateOutput}, 2000)
	testutil.Equal(t, a0.PlaceholderTokens, ph, "app0 placeholder (placeholder.Tokens, not an assumed 60)")
	testutil.Equal(t, a0.TokensRemoved, 2000-ph, "app0 tokens removed")
	testutil.Equal(t, a1.Request, "r3", "app1 request")
	testutil.Equal(t, a1.Marks[0], mb, "app1 mark")
	testutil.Equal(t, apps[0].ID, events.DerivedID("apply", "", "s1", "r2"), "app id")
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
	testutil.Equal(t, len(apps), 1, "applications")
	a := appOf(apps[0])
	testutil.Equal(t, a.FirstDivergence, 1500, "first divergence")
	testutil.Equal(t, a.MutationRadius, 4000-1500, "mutation radius")
	// sonnet 5m: (3.75 - 0.30) per MTok.
	testutil.Near(t, a.CacheCost, 2500*3.45/1e6, "cache cost")
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
	testutil.Equal(t, len(apps), 0, "applications")
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
	testutil.Equal(t, len(apps), 2, "applications")
	a := appOf(apps[1])
	testutil.Equal(t, a.Marks[0], mk, "restore mark")
	testutil.Equal(t, a.Trigger, events.TriggerNextRequest, "restore trigger")
	testutil.Equal(t, a.TokensRemoved, -(2000 - PlaceholderEstimate(&events.Mark{Rung: events.L0, Reason: events.ReasonDuplicateOutput}, 2000)), "restore net")
	l := c.Economics()
	testutil.Equal(t, l.Requests[1].Tokens, 3000+2000+20, "r2 tokens")
}
