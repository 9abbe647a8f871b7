package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/policy"
)

// warmSession: a 2,000-token duplicate early in a 22,000-token cached
// prefix, marked after r1; r2 follows after gap, with extra facts before it.
func warmSession(gap time.Duration, between func(b *sb)) *sb {
	return warmSessionWith(gap, nil, between)
}

// warmSessionWith is warmSession with extra facts (before) placed just
// before the duplicate's first copy.
func warmSessionWith(gap time.Duration, before, between func(b *sb)) *sb {
	b := newSession()
	b.msg("sys", 2000)
	if before != nil {
		before(b)
	}
	b.result("a", 2000)
	b.msg("bulk", 18000)
	b.req("r1")
	cb := b.result("a2", 10)
	b.mark("a", events.Prune, cb)
	b.at(gap)
	if between != nil {
		between(b)
	}
	b.req("r2")
	return b
}

func TestScheduledTriggers(t *testing.T) {
	type want struct {
		apply   bool
		trigger events.Trigger
		zero    bool   // CacheCost must be 0
		reason  string // substring of the pending reason when not applied
		radius  int    // checked when >= 0
		pending int
	}
	cases := []struct {
		name string
		b    *sb
		pol  func(p *policy.Policy)
		want want
	}{
		{"warm small saving defers", warmSession(30*time.Second, nil), nil,
			want{reason: "cache warm: break", radius: -1, pending: 1}},
		{"cache expired after 6 minutes", warmSession(6*time.Minute, nil), nil,
			want{apply: true, trigger: events.TriggerCacheExpired, zero: true, radius: 0}},
		{"5 minutes exactly is still warm", warmSession(5*time.Minute, nil), nil,
			want{reason: "cache warm", radius: -1, pending: 1}},
		// The marked item lies inside the subtask that just closed: its
		// cut is released at the boundary, priced on the application.
		{"subtask boundary releases the closed work's marks", warmSessionWith(30*time.Second, func(b *sb) {
			b.fact(&events.SubtaskOpened{Subtask: "t1"})
		}, func(b *sb) {
			b.fact(&events.SubtaskClosed{Subtask: "t1"})
		}), nil, want{apply: true, trigger: events.TriggerSubtask, radius: 20000}},
		// A subtask closed, but the marked item predates it: cutting there
		// would break the whole cached suffix, so it waits for break-even.
		{"subtask boundary leaves earlier marks to break-even", warmSession(30*time.Second, func(b *sb) {
			b.fact(&events.SubtaskOpened{Subtask: "t1"})
			b.fact(&events.SubtaskClosed{Subtask: "t1"})
		}), nil, want{reason: "cache warm: break", radius: -1, pending: 1}},
		// A close without a recorded opening has no known span: nothing is
		// inside it.
		{"subtask closed without an opening", warmSession(30*time.Second, func(b *sb) {
			b.fact(&events.SubtaskClosed{Subtask: "t1"})
		}), nil, want{reason: "cache warm: break", radius: -1, pending: 1}},
		{"pressure absolute", warmSession(30*time.Second, nil), func(p *policy.Policy) {
			p.Scheduler.PressureTokens = 20000
		}, want{apply: true, trigger: events.TriggerPressure, radius: 20000}},
		{"pressure percent of window", warmSession(30*time.Second, nil), func(p *policy.Policy) {
			p.Scheduler.PressurePercent = 10 // 10% of 200k = 20k < 22,010
		}, want{apply: true, trigger: events.TriggerPressure, radius: 20000}},
		{"pressure below threshold defers", warmSession(30*time.Second, nil), func(p *policy.Policy) {
			p.Scheduler.PressureTokens = 50000
		}, want{reason: "cache warm", radius: -1, pending: 1}},
		{"manual flush", warmSession(30*time.Second, func(b *sb) {
			b.fact(&events.FlushRequest{By: "alice"})
		}), nil,
			want{apply: true, trigger: events.TriggerManual, radius: 20000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := pol(policy.ModeScheduled)
			if tc.pol != nil {
				tc.pol(&p)
			}
			c := New(p, "", "s1")
			var apps []*events.Application
			for _, ev := range tc.b.evs {
				if r, ok := ev.Data.(*events.ModelRequest); ok {
					if a := c.Decide(ev.Time, r.Request, c.facts); a != nil {
						apps = append(apps, appOf(*a))
					}
				}
				c.Observe(ev)
			}
			if !tc.want.apply {
				testutil.Equal(t, len(apps), 0, "applications")
				pend := c.Pending()
				testutil.Equal(t, len(pend), tc.want.pending, "pending")
				n, oldest := c.PendingSummary()
				testutil.Equal(t, n, len(pend), "pending summary")
				var want time.Time
				for _, pm := range pend {
					if want.IsZero() || pm.Since.Before(want) {
						want = pm.Since
					}
				}
				if !oldest.Equal(want) {
					t.Fatalf("pending summary oldest = %v, want %v", oldest, want)
				}
				if !strings.Contains(pend[0].Reason, tc.want.reason) {
					t.Fatalf("reason %q does not contain %q", pend[0].Reason, tc.want.reason)
				}
				return
			}
			testutil.Equal(t, len(apps), 1, "applications")
			a := apps[0]
			testutil.Equal(t, a.Trigger, tc.want.trigger, "trigger")
			if tc.want.zero {
				testutil.Near(t, a.CacheCost, 0, "cache cost")
			}
			if tc.want.radius >= 0 {
				testutil.Equal(t, a.MutationRadius, tc.want.radius, "radius")
			}
			testutil.Equal(t, a.FirstDivergence, 2000, "first divergence")
			testutil.Equal(t, len(c.Pending()), 0, "pending after")
			if n, oldest := c.PendingSummary(); n != 0 || !oldest.IsZero() {
				t.Fatalf("pending summary after = %d, %v; want 0, zero", n, oldest)
			}
		})
	}
}

