package scheduler

import (
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/policy"
)

// Feed decides a model request before observing it, only for the core's
// own session, and decides a request once.
func TestFeed(t *testing.T) {
	facts, marks := detSession()
	evs := interleave(facts, marks, func(m *events.Mark) int { return m.CauseIndex })
	other := events.New("x1", "", "s2", t0, &events.ModelRequest{Request: "rx"})
	tests := []struct {
		name string
		evs  []events.Event
	}{
		{"own session", evs},
		{"another session's request", append(append([]events.Event{}, evs...), other)},
		{"each request twice", append(append([]events.Event{}, evs...), evs...)},
	}
	_, want := drive(t, pol(policy.ModeImmediate), evs)
	if len(want) == 0 {
		t.Fatal("the session applies nothing")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(pol(policy.ModeImmediate), "", "s1")
			var got []events.Event
			for _, ev := range tc.evs {
				before := c.Facts()
				if a := c.Feed(ev); a != nil {
					app := appOf(*a)
					testutil.Equal(t, app.AfterIndex, before, "application's fact index")
					got = append(got, *a)
				}
			}
			testutil.Equal(t, encodeAll(t, got), encodeAll(t, want), "applications")
		})
	}
}
