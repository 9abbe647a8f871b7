package eligibility

import (
	"testing"

	"github.com/prunesched/prunesched/policy"
)

// BenchmarkObserve feeds a synthetic 20k-event session (reads, searches,
// edits, test runs, failed writes, ranged reads, messages, requests).
func BenchmarkObserve(b *testing.B) {
	evs := session(20000)
	p := policy.Default()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := New(p, "t", "s1")
		for _, e := range evs {
			c.Observe(e)
		}
	}
	b.ReportMetric(float64(len(evs))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkObserveL4 is the same session with L4 on (reference tracking).
func BenchmarkObserveL4(b *testing.B) {
	evs := session(20000)
	p := policy.Default()
	p.Eligibility.L4 = true
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := New(p, "t", "s1")
		for _, e := range evs {
			c.Observe(e)
		}
	}
	b.ReportMetric(float64(len(evs))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkObserveNoSpans is BenchmarkObserve with span references off:
// the ratio of the two is what span matching costs.
func BenchmarkObserveNoSpans(b *testing.B) {
	evs := session(20000)
	p := policy.Default()
	f := false
	p.Eligibility.SpanRefs = &f
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := New(p, "t", "s1")
		for _, e := range evs {
			c.Observe(e)
		}
	}
	b.ReportMetric(float64(len(evs))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