func TestWarmDeferReasonNumbers(t *testing.T) {
	b := warmSession(30*time.Second, nil)
	c, apps := drive(t, pol(policy.ModeScheduled), b.evs)
	testutil.Equal(t, len(apps), 0, "applications")
	// R = 22,000 - 2,000 = 20,000 -> 20,000 x 3.45 / 1e6 = 0.069 USD;
	// n = 2,000 - 27 (placeholder.Tokens of the mark's placeholder) = 1,973
	// -> 1,973 x (3.75 + 5 x 0.30) / 1e6 = 0.01035825 USD.
	testutil.Equal(t, PlaceholderEstimate(&events.Mark{Rung: events.L0, Reason: events.ReasonDuplicateOutput}, 2000), 27, "placeholder")
	testutil.Equal(t, c.Pending()[0].Reason, "cache warm: break 0.069 USD > saving 0.0104 USD over 5 requests", "reason")
}

func TestNeverSentAppliesAtOnce(t *testing.T) {
	b := newSession()
	b.msg("sys", 2000)
	b.msg("bulk", 18000)
	b.req("r1")
	b.result("x", 3000)
	cy := b.result("y", 3000)
	b.mark("x", events.Prune, cy)
	b.at(20 * time.Second).req("r2")
	_, apps := drive(t, pol(policy.ModeScheduled), b.evs)
	testutil.Equal(t, len(apps), 1, "applications")
	a := appOf(apps[0])
	testutil.Equal(t, a.Trigger, events.TriggerNeverSent, "trigger")
	testutil.Equal(t, a.FirstDivergence, 20000, "first divergence")
	testutil.Equal(t, a.MutationRadius, 0, "radius")
	testutil.Near(t, a.CacheCost, 0, "cost")
}

func TestNoRequestYetIsNeverSent(t *testing.T) {
	b := newSession()
	b.result("x", 3000)
	cy := b.result("y", 3000)
	b.mark("x", events.Prune, cy)
	b.req("r1")
	_, apps := drive(t, pol(policy.ModeScheduled), b.evs)
	testutil.Equal(t, len(apps), 1, "applications")
	testutil.Equal(t, appOf(apps[0]).Trigger, events.TriggerNeverSent, "trigger")
}

