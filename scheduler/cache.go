package scheduler

import (
	"fmt"
	"time"

	"github.com/prunesched/prunesched/policy"
)

// pricing is the cache model's view of one provider and model: prices,
// cache limits and the TTL tier in force.
type pricing struct {
	provider string
	model    string
	prov     policy.Provider
	price    policy.Price
	tier     string
	// priced is false when no price table lists the model: price is then
	// only the fallback decisions are timed with, and economics reports
	// the session as unpriced.
	priced bool
}

// pricingFor resolves provider, model and tier with
// policy.Scheduler.Resolve: an empty or unknown provider is found from the
// model; a named model no table lists is unpriced. An empty tier is the
// provider's TTL.
func (c *Core) pricingFor(provider, model, tier string) pricing {
	prov, name, price, priced := c.pol.Scheduler.Resolve(provider, model)
	if tier == "" {
		tier = prov.TTL
	}
	if !priced {
		name = provider
	}
	return pricing{provider: name, model: model, prov: prov, price: price, tier: tier, priced: priced}
}

// ttl is the cache lifetime of the tier.
func (p pricing) ttl() time.Duration {
	if p.tier == "1h" {
		return time.Hour
	}
	return 5 * time.Minute
}

// write is the USD per million tokens paid for a token that misses the
// cache in a prompt long enough to be cached: the cache-write price of the
// tier (explicit caching) or the plain input price (automatic caching).
func (p pricing) write() float64 {
	if p.prov.Caching == policy.CachingAutomatic {
		return p.price.Input
	}
	if p.tier == "1h" {
		return p.price.CacheWrite1h
	}
	return p.price.CacheWrite5m
}

// read is the USD per million tokens of a cache hit.
func (p pricing) read() float64 { return p.price.CacheRead }

// cacheable is how much of a prefix of n tokens the provider can cache or
// hit: 0 below the minimum, else n rounded down to the cache step.
func (p pricing) cacheable(n int) int {
	min := p.price.MinCacheable
	if n < min || n <= 0 {
		return 0
	}
	if st := p.prov.CacheStep; st > 1 {
		return min + (n-min)/st*st
	}
	return n
}

// usd prices tokens at a per-million price.
func usd(tokens int, perMillion float64) float64 { return float64(tokens) * perMillion / 1e6 }

// cacheState is the provider cache as the scheduler believes it is just
// before the request at fact index f is sent.
type cacheState struct {
	prev   int // index into c.reqs of the last request before f, or -1
	warm   bool
	cached int    // prefix cached by the previous request (tokens), 0 if cold
	cold   string // why the cache is cold, "" when warm
	gap    time.Duration
	pr     pricing
}

// cacheAt models the cache before the request at fact index f dispatched
// at time at. With reports from an explicit-caching provider, the previous
// request's usage calibrates the cached prefix: a request that reported
// neither cache reads nor writes cached nothing, and one that did cached all
// but its reported uncached tail (usage input tokens), whatever the model's
// own size estimate says.
func (c *Core) cacheAt(f int, at time.Time, reports bool) cacheState {
	k := c.prevRequest(f)
	st := cacheState{prev: k}
	if k < 0 {
		st.pr = c.pricingFor(c.provider, c.model, "")
		if len(c.reqs) > 0 {
			st.pr = c.pricingFor(c.reqs[0].provider, c.reqs[0].model, "")
		}
		st.cold = "no request sent yet"
		return st
	}
	r := c.reqs[k]
	st.pr = c.pricingFor(r.provider, r.model, r.tier)
	st.gap = at.Sub(r.at)
	if h := c.lastCompactionBefore(f); h > r.fact {
		st.cold = "host compaction reset the context"
		return st
	}
	if st.gap > st.pr.ttl() {
		st.cold = fmt.Sprintf("cache expired: %s since last request > ttl %s", st.gap, st.pr.ttl())
		return st
	}
	size := c.tokens(c.spanAt(r.fact))
	st.cached = st.pr.cacheable(size)
	// Only explicit caching reports what a request wrote. Under automatic
	// caching (OpenAI) writes are free and unreported: a request caches its
	// whole cacheable prompt whatever it read, so a report of zero reads is
	// no sign of a cold cache.
	if u := r.usage; reports && u != nil && st.pr.prov.Caching == policy.CachingExplicit {
		if u.CacheReadTokens+u.CacheWriteTokens == 0 {
			st.cached = 0
		} else {
			st.cached = min(max(size-u.InputTokens, 0), size)
		}
	}
	if st.cached == 0 {
		st.cold = "nothing cached by the last request"
		return st
	}
	st.warm = true
	return st
}

// prevRequest is the index in c.reqs of the last request with fact index
// before f, or -1.
func (c *Core) prevRequest(f int) int {
	lo, hi := 0, len(c.reqs)
	for lo < hi {
		m := (lo + hi) / 2
		if c.reqs[m].fact < f {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}
