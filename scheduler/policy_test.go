package scheduler

import (
	"strings"
	"testing"

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
	require_eq(t, "mode", s.Mode, policy.ModeImmediate)
	require_eq(t, "horizon", s.HorizonRequests, 3)
	pr, name := s.Provider("anthropic")
	require_eq(t, "name", name, "anthropic")
	require_eq(t, "ttl", pr.TTL, "1h")
	require_eq(t, "caching default", pr.Caching, policy.CachingExplicit)
	require_eq(t, "min", pr.Price("claude-sonnet-4-5").MinCacheable, 2048)
	require_eq(t, "default write falls back to input", pr.Price("other").CacheWrite5m, 1.0)
	_, name = s.Provider("openai")
	require_eq(t, "openai still shipped", name, "openai")

	d := policy.Default()
	require_eq(t, "default mode", d.Scheduler.Mode, policy.ModeScheduled)
	require_eq(t, "default horizon: estimated", d.Scheduler.HorizonRequests, 0)
	require_eq(t, "fixed horizon", s.Horizon(40), 3)

	for _, bad := range []string{"scheduler: {mode: eager}", "scheduler: {providers: {x: {ttl: 2m}}}", "scheduler: {default_provider: nope}"} {
		if _, err := policy.Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "scheduler.") {
			t.Fatalf("%s: want a scheduler.* error, got %v", bad, err)
		}
	}
}
