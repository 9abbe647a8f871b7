package policy

import "testing"

// TestResolvePrices: each session is priced with its own provider and
// model; a model no table lists is unpriced, never at another provider's
// (or another model's) rates.
func TestResolvePrices(t *testing.T) {
	s := Default().Scheduler
	for _, tc := range []struct {
		provider, model string
		wantProv        string
		wantInput       float64
		wantPriced      bool
	}{
		{"anthropic", "claude-opus-4-6", "anthropic", 5, true},
		{"anthropic", "claude-sonnet-4-5-20250929", "anthropic", 3, true},
		{"", "claude-3-5-sonnet-20241022", "anthropic", 3, true},
		{"anthropic", "claude-sonnet-4@20250514", "anthropic", 3, true},
		{"openai", "gpt-5.3-codex", "openai", 1.75, true},
		{"openai", "gpt-4o-2024-08-06", "openai", 2.50, true},
		{"", "deepseek-chat", "deepseek", 0.27, true},
		{"", "deepseek/deepseek-chat", "deepseek", 0.27, true},
		// Not a dated variant of a listed model: unpriced.
		{"openai", "gpt-5.9-turbo", "openai", 1.25, false},
		{"anthropic", "claude-opus-4-7", "anthropic", 3, false},
		{"", "mimo-v2-flash", "anthropic", 3, false},
		{"", "ollama/gpt-oss:20b", "anthropic", 3, false},
		{"someprovider", "qwen3-coder", "anthropic", 3, false},
		// No model named: the provider's Default is the stated assumption.
		{"openai", "", "openai", 1.25, true},
		{"", "", "anthropic", 3, true},
	} {
		_, name, price, priced := s.Resolve(tc.provider, tc.model)
		if name != tc.wantProv || price.Input != tc.wantInput || priced != tc.wantPriced {
			t.Errorf("Resolve(%q, %q) = %s, input %v, priced %v; want %s, %v, %v", tc.provider, tc.model, name, price.Input, priced, tc.wantProv, tc.wantInput, tc.wantPriced)
		}
	}
}

// TestHorizon: the break-even horizon is estimated from the session (the
// requests so far, bounded) unless the policy fixes it.
func TestHorizon(t *testing.T) {
	est := Default().Scheduler
	fixed := Default().Scheduler
	fixed.HorizonRequests = 20
	for _, tc := range []struct {
		s        Scheduler
		requests int
		want     int
	}{
		{est, 0, 5}, {est, 3, 5}, {est, 5, 5}, {est, 37, 37}, {est, 100, 100}, {est, 250, 100},
		{fixed, 0, 20}, {fixed, 250, 20},
	} {
		if got := tc.s.Horizon(tc.requests); got != tc.want {
			t.Errorf("Horizon(%d) with fixed %d = %d, want %d", tc.requests, tc.s.HorizonRequests, got, tc.want)
		}
	}
}
