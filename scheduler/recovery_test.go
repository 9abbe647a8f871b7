package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/policy"
)

// recoverySession: sys 2,000 | d1 5,000 | work 3,000, then five requests,
// each after a 500-token assistant message (u1..u4): r0 at 0, r1 at 30s,
// r2 at 60s, r3 after a 10-minute idle gap (cache expired), r4 30s later.
// Fact indices: r0 4, u1 5, r1 6, u2 7, r2 8, u3 9, r3 10, u4 11, r4 12.
// With pruneWork, "work" is marked (cause u2) so immediate timing removes
// it at r2, breaking the cached prefix after d1.
func recoverySession(model string, pruneWork bool) *sb {
	b := &sb{now: t0}
	b.fact(&events.SessionStarted{Format: "native", Provider: "anthropic", Model: model})
	b.msg("sys", 2000)
	b.result("d1", 5000)
	b.msg("work", 3000)
	b.req("r0")
	at := []time.Duration{30 * time.Second, time.Minute, 11 * time.Minute, 11*time.Minute + 30*time.Second}
	for i, d := range at {
		f := b.msg("u"+string(rune('1'+i)), 500)
		if pruneWork && i == 1 {
			b.mark("work", events.Prune, f)
		}
		b.at(d).req("r" + string(rune('1'+i)))
	}
	return b
}

// smallSession is below claude-haiku-4-5's 4,096-token minimum
// cacheable prompt: sys 200 | d1 700, r0 at 0, u1 100, r1 at 30s, u2 100,
// r2 at 60s (facts: r0 3, u1 4, r1 5, u2 6, r2 7).
func smallSession() *sb {
	b := &sb{now: t0}
	b.fact(&events.SessionStarted{Format: "native", Provider: "anthropic", Model: "claude-haiku-4-5"})
	b.msg("sys", 200)
	b.result("d1", 700)
	b.req("r0")
	b.msg("u1", 100)
	b.at(30 * time.Second).req("r1")
	b.msg("u2", 100)
	b.at(time.Minute).req("r2")
	return b
}

