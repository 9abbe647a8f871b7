package scheduler

import (
	"fmt"
	"sort"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

// Strategies Simulate knows.
const (
	// StrategyNone never prunes.
	StrategyNone = "none"
	// StrategyImmediate applies every eligible mark at the next request
	// (the DCP strategy).
	StrategyImmediate = "immediate"
	// StrategyScheduled applies marks by the scheduled mode's triggers.
	StrategyScheduled = "scheduled"
	// StrategyNextRequest is the first slice's mode (same applications as
	// immediate, trigger next_request).
	StrategyNextRequest = "next_request"
)

// RequestCost is the prompt-cache economics of one model request, for the
// bundle as rendered under one strategy. Costs are USD. Cost is the prompt
// side (read + write + uncached), the part pruning and timing change;
// output is reported beside it and is the same under every strategy.
type RequestCost struct {
	// Request is the request id; Index its 0-based position among the
	// session's requests; Fact its fact index.
	Request string    `json:"request,omitempty"`
	Index   int       `json:"index"`
	Fact    int       `json:"fact"`
	Time    time.Time `json:"time"`
	// Tokens is the rendered prompt sent (input in the provider's sense:
	// CacheRead + CacheWrite + Uncached).
	Tokens       int     `json:"tokens"`
	CacheRead    int     `json:"cache_read"`
	CacheWrite   int     `json:"cache_write"`
	Uncached     int     `json:"uncached"`
	ReadCost     float64 `json:"read_cost"`
	WriteCost    float64 `json:"write_cost"`
	UncachedCost float64 `json:"uncached_cost"`
	Cost         float64 `json:"cost"`
	Output       int     `json:"output"`
	OutputCost   float64 `json:"output_cost"`
}

func (t *RequestCost) add(r RequestCost) {
	t.Tokens += r.Tokens
	t.CacheRead += r.CacheRead
	t.CacheWrite += r.CacheWrite
	t.Uncached += r.Uncached
	t.ReadCost += r.ReadCost
	t.WriteCost += r.WriteCost
	t.UncachedCost += r.UncachedCost
	t.Cost += r.Cost
	t.Output += r.Output
	t.OutputCost += r.OutputCost
}

// AppSummary is one application as the analyze report lists it.
type AppSummary struct {
	// Request is the 0-based position among the session's requests of the
	// request the application was decided for (-1 if it matches none).
	Request         int            `json:"request"`
	RequestID       string         `json:"request_id"`
	Trigger         events.Trigger `json:"trigger"`
	Marks           int            `json:"marks"`
	FirstDivergence int            `json:"first_divergence"`
	MutationRadius  int            `json:"mutation_radius"`
	TokensRemoved   int            `json:"tokens_removed"`
	CacheCost       float64        `json:"cache_cost"`
	ExpectedSaving  float64        `json:"expected_saving"`
}

// Ledger is the per-request economics of one session under one strategy.
type Ledger struct {
	Strategy string `json:"strategy"`
	Provider string `json:"provider"`
	Model    string `json:"model,omitempty"`
	// Unpriced is true when a request's model is in no price table: every
	// cost in the ledger is then 0 (tokens are still counted), never
	// another model's or provider's rates.
	Unpriced bool `json:"unpriced,omitempty"`
	// Head is the unchanging context assumed before every bundle (see
	// Economics), included in every request's Tokens.
	Head         int           `json:"head"`
	Requests     []RequestCost `json:"requests"`
	Total        RequestCost   `json:"total"`
	Applications []AppSummary  `json:"applications"`
	// ApplicationEvents are the same applications as events, in order (not
	// in the JSON): what a caller renders the strategy's bundles with.
	ApplicationEvents []events.Event `json:"-"`
}

// Economics replays the requests the core has observed through the cache
// model, for the bundles as rendered with the applications observed so far
// (strategy "observed"). The model is the pure one (no calibration from
// usage reports, so it can price bundles that were never sent): a request
// reads from cache the item-aligned common prefix with the previous
// request's bundle, capped by what that request cached, if the previous
// request is within its tier's TTL, shares the context (no host compaction
// between) and cached anything (at least the minimum cacheable length;
// OpenAI in 128-token steps); the rest is written (explicit caching) or
// billed as input (automatic caching, or a prompt below the minimum).
//
// Head: the log does not hold everything the provider saw (Claude Code's
// system prompt and tool definitions are tens of thousands of tokens). When
// requests carry usage reports, the median of reported prompt minus
// rendered bundle is added as an unchanging head before every bundle (read
// from cache like any prefix), the same under every strategy; Ledger.Head
// says how much.
func (c *Core) Economics() Ledger { return c.economics(c.head()) }

// head estimates the context the provider saw that the log does not hold:
// the median over reported requests of input + cache read + cache write
// minus the rendered bundle, floored at 0 (0 without reports).
func (c *Core) head() int {
	var d []int
	for _, r := range c.reqs {
		if u := r.usage; u != nil {
			d = append(d, u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens-c.tokens(c.spanAt(r.fact)))
		}
	}
	if len(d) == 0 {
		return 0
	}
	sort.Ints(d)
	return max(0, d[len(d)/2])
}

func (c *Core) economics(head int) Ledger {
	l := Ledger{Strategy: "observed", Head: head, Requests: []RequestCost{}, Applications: []AppSummary{}}
	var prev span
	var prevAt time.Time
	var prevTTL time.Duration
	prevCached := -1
	reqIndex := map[int]int{}
	for k, r := range c.reqs {
		reqIndex[r.fact] = k
		pr := c.pricingFor(r.provider, r.model, r.tier)
		l.Provider, l.Model = pr.provider, r.model
		cur := c.spanAt(r.fact)
		n := head + c.tokens(cur)
		rc := RequestCost{Request: r.id, Index: k, Fact: r.fact, Time: r.at, Tokens: n}
		if prevCached > 0 && r.at.Sub(prevAt) <= prevTTL {
			common := head
			if prev.lo == cur.lo {
				common += c.commonPrefix(prev, cur)
			}
			rc.CacheRead = pr.cacheable(min(common, prevCached))
		}
		rest := n - rc.CacheRead
		cacheable := pr.cacheable(n)
		if cacheable > 0 && pr.prov.Caching == policy.CachingExplicit {
			rc.CacheWrite = rest
		} else {
			rc.Uncached = rest
		}
		rc.ReadCost = usd(rc.CacheRead, pr.read())
		rc.WriteCost = usd(rc.CacheWrite, pr.write())
		rc.UncachedCost = usd(rc.Uncached, pr.price.Input)
		rc.Cost = rc.ReadCost + rc.WriteCost + rc.UncachedCost
		if r.usage != nil {
			rc.Output = r.usage.OutputTokens
			rc.OutputCost = usd(rc.Output, pr.price.Output)
		}
		if !pr.priced {
			l.Unpriced = true
		}
		l.Requests = append(l.Requests, rc)
		l.Total.add(rc)
		prev, prevAt, prevTTL, prevCached = cur, r.at, pr.ttl(), cacheable
	}
	if len(c.reqs) == 0 {
		pr := c.pricingFor(c.provider, c.model, "")
		l.Provider, l.Unpriced = pr.provider, !pr.priced
	}
	if l.Unpriced {
		l.unprice()
	}
	for _, a := range c.apps {
		k, ok := reqIndex[a.after]
		if !ok {
			k = -1
		}
		l.ApplicationEvents = append(l.ApplicationEvents, a.ev)
		l.Applications = append(l.Applications, AppSummary{
			Request: k, RequestID: a.app.Request, Trigger: a.app.Trigger, Marks: len(a.app.Marks),
			FirstDivergence: a.app.FirstDivergence, MutationRadius: a.app.MutationRadius,
			TokensRemoved: a.app.TokensRemoved, CacheCost: a.app.CacheCost, ExpectedSaving: a.app.ExpectedSaving,
		})
	}
	return l
}

// unprice zeroes every cost of an unpriced ledger, keeping the tokens.
func (l *Ledger) unprice() {
	for i := range l.Requests {
		r := &l.Requests[i]
		r.ReadCost, r.WriteCost, r.UncachedCost, r.Cost, r.OutputCost = 0, 0, 0, 0, 0
	}
	t := &l.Total
	t.ReadCost, t.WriteCost, t.UncachedCost, t.Cost, t.OutputCost = 0, 0, 0, 0, 0
}

// Simulate replays one session's events (facts and marks, in log order)
// under a strategy (none, immediate, scheduled or next_request) and returns
// its ledger. Applications already in evs are ignored: the strategy makes
// its own. Marks are fed before the facts, which changes nothing (a mark
// counts at a request only if its CauseIndex is before it) and lets a mark
// published late still count where its cause allows. Events of sessions
// other than the first one seen are ignored. It panics on an unknown
// strategy.
//
// The head (context the log does not hold, estimated from usage reports) is
// always taken from the unpruned replay: the reports describe the requests
// as they were sent, so a pruned bundle must not inflate the estimate.
func Simulate(p policy.Policy, evs []events.Event, strategy string) Ledger {
	return SimulateAll(p, evs, strategy)[strategy]
}

// SimulateAll is Simulate for several strategies over the same events,
// replaying the unpruned session (for the head) once for all of them.
func SimulateAll(p policy.Policy, evs []events.Event, strategies ...string) map[string]Ledger {
	none := replay(p, evs, StrategyNone)
	head := none.head()
	out := make(map[string]Ledger, len(strategies))
	for _, st := range strategies {
		c := none
		if st != StrategyNone {
			c = replay(p, evs, st)
		}
		l := c.economics(head)
		l.Strategy = st
		out[st] = l
	}
	return out
}

// replay runs a fresh core over evs under strategy, as Simulate describes.
func replay(p policy.Policy, evs []events.Event, strategy string) *Core {
	switch strategy {
	case StrategyNone, StrategyImmediate, StrategyScheduled, StrategyNextRequest:
	default:
		panic(fmt.Sprintf("scheduler.Simulate: unknown strategy %q", strategy))
	}
	if strategy != StrategyNone {
		p.Scheduler.Mode = strategy
	}
	tenant, session := "", ""
	if len(evs) > 0 {
		tenant, session = evs[0].Tenant, evs[0].Session
	}
	c := New(p, tenant, session)
	if strategy != StrategyNone {
		for _, ev := range evs {
			if ev.Type == events.TypeMark {
				c.Observe(ev)
			}
		}
	}
	for _, ev := range evs {
		if !ev.IsFact() {
			continue
		}
		if r, ok := ev.Data.(*events.ModelRequest); ok && strategy != StrategyNone && (ev.Session == session || ev.Session == "") {
			c.Decide(ev.Time, r.Request, c.facts)
		}
		c.Observe(ev)
	}
	return c
}