// TestBreakEvenByHand checks the break-even rule on numbers worked by hand
// (claude-sonnet-4-5, 5m tier: w = 3.75, r = 0.30 USD/MTok, H = 5).
func TestBreakEvenByHand(t *testing.T) {
	build := func(tail int) *sb {
		b := newSession()
		b.msg("sys", 10000)
		b.result("a", 3000) // placeholder 27 (placeholder.Tokens) -> n = 2,973
		b.msg("tail", tail)
		b.req("r1")
		cb := b.msg("u", 10)
		b.mark("a", events.Prune, cb)
		b.at(time.Minute).req("r2")
		return b
	}
	// tail 500: D = 10,000, P = 13,500, R = 3,500.
	// break = 3,500 x 3.45 / 1e6 = 0.012075
	// saving = 2,973 x (3.75 + 5 x 0.30) / 1e6 = 0.01560825 > break: apply.
	_, apps := drive(t, pol(policy.ModeScheduled), build(500).evs)
	testutil.Equal(t, len(apps), 1, "applications")
	a := appOf(apps[0])
	testutil.Equal(t, a.Trigger, events.TriggerBreakEven, "trigger")
	testutil.Equal(t, a.FirstDivergence, 10000, "divergence")
	testutil.Equal(t, a.MutationRadius, 3500, "radius")
	testutil.Equal(t, a.TokensRemoved, 2973, "removed")
	testutil.Near(t, a.CacheCost, 0.012075, "cache cost")
	testutil.Near(t, a.ExpectedSaving, 0.01560825, "saving")

	// tail 2,000: R = 5,000, break = 0.01725 > 0.01560825: defer.
	c, apps := drive(t, pol(policy.ModeScheduled), build(2000).evs)
	testutil.Equal(t, len(apps), 0, "applications")
	testutil.Equal(t, c.Pending()[0].Reason, "cache warm: break 0.0173 USD > saving 0.0156 USD over 5 requests", "reason")

	// The same with horizon 10: saving = 2,975 x 6.75 / 1e6 = 0.02008125 > 0.01725.
	p := pol(policy.ModeScheduled)
	p.Scheduler.HorizonRequests = 10
	_, apps = drive(t, p, build(2000).evs)
	testutil.Equal(t, len(apps), 1, "applications (H=10)")
}

// TestBreakEvenPicksBestSuffix: a late mark that pays for itself applies,
// an early one that does not stays pending.
func TestBreakEvenPicksBestSuffix(t *testing.T) {
	b := newSession()
	b.result("early", 3000)
	b.msg("mid", 30000)
	b.result("late", 3000)
	b.msg("tail", 200)
	b.req("r1")
	cu := b.msg("u", 10)
	me := b.mark("early", events.Prune, cu)
	ml := b.mark("late", events.Prune, cu)
	b.at(time.Minute).req("r2")
	c, apps := drive(t, pol(policy.ModeScheduled), b.evs)
	testutil.Equal(t, len(apps), 1, "applications")
	a := appOf(apps[0])
	testutil.Equal(t, len(a.Marks), 1, "marks")
	testutil.Equal(t, a.Marks[0], ml, "mark")
	testutil.Equal(t, a.MutationRadius, 3200, "radius")
	pend := c.Pending()
	testutil.Equal(t, len(pend), 1, "pending")
	testutil.Equal(t, pend[0].Mark, me, "pending mark")
}

