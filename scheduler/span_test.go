package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
)

// spanMark records a span reference on item naming surv, saving net tokens.
func (b *sb) spanMark(item, surv string, net, cause int) string {
	m := &events.Mark{Item: item, Decision: events.Prune, Rung: events.L1, Reason: events.ReasonSpanReference,
		Cause: fmt.Sprintf("e%d", cause), CauseIndex: cause, PolicyVersion: "test@1", TokensEstimated: net,
		Recoverability: &events.Recoverability{Log: "e1", Survivor: surv}}
	return b.add(m).ID
}

// wholeMark records a whole removal of item (L2) with its survivor.
func (b *sb) wholeMark(item, surv string, cause int) string {
	m := &events.Mark{Item: item, Decision: events.Prune, Rung: events.L2, Reason: events.ReasonSuperseded,
		Cause: fmt.Sprintf("e%d", cause), CauseIndex: cause, PolicyVersion: "test@1",
		Recoverability: &events.Recoverability{Log: "e1", Survivor: surv}}
	return b.add(m).ID
}

// refuse records the KEEP that refuses item's span reference.
func (b *sb) refuse(item string, cause int) string {
	m := &events.Mark{Item: item, Decision: events.Keep, Reason: events.ReasonUniqueEvidence,
		Cause: fmt.Sprintf("e%d", cause), CauseIndex: cause, PolicyVersion: "test@1"}
	return b.add(m).ID
}

// TestSpanReferences is how the scheduler moves an item between a span
// reference and a whole removal, table-driven: which marks each request's
// application carries.
func TestSpanReferences(t *testing.T) {
	type step struct{ req, marks string } // marks: item ids in the application, "" none
	cases := []struct {
		name  string
		build func(b *sb) []step
	}{
		{"a span reference applies at its first request (never sent)", func(b *sb) []step {
			b.result("o", 2000)
			b.req("r1")
			n := b.result("n", 2000)
			b.spanMark("n", "o", 1500, n)
			b.req("r2")
			return []step{{"r2", "n"}}
		}},
		{"a later whole removal replaces an applied span reference", func(b *sb) []step {
			b.result("o", 2000)
			b.req("r1")
			n := b.result("n", 2000)
			b.spanMark("n", "o", 300, n)
			b.req("r2")
			b.at(10 * time.Minute) // the cache went cold: free to cut
			m := b.result("m", 2000)
			b.wholeMark("n", "m", m)
			b.req("r3")
			return []step{{"r2", "n"}, {"r3", "n"}}
		}},
		{"a refused span reference waits for the removal of what it names, then goes with it", func(b *sb) []step {
			b.result("o", 2000)
			b.req("r1")
			n := b.result("n", 2000)
			b.spanMark("n", "o", 1500, n)
			b.req("r2")
			x := b.result("x", 2000)
			b.wholeMark("o", "x", x)
			b.refuse("n", x)
			b.req("r3") // warm cache: o's removal waits, and so does n's restore
			b.at(10 * time.Minute)
			b.req("r4") // cold: both apply together
			return []step{{"r2", "n"}, {"r4", "o,n"}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newSession()
			want := tc.build(b)
			_, apps := drive(t, pol("scheduled"), b.evs)
			got := map[string]string{}
			for _, a := range apps {
				x := appOf(a)
				got[x.Request] = strings.Join(x.Items, ",")
			}
			if len(got) != len(want) {
				t.Errorf("applications %v, want %v", got, want)
			}
			for _, s := range want {
				if got[s.req] != s.marks {
					t.Errorf("request %s applied %q, want %q (all: %v)", s.req, got[s.req], s.marks, got)
				}
			}
		})
	}
}
