package lab

import (
	"context"
	"testing"
)

// TestWalkProbes: the probes walked under a row, with their bundles, give
// the row's behaviour numbers (the same code decides both), and an unknown
// row name is an error naming the rows.
func TestWalkProbes(t *testing.T) {
	t.Parallel()
	r := smallRun(t)
	names := []string{CondD, CondG, PeerDCP}
	got := map[string][3]int{} // probes, present, recoverable
	err := WalkProbes(context.Background(), small, names, func(pc ProbeContext) error {
		g := got[pc.Condition]
		if pc.Index != g[0] || pc.Total != r.Fixture.Probes {
			t.Errorf("%s: probe %d of %d, want %d of %d", pc.Condition, pc.Index, pc.Total, g[0], r.Fixture.Probes)
		}
		g[0]++
		if pc.EvidencePresent {
			g[1]++
		}
		if pc.Recoverable {
			g[2]++
		}
		if len(pc.Bundle.Items) == 0 || pc.OwnPlaceholder != (pc.Condition != PeerDCP) {
			t.Errorf("%s %s: %d bundle items, own placeholder %v", pc.Condition, pc.Probe.ID, len(pc.Bundle.Items), pc.OwnPlaceholder)
		}
		got[pc.Condition] = g
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b := r.row(n).Behaviour
		if want := [3]int{b.Probes, b.Passed, b.RecoveredViaPlaceholder}; got[n] != want {
			t.Errorf("%s: walked %v (probes, present, recoverable), lab says %v", n, got[n], want)
		}
	}
	if err := WalkProbes(context.Background(), small, []string{"Z"}, func(ProbeContext) error { return nil }); err == nil {
		t.Error("unknown row accepted")
	}
}
