package bench

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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

// TestNativeQuantile: the fleet's added latency read from the proxies'
// native histogram is within the bucket factor (10%) of the true
// quantile, never below it, and counts only what was observed since the
// earlier snapshot.
func TestNativeQuantile(t *testing.T) {
	t.Parallel()
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "added", Buckets: prometheus.ExponentialBuckets(0.0002, 2, 12),
		NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 160, NativeHistogramMinResetDuration: time.Hour,
	})
	snap := func() fleetCounts {
		var m dto.Metric
		if err := h.Write(&m); err != nil {
			t.Fatal(err)
		}
		var c fleetCounts
		c.addNative(m.GetHistogram())
		return c
	}
	for range 50 {
		h.Observe(0.100) // before: must not count
	}
	before := snap()
	for range 98 {
		h.Observe(0.001)
	}
	h.Observe(0.0085)
	h.Observe(0.0085)
	after := snap()
	for _, tc := range []struct {
		q, want float64
	}{{0.5, 0.001}, {0.99, 0.0085}, {1, 0.0085}} {
		got, ok := after.nativeQuantile(before, tc.q)
		if !ok || got < tc.want || got > tc.want*1.1 {
			t.Errorf("q %g: %v (ok %v), want within [%v, %v]", tc.q, got, ok, tc.want, tc.want*1.1)
		}
	}
	if _, ok := before.nativeQuantile(before, 0.99); ok {
		t.Error("a quantile of no observations")
	}
}
