package scheduler

import (
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/policy"
)

// detSession builds a session with several requests, gaps and marks, and
// returns the facts and the marks separately (each mark with the index of
// the fact after which eligibility would have published it).
func detSession() (facts []events.Event, marks []events.Event) {
	b := newSession()
	b.msg("sys", 3000)
	b.result("a", 2500)
	b.msg("m1", 4000)
	b.req("r1")
	ca := b.result("a2", 2500)
	b.mark("a", events.Prune, ca)
	b.result("c", 1200)
	b.at(40 * time.Second).req("r2")
	cc := b.result("c2", 1200)
	b.mark("c", events.Prune, cc)
	b.result("d", 900)
	cd := b.result("d2", 900)
	b.mark("d", events.Prune, cd)
	b.at(80 * time.Second).req("r3")
	b.fact(&events.SubtaskClosed{Subtask: "t"})
	b.result("e", 5000)
	ce := b.result("e2", 5000)
	b.mark("e", events.Prune, ce)
	b.at(10 * time.Minute).req("r4")
	b.msg("m2", 100)
	b.at(11 * time.Minute).req("r5")
	for _, ev := range b.evs {
		if ev.Type == events.TypeMark {
			marks = append(marks, ev)
		} else {
			facts = append(facts, ev)
		}
	}
	return facts, marks
}

// interleave places each mark after the fact at position pos(mark) among
// facts (which must be > its CauseIndex and <= the next eligible request).
func interleave(facts, marks []events.Event, pos func(m *events.Mark) int) []events.Event {
	var out []events.Event
	for i, f := range facts {
		out = append(out, f)
		for _, m := range marks {
			if pos(m.Data.(*events.Mark)) == i {
				out = append(out, m)
			}
		}
	}
	return out
}

func TestDeterminismAcrossInterleavings(t *testing.T) {
	facts, marks := detSession()
	nextReq := func(cause int) int {
		for i, f := range facts {
			if i > cause && f.Type == events.TypeModelRequest {
				return i
			}
		}
		return len(facts) - 1
	}
	orders := map[string][]events.Event{
		"right after cause": interleave(facts, marks, func(m *events.Mark) int { return m.CauseIndex }),
		"just before the next request": interleave(facts, marks, func(m *events.Mark) int {
			return nextReq(m.CauseIndex) - 1
		}),
		"all marks first": append(append([]events.Event{}, marks...), facts...),
	}
	for _, mode := range []string{policy.ModeNextRequest, policy.ModeImmediate, policy.ModeScheduled} {
		var want string
		for name, evs := range orders {
			for run := 0; run < 2; run++ {
				_, apps := drive(t, pol(mode), evs)
				got := encodeAll(t, apps)
				if got == "" {
					t.Fatalf("%s/%s: no applications", mode, name)
				}
				if want == "" {
					want = got
				} else if got != want {
					t.Fatalf("%s/%s: applications differ:\n%s\nwant\n%s", mode, name, got, want)
				}
			}
		}
	}
}

// TestReplayFromLog: a core rebuilt from a log that holds the applications
// it produced decides nothing new and reports the same ledger.
func TestReplayFromLog(t *testing.T) {
	facts, marks := detSession()
	evs := interleave(facts, marks, func(m *events.Mark) int { return m.CauseIndex })
	c1, apps := drive(t, pol(policy.ModeScheduled), evs)
	var log []events.Event
	k := 0
	for _, ev := range evs {
		if r, ok := ev.Data.(*events.ModelRequest); ok && k < len(apps) && appOf(apps[k]).Request == r.Request {
			log = append(log, apps[k])
			k++
		}
		log = append(log, ev)
	}
	c2, again := drive(t, pol(policy.ModeScheduled), log)
	testutil.Equal(t, len(again), 0, "new applications on replay")
	a, b := c1.Economics(), c2.Economics()
	testutil.Equal(t, a.Total.Cost, b.Total.Cost, "total cost")
	testutil.Equal(t, a.Total.Tokens, b.Total.Tokens, "tokens")
	testutil.Equal(t, len(a.Applications), len(b.Applications), "applications")
}

func TestScheduledTriggersOnDetSession(t *testing.T) {
	facts, marks := detSession()
	_, apps := drive(t, pol(policy.ModeScheduled), append(append([]events.Event{}, marks...), facts...))
	var got []events.Trigger
	for _, a := range apps {
		got = append(got, appOf(a).Trigger)
	}
	// r2: "a" was sent at r1, early in the prefix: defer. r3: "a" still
	// deferred, "c" (sent at r2) and "d" (never sent) : d applies (never
	// sent), c only if it pays. r4: 10-minute gap: everything left.
	if len(got) == 0 || got[len(got)-1] != events.TriggerCacheExpired {
		t.Fatalf("triggers %v: want the last one cache_expired", got)
	}
}
