package policy

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Scheduler modes.
const (
	// ModeNextRequest applies every eligible PRUNE/KEEP mark at the next
	// model request (the first pipeline slice).
	ModeNextRequest = "next_request"
	// ModeImmediate is the DCP strategy: apply at the first request after
	// the mark, whatever the cache state. Kept for comparison.
	ModeImmediate = "immediate"
	// ModeScheduled applies marks only when a timing trigger allows it
	// (cache expired, never sent, subtask boundary, pressure, break-even,
	// manual flush).
	ModeScheduled = "scheduled"
)

// Caching styles of a provider.
const (
	// CachingExplicit (Anthropic): tokens that miss the cache are written to
	// it at the cache-write price when the prompt reaches the minimum
	// cacheable length.
	CachingExplicit = "explicit"
	// CachingAutomatic (OpenAI): misses are billed at the plain input price
	// and cached for free; only reads are discounted.
	CachingAutomatic = "automatic"
)

// Scheduler configures the timing scheduler.
type Scheduler struct {
	// Mode is next_request, immediate or scheduled. Default scheduled.
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
	// HorizonRequests is how many future requests the break-even trigger
	// expects before the next free application point (cache expiry,
	// compaction). 0 (the default) estimates it from the session itself:
	// the requests of the current warm run so far (since the last request
	// sent to a cold cache: a run that has lasted k requests is expected to
	// last about k more), bounded by HorizonMinRequests and
	// HorizonMaxRequests. A positive value fixes it.
	HorizonRequests int `yaml:"horizon_requests,omitempty" json:"horizon_requests,omitempty"`
	// HorizonMinRequests and HorizonMaxRequests bound the estimated
	// horizon. Defaults 5 and 100.
	HorizonMinRequests int `yaml:"horizon_min_requests,omitempty" json:"horizon_min_requests,omitempty"`
	HorizonMaxRequests int `yaml:"horizon_max_requests,omitempty" json:"horizon_max_requests,omitempty"`
	// PressureTokens: apply everything pending when the rendered context
	// exceeds this many tokens. 0 means use PressurePercent.
	PressureTokens int `yaml:"pressure_tokens,omitempty" json:"pressure_tokens,omitempty"`
	// PressurePercent: apply everything pending when the rendered context
	// exceeds this percentage of the model's context window. Default 65
	// (Magic Context's usage threshold).
	PressurePercent float64 `yaml:"pressure_percent,omitempty" json:"pressure_percent,omitempty"`
	// Providers holds cache TTL, minimum cacheable length and prices per
	// provider. Defaults: anthropic and openai (see DefaultProviders).
	// Entries given in the file replace the shipped entry of that name.
	Providers map[string]Provider `yaml:"providers,omitempty" json:"providers,omitempty"`
	// DefaultProvider is used when a session names no provider or an
	// unknown one. Default anthropic.
	DefaultProvider string `yaml:"default_provider,omitempty" json:"default_provider,omitempty"`
}

// Provider is one provider's prompt-cache behaviour and price table.
type Provider struct {
	// TTL is the default cache lifetime ("5m" or "1h"). Anthropic: 5m,
	// refreshed on every hit; 1h when the client asks for the 1h tier.
	// OpenAI: in-memory caches live 5-10 minutes of inactivity (up to an
	// hour off-peak); we model 5m.
	TTL string `yaml:"ttl" json:"ttl"`
	// MinCacheable is the shortest prompt that is cached at all (tokens).
	MinCacheable int `yaml:"min_cacheable" json:"min_cacheable"`
	// CacheStep: cached prefixes grow in steps of this many tokens past
	// MinCacheable (OpenAI 128; 0 or 1 means any length).
	CacheStep int `yaml:"cache_step,omitempty" json:"cache_step,omitempty"`
	// Caching is explicit (misses written at the cache-write price) or
	// automatic (misses billed as input, writes free).
	Caching string `yaml:"caching" json:"caching"`
	// ContextWindow is the default context window (tokens) for pressure.
	ContextWindow int `yaml:"context_window" json:"context_window"`
	// Models maps a model name (or name prefix: the longest matching key
	// wins, so "claude-sonnet-4-5-20250929" finds "claude-sonnet-4-5") to
	// its prices. Unknown models use Default.
	Models  map[string]Price `yaml:"models,omitempty" json:"models,omitempty"`
	Default Price            `yaml:"default" json:"default"`
}