func TestOneHourTier(t *testing.T) {
	for _, tc := range []struct {
		name string
		r1   *events.ModelRequest
		want int // applications at r2 after a 10-minute gap
	}{
		{"cache_ttl 1h keeps warm", &events.ModelRequest{Request: "r1", CacheTTL: "1h"}, 0},
		{"usage 1h writes keep warm", &events.ModelRequest{Request: "r1", Usage: &events.Usage{InputTokens: 10, CacheWriteTokens: 22000, CacheWrite1hTokens: 22000}}, 0},
		{"5m tier expires", &events.ModelRequest{Request: "r1", Usage: &events.Usage{InputTokens: 10, CacheWriteTokens: 22000}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newSession()
			b.msg("sys", 2000)
			b.result("a", 2000)
			b.msg("bulk", 18000)
			b.reqWith(tc.r1)
			cb := b.result("a2", 10)
			b.mark("a", events.Prune, cb)
			b.at(10 * time.Minute).req("r2")
			_, apps := drive(t, pol(policy.ModeScheduled), b.evs)
			testutil.Equal(t, len(apps), tc.want, "applications")
		})
	}
	// The 1h tier prices the break at the 1h write price (6.00 - 0.30).
	b := newSession()
	b.msg("sys", 2000)
	b.result("a", 2000)
	b.msg("bulk", 18000)
	b.reqWith(&events.ModelRequest{Request: "r1", CacheTTL: "1h"})
	cb := b.result("a2", 10)
	b.mark("a", events.Prune, cb)
	b.at(10 * time.Minute).req("r2")
	c, _ := drive(t, pol(policy.ModeScheduled), b.evs)
	testutil.Equal(t, c.Pending()[0].Reason, "cache warm: break 0.114 USD > saving 0.0148 USD over 5 requests", "reason")
}

func TestUsageReportCalibratesCachedPrefix(t *testing.T) {
	// The report says r1 cached nothing (no read, no write): applying
	// breaks nothing, whatever the model would predict.
	b := newSession()
	b.msg("sys", 2000)
	b.result("a", 2000)
	b.msg("bulk", 18000)
	b.reqWith(&events.ModelRequest{Request: "r1", Usage: &events.Usage{InputTokens: 22000}})
	cb := b.result("a2", 10)
	b.mark("a", events.Prune, cb)
	b.at(time.Minute).req("r2")
	_, apps := drive(t, pol(policy.ModeScheduled), b.evs)
	testutil.Equal(t, len(apps), 1, "applications")
	testutil.Equal(t, appOf(apps[0]).Trigger, events.TriggerCacheExpired, "trigger")

	// The report says only the first 2,500 tokens were cached (input
	// tail 19,500): the radius is 500, not 20,000.
	b = newSession()
	b.msg("sys", 2000)
	b.result("a", 2000)
	b.msg("bulk", 18000)
	b.reqWith(&events.ModelRequest{Request: "r1", Usage: &events.Usage{InputTokens: 19500, CacheWriteTokens: 2500}})
	cb = b.result("a2", 10)
	b.mark("a", events.Prune, cb)
	b.at(time.Minute).req("r2")
	_, apps = drive(t, pol(policy.ModeScheduled), b.evs)
	testutil.Equal(t, len(apps), 1, "applications")
	testutil.Equal(t, appOf(apps[0]).MutationRadius, 500, "radius")
	testutil.Equal(t, appOf(apps[0]).Trigger, events.TriggerBreakEven, "trigger")
}

func TestHostCompactionResets(t *testing.T) {
	b := newSession()
	b.msg("sys", 2000)
	b.result("a", 2000)
	b.msg("bulk", 18000)
	b.req("r1")
	ca := b.result("a2", 10)
	b.mark("a", events.Prune, ca) // its item leaves with the compaction
	b.fact(&events.HostCompaction{Host: "claude-code"})
	b.msg("summary", 1500)
	b.result("n", 3000)
	cn := b.result("n2", 10)
	b.mark("n", events.Prune, cn)
	b.at(30 * time.Second).req("r2")
	c, apps := drive(t, pol(policy.ModeScheduled), b.evs)
	testutil.Equal(t, len(apps), 1, "applications")
	a := appOf(apps[0])
	testutil.Equal(t, len(a.Marks), 1, "marks")
	testutil.Equal(t, a.Items[0], "n", "item")
	testutil.Equal(t, a.Trigger, events.TriggerCacheExpired, "trigger")
	testutil.Equal(t, a.FirstDivergence, 1500, "divergence (offset in new context)")
	testutil.Equal(t, a.MutationRadius, 0, "radius")
	l := c.Economics()
	testutil.Equal(t, l.Requests[1].Tokens, 1500+PlaceholderEstimate(&events.Mark{Rung: events.L0, Reason: events.ReasonDuplicateOutput}, 3000)+10, "r2 tokens")
	testutil.Equal(t, l.Requests[1].CacheRead, 0, "r2 cache read")
	testutil.Equal(t, len(c.Pending()), 0, "pending")
}

