package bench

import (
	"errors"
	"slices"
	"testing"
)

// TestRunPairs: the replay and the rebuild alternate which goes first,
// each pair's ratio is its own two rates', and an error stops the run.
func TestRunPairs(t *testing.T) {
	t.Parallel()
	var order []string
	rate := 0.0
	replay := func() (float64, error) { order = append(order, "replay"); rate++; return 100 * rate, nil }
	rebuild := func() (float64, error) { order = append(order, "rebuild"); rate++; return 10 * rate, nil }
	pairs, err := runPairs(3, replay, rebuild)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"replay", "rebuild", "rebuild", "replay", "replay", "rebuild"}
	if !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	wantPairs := []RebuildPair{
		{RawReplayPerS: 100, RebuildPerS: 20, Ratio: 0.2},
		{RawReplayPerS: 400, RebuildPerS: 30, Ratio: 0.075, RebuildFirst: true},
		{RawReplayPerS: 500, RebuildPerS: 60, Ratio: 0.12},
	}
	if !slices.Equal(pairs, wantPairs) {
		t.Errorf("pairs %+v, want %+v", pairs, wantPairs)
	}
	replayRate, rebuildRate, med, lo, hi := summarizePairs(pairs)
	if replayRate != 400 || rebuildRate != 30 || med != 0.12 || lo != 0.075 || hi != 0.2 {
		t.Errorf("summary %g %g %g %g %g, want 400 30 0.12 0.075 0.2", replayRate, rebuildRate, med, lo, hi)
	}

	boom := errors.New("boom")
	if _, err := runPairs(2, replay, func() (float64, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Errorf("err %v, want %v", err, boom)
	}
}

// TestSpread: the median of an odd and an even number of values, the
// lowest and highest, and nothing for none.
func TestSpread(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		xs          []float64
		med, lo, hi float64
	}{
		{nil, 0, 0, 0},
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 3}, 3, 1, 5},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
	} {
		med, lo, hi := spread(tc.xs)
		if med != tc.med || lo != tc.lo || hi != tc.hi {
			t.Errorf("spread(%v) = %g %g %g, want %g %g %g", tc.xs, med, lo, hi, tc.med, tc.lo, tc.hi)
		}
	}
}