// Price is one model's prices in USD per million tokens, with optional
// per-model overrides of the provider's cache limits.
type Price struct {
	Input        float64 `yaml:"input" json:"input"`
	CacheWrite5m float64 `yaml:"cache_write_5m,omitempty" json:"cache_write_5m,omitempty"`
	CacheWrite1h float64 `yaml:"cache_write_1h,omitempty" json:"cache_write_1h,omitempty"`
	CacheRead    float64 `yaml:"cache_read" json:"cache_read"`
	Output       float64 `yaml:"output" json:"output"`
	// MinCacheable overrides the provider's minimum when non-zero.
	MinCacheable int `yaml:"min_cacheable,omitempty" json:"min_cacheable,omitempty"`
	// ContextWindow overrides the provider's window when non-zero.
	ContextWindow int `yaml:"context_window,omitempty" json:"context_window,omitempty"`
}

// DefaultProviders returns the shipped price tables.
//
// Sources (values as documented in the author's knowledge, taken
// 2026-12-02; TO VERIFY against the live pages before relying on them):
//   - Anthropic: https://www.anthropic.com/pricing#api and
//     https://docs.claude.com/en/docs/about-claude/pricing (cache write 5m =
//     1.25x input, 1h = 2x input, read = 0.1x input) and
//     https://docs.claude.com/en/docs/build-with-claude/prompt-caching
//     (TTL 5m refreshed on hit, optional 1h; minimum cacheable 1024 tokens
//     for Sonnet and Opus 4/4.1, 2048 for Haiku 3/3.5, 4096 for Opus 4.5 and
//     Haiku 4.5).
//   - OpenAI: https://openai.com/api/pricing and
//     https://platform.openai.com/docs/guides/prompt-caching (automatic from
//     1024 tokens in 128-token steps, cached input discounted, no write
//     charge, caches evicted after 5-10 minutes of inactivity).
//     gpt-5.3-codex (the OpenCode traces' model): $1.75 input, $0.175
//     cached input, $14 output per million, on the same pricing page
//     (also listed at https://vercel.com/ai-gateway/models/gpt-5.3-codex).
//   - DeepSeek: https://api-docs.deepseek.com/quick_start/pricing-details-usd
//     (deepseek-chat: $0.27 cache miss, $0.07 cache hit, $1.10 output per
//     million; 64K context) and
//     https://api-docs.deepseek.com/guides/kv_cache (context caching is on
//     by default and automatic: misses are billed as input, hits at the
//     cache-hit price, no write charge; the cache is built in 64-token
//     units and cleared after hours of disuse, modelled as the 1h tier).
//     DeepSeek has changed these prices over time; pin the date you price.
//   - claude-3-5-sonnet (the OpenHands traces' model): $3 input, $15 output
//     per million on the Anthropic pricing page (legacy models).
//
// A model no table lists is unpriced (see Scheduler.Resolve), never priced
// at another model's or provider's rates.
func DefaultProviders() map[string]Provider {
	anth := func(in, out float64) Price {
		return Price{Input: in, CacheWrite5m: in * 1.25, CacheWrite1h: in * 2, CacheRead: in / 10, Output: out}
	}
	oai := func(in, cached, out float64) Price {
		return Price{Input: in, CacheWrite5m: in, CacheWrite1h: in, CacheRead: cached, Output: out}
	}
	withMin := func(p Price, min int) Price { p.MinCacheable = min; return p }
	withWin := func(p Price, w int) Price { p.ContextWindow = w; return p }
	return map[string]Provider{
		"anthropic": {
			TTL: "5m", MinCacheable: 1024, Caching: CachingExplicit, ContextWindow: 200000,
			Models: map[string]Price{
				"claude-opus-4-6":   anth(5, 25),
				"claude-opus-4-5":   withMin(anth(5, 25), 4096),
				"claude-opus-4-1":   anth(15, 75),
				"claude-opus-4":     anth(15, 75),
				"claude-sonnet-4-5": anth(3, 15),
				"claude-sonnet-4":   anth(3, 15),
				"claude-3-7-sonnet": anth(3, 15),
				"claude-3-5-sonnet": anth(3, 15),
				"claude-haiku-4-5":  withMin(anth(1, 5), 4096),
				"claude-3-5-haiku":  withMin(anth(0.80, 4), 2048),
				"claude-3-haiku":    withMin(Price{Input: 0.25, CacheWrite5m: 0.30, CacheWrite1h: 0.50, CacheRead: 0.03, Output: 1.25}, 2048),
			},
			Default: anth(3, 15),
		},
		"openai": {
			TTL: "5m", MinCacheable: 1024, CacheStep: 128, Caching: CachingAutomatic, ContextWindow: 128000,
			Models: map[string]Price{
				"gpt-5":         withWin(oai(1.25, 0.125, 10), 400000),
				"gpt-5.3-codex": withWin(oai(1.75, 0.175, 14), 400000),
				"gpt-5-mini":    withWin(oai(0.25, 0.025, 2), 400000),
				"gpt-5-nano":    withWin(oai(0.05, 0.005, 0.40), 400000),
				"gpt-4.1":       withWin(oai(2, 0.50, 8), 1047576),
				"gpt-4.1-mini":  withWin(oai(0.40, 0.10, 1.60), 1047576),
				"gpt-4.1-nano":  withWin(oai(0.10, 0.025, 0.40), 1047576),
				"gpt-4o":        oai(2.50, 1.25, 10),
				"gpt-4o-mini":   oai(0.15, 0.075, 0.60),
				"o3":            withWin(oai(2, 0.50, 8), 200000),
				"o4-mini":       withWin(oai(1.10, 0.275, 4.40), 200000),
			},
			Default: withWin(oai(1.25, 0.125, 10), 400000),
		},
		"deepseek": {
			TTL: "1h", MinCacheable: 64, CacheStep: 64, Caching: CachingAutomatic, ContextWindow: 64000,
			Models: map[string]Price{
				"deepseek-chat": oai(0.27, 0.07, 1.10),
			},
			Default: oai(0.27, 0.07, 1.10),
		},
	}
}