// TestHorizonFromSession: the break-even horizon is the session's own
// warm run so far (requests since the cache was last cold, bounded), not a
// fixed 5. After 30 warm requests the
// cut that a 5-request horizon refuses (break 0.01725 > saving 0.0156)
// pays: saving = 2,975 x (3.75 + 30 x 0.30) / 1e6 = 0.0379 > break.
func TestHorizonFromSession(t *testing.T) {
	build := func() *sb {
		b := newSession()
		b.msg("sys", 10000)
		b.result("a", 3000)
		b.msg("tail", 2000)
		for i := range 30 {
			b.at(time.Duration(i) * 10 * time.Second).req(fmt.Sprintf("w%d", i))
		}
		cb := b.msg("u", 10)
		b.mark("a", events.Prune, cb)
		b.at(310 * time.Second).req("r")
		return b
	}
	c, apps := drive(t, pol(policy.ModeScheduled), build().evs)
	testutil.Equal(t, len(apps), 1, "applications (estimated horizon 30)")
	testutil.Equal(t, appOf(apps[0]).Trigger, events.TriggerBreakEven, "trigger")
	testutil.Equal(t, len(c.Pending()), 0, "pending")

	// The run restarts at a cold cache: 30 requests, a gap past the TTL,
	// then the mark after two warm requests: the horizon is 5 again.
	b := newSession()
	b.msg("sys", 10000)
	b.result("a", 3000)
	b.msg("tail", 2000)
	for i := range 30 {
		b.at(time.Duration(i) * 10 * time.Second).req(fmt.Sprintf("w%d", i))
	}
	b.at(20 * time.Minute).req("cold")
	b.at(20*time.Minute + 10*time.Second).req("warm")
	cb := b.msg("u", 10)
	b.mark("a", events.Prune, cb)
	b.at(20*time.Minute + 20*time.Second).req("r")
	c, apps = drive(t, pol(policy.ModeScheduled), b.evs)
	testutil.Equal(t, len(apps), 0, "applications (new warm run)")
	if r := c.Pending()[0].Reason; !strings.Contains(r, "over 5 requests") {
		t.Fatalf("reason %q", r)
	}

	p := pol(policy.ModeScheduled)
	p.Scheduler.HorizonRequests = 5
	c, apps = drive(t, p, build().evs)
	testutil.Equal(t, len(apps), 0, "applications (fixed horizon 5)")
	if r := c.Pending()[0].Reason; !strings.Contains(r, "over 5 requests") {
		t.Fatalf("reason %q", r)
	}
}

// TestTriggerTableOrder pins the scheduled mode's trigger order: a flush
// wins over everything, then a first request, an expired cache, pressure,
// and last a subtask boundary, the only trigger that releases part of
// what is pending.
func TestTriggerTableOrder(t *testing.T) {
	want := []events.Trigger{events.TriggerManual, events.TriggerNeverSent, events.TriggerCacheExpired, events.TriggerPressure, events.TriggerSubtask}
	if len(triggers) != len(want) {
		t.Fatalf("%d triggers, want %d", len(triggers), len(want))
	}
	for i, tr := range triggers {
		if tr.name != want[i] {
			t.Errorf("trigger %d is %s, want %s", i, tr.name, want[i])
		}
		if (tr.scope == releaseClosedWork) != (tr.name == events.TriggerSubtask) {
			t.Errorf("%s: scope %d", tr.name, tr.scope)
		}
	}
}
