package scheduler

import (
	"reflect"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/policy"
)

// TestViewIsTheSumOfItsParts: the economics view's ledgers are
// SimulateAll's, its calibration Calibrate's (nil without usage reports),
// and its applications the logged ones with their request positions.
func TestViewIsTheSumOfItsParts(t *testing.T) {
	p := policy.Default()
	dup := dupSession().evs
	_, apps := drive(t, pol(policy.ModeScheduled), dup)
	if len(apps) == 0 {
		t.Fatal("the session applies nothing")
	}
	logged := append(append([]events.Event{}, dup...), apps...)
	// An application naming a request the log does not hold.
	stray := apps[0]
	a := *appOf(stray)
	a.Request = "nowhere"
	stray.Data = &a
	logged = append(logged, stray)

	withUsage := newSession()
	withUsage.msg("sys", 2000)
	withUsage.reqWith(&events.ModelRequest{Request: "r1", Usage: &events.Usage{InputTokens: 5, CacheWriteTokens: 12000}})
	withUsage.msg("u", 1000)
	withUsage.at(time.Minute).reqWith(&events.ModelRequest{Request: "r2", Usage: &events.Usage{InputTokens: 5, CacheReadTokens: 12000, CacheWriteTokens: 1000}})

	for _, tc := range []struct {
		name       string
		evs        []events.Event
		strategies []string
		calibrated bool
	}{
		{"default strategies", logged, ViewStrategies, false},
		{"hindsight alone", logged, []string{StrategyHindsight}, false},
		{"usage reports", withUsage.evs, ViewStrategies, true},
		{"empty", nil, ViewStrategies, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := NewView(p, tc.evs, tc.strategies...)
			if want := SimulateAll(p, tc.evs, tc.strategies...); !reflect.DeepEqual(v.Ledgers, want) {
				t.Errorf("ledgers differ from SimulateAll's")
			}
			if got := v.Calibration != nil; got != tc.calibrated {
				t.Fatalf("calibrated %v, want %v", got, tc.calibrated)
			}
			if tc.calibrated && *v.Calibration != Calibrate(p, tc.evs) {
				t.Errorf("calibration %+v, want %+v", *v.Calibration, Calibrate(p, tc.evs))
			}
			var want []AppSummary
			for _, ev := range tc.evs {
				if a, ok := ev.Data.(*events.Application); ok {
					want = append(want, AppSummary{Request: -1, RequestID: a.Request, Trigger: a.Trigger, Marks: len(a.Marks),
						FirstDivergence: a.FirstDivergence, MutationRadius: a.MutationRadius, TokensRemoved: a.TokensRemoved,
						CacheCost: a.CacheCost, ExpectedSaving: a.ExpectedSaving})
				}
			}
			testutil.Equal(t, len(v.Applications), len(want), "applications")
			for i, got := range v.Applications {
				w := want[i]
				if w.RequestID != "nowhere" {
					w.Request = requestPosition(tc.evs, w.RequestID)
				}
				if got != w {
					t.Errorf("application %d: %+v, want %+v", i, got, w)
				}
			}
		})
	}
}

// requestPosition is the position of request id among the session's
// distinct requests.
func requestPosition(evs []events.Event, id string) int {
	seen := map[string]bool{}
	for _, ev := range evs {
		if r, ok := ev.Data.(*events.ModelRequest); ok && !seen[r.Request] {
			if r.Request == id {
				return len(seen)
			}
			seen[r.Request] = true
		}
	}
	return -1
}
