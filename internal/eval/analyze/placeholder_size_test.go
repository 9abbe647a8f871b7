package analyze

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// placeholderSizes runs the production cores over each session with every
// mark applied at the next request (so every PRUNE leaves its placeholder)
// and returns the o200k size of every placeholder in the final bundles.
// It also checks that each placeholder states the count its certificate
// records.
func placeholderSizes(t *testing.T, files []string) []int {
	t.Helper()
	tc := tokens.New()
	p := policy.Default()
	p.Scheduler.Mode = policy.ModeNextRequest
	var sizes []int
	for _, path := range files {
		sessions, err := importers.Import(path, "auto")
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		for _, s := range sessions {
			if len(s.Events) == 0 {
				continue
			}
			ev0 := s.Events[0]
			ec := eligibility.New(p, ev0.Tenant, ev0.Session)
			sc := scheduler.New(p, ev0.Tenant, ev0.Session)
			proj := projections.NewSession(ev0.Tenant, ev0.Session)
			for i, ev := range s.Events {
				if r, ok := ev.Data.(*events.ModelRequest); ok {
					if app := sc.Decide(ev.Time, r.Request, i); app != nil {
						proj.Observe(*app)
					}
				}
				out := ec.Observe(ev)
				sc.Observe(ev)
				proj.Observe(ev)
				for _, m := range out {
					sc.Observe(m)
					proj.Observe(m)
				}
			}
			stated := map[string]int{}
			for _, d := range proj.Decisions() {
				if d.InEffect {
					stated[d.Item] = d.TokensEstimated
				}
			}
			for _, bi := range proj.Bundle().Items {
				if bi.Pruned && !bi.HostPruned && bi.Placeholder != "" {
					if want := fmt.Sprintf(", %d tokens", stated[bi.ID]); !strings.Contains(bi.Placeholder, want) {
						t.Errorf("%s %s: placeholder %q does not state the certificate's count%s", path, bi.ID, bi.Placeholder, want)
					}
					sizes = append(sizes, tc.Count(bi.Placeholder))
					if os.Getenv("PH_DUMP") != "" {
						t.Logf("%d %s", tc.Count(bi.Placeholder), bi.Placeholder)
					}
				}
			}
		}
	}
	sort.Ints(sizes)
	return sizes
}

// TestPlaceholderSizeOnSharedTraces: on the shared Claude Code and
// OpenCode traces, the median placeholder is at most 40 tokens and the
// 90th percentile at most 60 (o200k).
func TestPlaceholderSizeOnSharedTraces(t *testing.T) {
	t.Parallel()
	files := sharedTraces(t)
	sizes := placeholderSizes(t, files)
	if len(sizes) < 10 {
		t.Fatalf("only %d placeholders on %d files", len(sizes), len(files))
	}
	median, p90 := sizes[len(sizes)/2], sizes[len(sizes)*9/10]
	t.Logf("%d placeholders: median %d, p90 %d, max %d tokens", len(sizes), median, p90, sizes[len(sizes)-1])
	if median > 40 || p90 > 60 {
		t.Fatalf("placeholders too large: median %d (want <= 40), p90 %d (want <= 60)", median, p90)
	}
}
