package eligibility_test

import (
	"path/filepath"
	"testing"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/policy"
)

// BenchmarkObserveRealTraces feeds every shared Claude Code and OpenCode
// trace through the core under the default policy (span references on)
// and with span references off; compare the two in one run.
func BenchmarkObserveRealTraces(b *testing.B) {
	var sessions [][]events.Event
	for _, glob := range []string{"../../shared/traces/claude-code/*.jsonl", "../../shared/traces/opencode/*.json"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			ss, err := importers.Import(f, "auto")
			if err != nil {
				b.Fatal(err)
			}
			for _, s := range ss {
				sessions = append(sessions, s.Events)
			}
		}
	}
	if len(sessions) == 0 {
		b.Skip("no shared traces at ../../shared/traces")
	}
	n := 0
	for _, s := range sessions {
		n += len(s)
	}
	off := false
	for _, tc := range []struct {
		name  string
		spans *bool
	}{{"spans", nil}, {"no-spans", &off}} {
		b.Run(tc.name, func(b *testing.B) {
			p := policy.Default()
			p.Eligibility.SpanRefs = tc.spans
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				for _, evs := range sessions {
					c := eligibility.New(p, "t", "s")
					for _, e := range evs {
						c.Observe(e)
					}
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
