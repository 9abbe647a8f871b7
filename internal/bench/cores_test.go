package bench

import (
	"syscall"
	"testing"
	"time"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/policy"
)

// BenchmarkCore is `bench --only core`'s measure as a Go benchmark: the
// eligibility core alone on the bench workload's 20,000-item session,
// one goroutine. Besides time it reports the process's CPU time per event
// (user and system, the garbage collector's workers included), which a
// busy machine disturbs less than time, and allocations (deterministic):
// compare before and after with -count, alternated.
func BenchmarkCore(b *testing.B) {
	evs := newWorkload().session("", "core", 20000)
	pol := policy.Default()
	// One session first: the tokenizer and the placeholder pieces are
	// process-wide and warm after it, as in a long-running process.
	c := eligibility.New(pol, "", "core")
	for _, e := range evs {
		c.Observe(e)
	}
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for b.Loop() {
		c := eligibility.New(pol, "", "core")
		for _, e := range evs {
			c.Observe(e)
		}
	}
	b.StopTimer()
	n := float64(len(evs)) * float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/n, "cpu-ns/event")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