func (s *Scheduler) setDefaults() {
	if s.Mode == "" {
		s.Mode = ModeScheduled
	}
	if s.HorizonMinRequests == 0 {
		s.HorizonMinRequests = 5
	}
	if s.HorizonMaxRequests == 0 {
		s.HorizonMaxRequests = 100
	}
	if s.PressurePercent == 0 {
		s.PressurePercent = 65
	}
	if s.DefaultProvider == "" {
		s.DefaultProvider = "anthropic"
	}
	// Build a fresh map: a Policy is passed by value, and writing defaults
	// into a map the caller (or another goroutine's copy) shares would be
	// a data race.
	merged := DefaultProviders()
	for name, pr := range s.Providers {
		merged[name] = pr // entries in the file replace the shipped entry
	}
	for name, pr := range merged {
		if pr.TTL == "" {
			pr.TTL = "5m"
		}
		if pr.Caching == "" {
			pr.Caching = CachingExplicit
		}
		if pr.ContextWindow == 0 {
			pr.ContextWindow = 200000
		}
		merged[name] = pr
	}
	s.Providers = merged
}

func (s *Scheduler) validate() error {
	switch s.Mode {
	case ModeNextRequest, ModeImmediate, ModeScheduled:
	default:
		return fmt.Errorf("mode: bad value %q (want next_request, immediate or scheduled)", s.Mode)
	}
	if s.HorizonRequests < 0 {
		return fmt.Errorf("horizon_requests: must be >= 0")
	}
	if s.HorizonMinRequests < 0 || s.HorizonMaxRequests < s.HorizonMinRequests {
		return fmt.Errorf("horizon_min_requests, horizon_max_requests: want 0 <= min <= max")
	}
	if s.PressureTokens < 0 {
		return fmt.Errorf("pressure_tokens: must be >= 0")
	}
	if s.PressurePercent < 0 || s.PressurePercent > 100 {
		return fmt.Errorf("pressure_percent: must be in [0,100]")
	}
	if _, ok := s.Providers[s.DefaultProvider]; !ok {
		return fmt.Errorf("default_provider: %q has no entry in providers", s.DefaultProvider)
	}
	names := make([]string, 0, len(s.Providers))
	for n := range s.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		pr := s.Providers[n]
		if _, err := time.ParseDuration(pr.TTL); err != nil || (pr.TTL != "5m" && pr.TTL != "1h") {
			return fmt.Errorf("providers.%s.ttl: bad value %q (want 5m or 1h)", n, pr.TTL)
		}
		if pr.Caching != CachingExplicit && pr.Caching != CachingAutomatic {
			return fmt.Errorf("providers.%s.caching: bad value %q (want explicit or automatic)", n, pr.Caching)
		}
		if pr.MinCacheable < 0 || pr.CacheStep < 0 {
			return fmt.Errorf("providers.%s.min_cacheable: must be >= 0", n)
		}
		if err := pr.Default.validate(); err != nil {
			return fmt.Errorf("providers.%s.default.%w", n, err)
		}
		for m, pc := range pr.Models {
			if err := pc.validate(); err != nil {
				return fmt.Errorf("providers.%s.models.%s.%w", n, m, err)
			}
		}
	}
	return nil
}

