package events

import (
	"testing"
	"time"
)

func TestPruneRule(t *testing.T) {
	cases := []struct {
		rung Rung
		why  Reason
		want string
	}{
		{L0, ReasonDuplicateOutput, "L0"},
		{L1, ReasonSameSource, "L1"},
		{L2, ReasonSuperseded, "L2"},
		{L3, ReasonCompletedResidue, "L3"},
		{L4, ReasonPredicted, "L4"},
		{RungNone, ReasonErroredInput, "errored"},
		{L3, ReasonErroredInput, "errored"}, // logs written before errored inputs lost their L3
		{RungNone, ReasonManualPrune, "manual"},
	}
	for _, tc := range cases {
		if got := PruneRule(tc.rung, tc.why); got != tc.want {
			t.Errorf("PruneRule(%q, %s) = %q, want %q", tc.rung, tc.why, got, tc.want)
		}
	}
}

// An errored-input prune carries no rung; any other automatic prune needs
// one.
func TestPruneRungValidation(t *testing.T) {
	cases := []struct {
		rung Rung
		why  Reason
		ok   bool
	}{
		{RungNone, ReasonErroredInput, true},
		{RungNone, ReasonManualPrune, true},
		{L3, ReasonErroredInput, true},
		{RungNone, ReasonSuperseded, false},
	}
	for _, tc := range cases {
		m := &Mark{Item: "c1/input", Decision: Prune, Rung: tc.rung, Reason: tc.why, Part: "input", Cause: "e1", PolicyVersion: "p@1", By: "eligibility"}
		err := New("m1", "", "s1", time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), m).Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%q %s: err %v, want ok %v", tc.rung, tc.why, err, tc.ok)
		}
	}
}
