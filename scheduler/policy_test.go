package scheduler

import (
	"strings"
	"testing"

	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/policy"
)

func TestPolicySchedulerSection(t *testing.T) {
	p, err := policy.Parse([]byte(`
scheduler:
  mode: immediate
  horizon_requests: 3
  providers:
    anthropic:
      ttl: 1h
      min_cacheable: 2048
      models:
        claude-sonnet-4-5: {input: 3.0, cache_write_5m: 3.75, cache_write_1h: 6.0, cache_read: 0.30, output: 15.0}
      default: {input: 1, cache_read: 0.1, output: 5}
`))
	if err != nil {
		t.Fatal(err)
	}
	s := p.Scheduler
	testutil.Equal(t, s.Mode, policy.ModeImmediate, "mode")
	testutil.Equal(t, s.HorizonRequests, 3, "horizon")
	pr, name := s.Provider("anthropic")
	testutil.Equal(t, name, "anthropic", "name")
	testutil.Equal(t, pr.TTL, "1h", "ttl")
	testutil.Equal(t, pr.Caching, policy.CachingExplicit, "caching default")
	testutil.Equal(t, pr.Price("claude-sonnet-4-5").MinCacheable, 2048, "min")
	testutil.Equal(t, pr.Price("other").CacheWrite5m, 1.0, "default write falls back to input")
	_, name = s.Provider("openai")
	testutil.Equal(t, name, "openai", "openai still shipped")

	d := policy.Default()
	testutil.Equal(t, d.Scheduler.Mode, policy.ModeScheduled, "default mode")
	testutil.Equal(t, d.Scheduler.HorizonRequests, 0, "default horizon: estimated")
	testutil.Equal(t, s.Horizon(40), 3, "fixed horizon")

	for _, bad := range []string{"scheduler: {mode: eager}", "scheduler: {providers: {x: {ttl: 2m}}}", "scheduler: {default_provider: nope}"} {
		if _, err := policy.Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "scheduler.") {
			t.Fatalf("%s: want a scheduler.* error, got %v", bad, err)
		}
	}
}
