package bench

import (
	"math"
	"testing"
)

// TestBucketQuantile: histogram quantiles as Prometheus interpolates
// them, and a quantile past the last finite bound reported as that bound
// (a fleet run at load once made it +Inf, which JSON cannot encode).
func TestBucketQuantile(t *testing.T) {
	t.Parallel()
	upper := []float64{0.001, 0.01, 0.1}
	for _, tc := range []struct {
		name  string
		cum   []float64
		total float64
		q     float64
		want  float64
	}{
		{"within the first bucket", []float64{10, 10, 10}, 10, 0.5, 0.0005},
		{"interpolated in the second", []float64{0, 10, 10}, 10, 0.5, 0.0055},
		{"exactly at a bound", []float64{5, 10, 10}, 10, 0.5, 0.001},
		{"past the last bound", []float64{0, 0, 90}, 100, 0.99, 0.1},
		{"no observations", []float64{0, 0, 0}, 0, 0.99, math.NaN()},
	} {
		got := bucketQuantile(upper, func(i int) float64 { return tc.cum[i] }, tc.total, tc.q)
		if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.want) > 1e-12) {
			t.Errorf("%s: bucketQuantile = %v, want %v", tc.name, got, tc.want)
		}
		if math.IsInf(got, 0) {
			t.Errorf("%s: infinite quantile", tc.name)
		}
	}
}