func (p Price) validate() error {
	if p.Input < 0 || p.CacheWrite5m < 0 || p.CacheWrite1h < 0 || p.CacheRead < 0 || p.Output < 0 {
		return fmt.Errorf("price: negative")
	}
	return nil
}

// Horizon is the break-even horizon at a request preceded by requests
// earlier requests of the current warm run: HorizonRequests when fixed,
// else requests bounded to [HorizonMinRequests, HorizonMaxRequests].
func (s *Scheduler) Horizon(requests int) int {
	if s.HorizonRequests > 0 {
		return s.HorizonRequests
	}
	return min(max(requests, s.HorizonMinRequests), s.HorizonMaxRequests)
}

// Provider returns the named provider's table, falling back to
// DefaultProvider for an empty or unknown name (so an unknown provider is
// priced as Anthropic by default), and the name actually used.
func (s *Scheduler) Provider(name string) (Provider, string) {
	if pr, ok := s.Providers[name]; ok {
		return pr, name
	}
	return s.Providers[s.DefaultProvider], s.DefaultProvider
}

// Resolve finds the provider and price of a session's model. A known
// provider is used as named. An empty or unknown provider is found from the
// model: the provider whose table lists it (the first in name order when
// several do); with no model either, DefaultProvider. priced is false when
// the model is named but no table lists it: the price returned is then
// only the fallback the scheduler times decisions with (the provider's
// Default, or DefaultProvider's), and reports must show the session as
// unpriced, never at those rates.
func (s *Scheduler) Resolve(provider, model string) (pr Provider, name string, price Price, priced bool) {
	if p, ok := s.Providers[provider]; ok {
		price, priced = p.Lookup(model)
		return p, provider, price, priced
	}
	if model != "" {
		names := make([]string, 0, len(s.Providers))
		for n := range s.Providers {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if price, ok := s.Providers[n].Lookup(model); ok {
				return s.Providers[n], n, price, true
			}
		}
	}
	p, n := s.Provider("")
	price, priced = p.Lookup(model)
	return p, n, price, priced
}

// Price returns the model's prices: the entry Lookup finds, else the
// provider's Default. The returned price has MinCacheable and
// ContextWindow filled in.
func (pr Provider) Price(model string) Price {
	p, _ := pr.Lookup(model)
	return p
}

// Lookup returns the model's prices and whether the table lists the model:
// the entry whose key equals the model name, or is followed in it only by
// a date ("claude-sonnet-4-5-20250929", "gpt-4o-2024-08-06",
// "claude-sonnet-4@20250514") or "-latest". A "vendor/" routing prefix
// ("deepseek/deepseek-chat") is ignored. A model the table does not list
// gets the provider's Default and false: it is another model, whatever its
// name starts with ("gpt-5.3-codex" is not "gpt-5"). An empty model name
// (the session names none) gets the Default and true: the provider's
// Default is the configured assumption for unnamed models. The returned
// price has MinCacheable and ContextWindow filled in.
func (pr Provider) Lookup(model string) (Price, bool) {
	best, ok := pr.Default, model == ""
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
	}
	if v, hit := pr.Models[model]; hit {
		best, ok = v, true
	} else {
		bestLen := -1
		for k, v := range pr.Models {
			if len(k) > bestLen && strings.HasPrefix(model, k) && datedSuffix(model[len(k):]) {
				best, ok, bestLen = v, true, len(k)
			}
		}
	}
	return pr.fill(best), ok
}

// datedSuffix reports whether s is what may follow a listed model name in
// a name meaning the same model: a date (-YYYYMMDD, @YYYYMMDD or
// -YYYY-MM-DD) or "-latest".
func datedSuffix(s string) bool {
	digits := func(s string) bool {
		for _, r := range s {
			if r < '0' || r > '9' {
				return false
			}
		}
		return true
	}
	switch {
	case s == "-latest":
		return true
	case len(s) == 9 && (s[0] == '-' || s[0] == '@'):
		return digits(s[1:])
	case len(s) == 11 && s[0] == '-' && s[5] == '-' && s[8] == '-':
		return digits(s[1:5]) && digits(s[6:8]) && digits(s[9:])
	}
	return false
}

// fill completes a price with the provider's cache limits and the cache
// write prices' fallbacks.
func (pr Provider) fill(best Price) Price {
	if best.MinCacheable == 0 {
		best.MinCacheable = pr.MinCacheable
	}
	if best.ContextWindow == 0 {
		best.ContextWindow = pr.ContextWindow
	}
	if best.CacheWrite5m == 0 {
		best.CacheWrite5m = best.Input
	}
	if best.CacheWrite1h == 0 {
		best.CacheWrite1h = best.CacheWrite5m
	}
	return best
}