// TestPriceRecoveries prices recoveries by hand on recoverySession
// (claude-sonnet-4-5: write 3.75, read 0.30, output 15 USD per million)
// with a 60-token recovery call, so call + item = 5,060 tokens.
func TestPriceRecoveries(t *testing.T) {
	const (
		w, r   = 3.75, 0.30
		answer = 60
		carry  = 5000 + answer
		two    = carry + 2000 + answer // d1 and sys, a call each
	)
	m := func(tokens int, price float64) float64 { return float64(tokens) * price / 1e6 }
	for _, tc := range []struct {
		name string
		// evs is the session; with immediate, its marks apply
		// immediately, else nothing is removed.
		evs       []events.Event
		immediate bool
		recs      []Recovery
		// want: recoveries, extra requests, prompt tokens added, prompt
		// cost added, output price (USD per million).
		recoveries, requests, tokens int
		prompt, outPrice             float64
	}{
		{name: "never used again: no recovery", evs: recoverySession("claude-sonnet-4-5", false).evs, outPrice: 15},
		{
			// Used by r1's answer, cache warm: the extra request reads
			// r1's 10,500 and writes call + item; r2 and r4 read them,
			// r3 (after the expiry) writes them again.
			name: "warm cache", evs: recoverySession("claude-sonnet-4-5", false).evs,
			recs: []Recovery{{"d1", 7}}, recoveries: 1, requests: 1,
			tokens:   10500 + carry + 3*carry,
			prompt:   m(10500, r) + m(carry, w) + m(carry, r) + m(carry, w) + m(carry, r),
			outPrice: 15,
		},
		{
			// Used by r3's answer, sent after the cache expired: the
			// extra request follows r3 at once, so it reads the 11,500
			// r3 just wrote; r4 reads call + item.
			name: "expired cache", evs: recoverySession("claude-sonnet-4-5", false).evs,
			recs: []Recovery{{"d1", 11}}, recoveries: 1, requests: 1,
			tokens:   11500 + carry + carry,
			prompt:   m(11500, r) + m(carry, w) + m(carry, r),
			outPrice: 15,
		},
		{
			// Used by the answer to the first request: every later
			// request carries it.
			name: "used again at the next request", evs: recoverySession("claude-sonnet-4-5", false).evs,
			recs: []Recovery{{"d1", 5}}, recoveries: 1, requests: 1,
			tokens:   10000 + carry + 4*carry,
			prompt:   m(10000, r) + m(carry, w) + m(carry, r) + m(carry, r) + m(carry, w) + m(carry, r),
			outPrice: 15,
		},
		{
			// Two items the same answer needs: one extra request.
			name: "two items, one answer", evs: recoverySession("claude-sonnet-4-5", false).evs,
			recs: []Recovery{{"d1", 7}, {"sys", 7}}, recoveries: 2, requests: 1,
			tokens:   10500 + two + 3*two,
			prompt:   m(10500, r) + m(two, w) + m(two, r) + m(two, w) + m(two, r),
			outPrice: 15,
		},
		{
			// "work" is removed at r2, before the recovered item: r2's
			// cache break writes call + item again.
			name: "cache broken before the recovered item", evs: recoverySession("claude-sonnet-4-5", true).evs, immediate: true,
			recs: []Recovery{{"d1", 7}}, recoveries: 1, requests: 1,
			tokens:   10500 + carry + 3*carry,
			prompt:   m(10500, r) + m(carry, w) + m(carry, w) + m(carry, w) + m(carry, r),
			outPrice: 15,
		},
		{
			// Used by r1's answer; every prompt is below the minimum, so
			// all is paid as input (1 USD per million): the extra request
			// (1,000 + call + item) and r2's carry.
			name: "below the minimum cacheable", evs: smallSession().evs,
			recs: []Recovery{{"d1", 6}}, recoveries: 1, requests: 1,
			tokens:   1000 + answer + 700 + (answer + 700),
			prompt:   m(1000+answer+700+answer+700, 1.0),
			outPrice: 5,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy.Default()
			strategy := StrategyNone
			if tc.immediate {
				strategy = StrategyImmediate
			}
			l := Simulate(p, tc.evs, strategy)
			if tc.immediate && len(l.ApplicationEvents) != 1 {
				t.Fatalf("%d applications, want 1", len(l.ApplicationEvents))
			}
			all := append(append([]events.Event{}, tc.evs...), l.ApplicationEvents...)
			// The pricing's baseline is the schedule's own ledger.
			c := New(p, "", "s1")
			for _, ev := range all {
				c.Observe(ev)
			}
			testutil.Near(t, c.ledger(l.Head).Total.Cost, l.Total.Cost, "baseline cost")
			got, err := PriceRecoveries(p, all, l.Head, tc.recs, answer)
			if err != nil {
				t.Fatal(err)
			}
			testutil.Equal(t, got.Recoveries, tc.recoveries, "recoveries")
			testutil.Equal(t, got.Requests, tc.requests, "extra requests")
			testutil.Equal(t, got.Tokens, tc.tokens, "tokens added")
			testutil.Equal(t, got.Output, answer*tc.recoveries, "output tokens")
			testutil.Near(t, got.PromptCost, tc.prompt, "prompt cost added")
			testutil.Near(t, got.OutputCost, m(answer*tc.recoveries, tc.outPrice), "output cost")
			testutil.Near(t, got.Cost, tc.prompt+m(answer*tc.recoveries, tc.outPrice), "cost")
		})
	}
}

// TestPriceRecoveriesUnpricedAndErrors: an unpriced session adds tokens
// and no cost; an unknown item or a use before any request is an error
// naming it; a negative answer is refused.
func TestPriceRecoveriesUnpricedAndErrors(t *testing.T) {
	p := policy.Default()
	evs := recoverySession("mimo-v2-flash", false).evs
	got, err := PriceRecoveries(p, evs, 0, []Recovery{{"d1", 7}}, 60)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Equal(t, got.Tokens, 10500+4*5060, "unpriced tokens")
	testutil.Near(t, got.Cost, 0, "unpriced cost")
	for _, tc := range []struct {
		recs   []Recovery
		answer int
		want   string
	}{
		{[]Recovery{{"nope", 7}}, 60, `"nope"`},
		{[]Recovery{{"d1", 3}}, 60, "before any request"},
		{nil, -1, "negative answer"},
	} {
		if _, err := PriceRecoveries(p, evs, 0, tc.recs, tc.answer); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %s", tc.recs, err, tc.want)
		}
	}
}
