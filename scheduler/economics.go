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
	// StrategyHindsight applies the same marks at the best requests known
	// only afterwards (see SimulateAll): the yardstick the scheduler's
	// cost is measured against.
	StrategyHindsight = "hindsight"
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
	// Recoveries counts the items the model recovered (context_recover)
	// first sent in this request; RecoveryTokens are the tokens of every
	// recovered item the request sends, and RecoveryCost their share of
	// Cost: at the write (or uncached) price when first sent, at the read
	// price after, while the cache is warm. Part of Tokens and Cost, not
	// added to them.
	Recoveries     int     `json:"recoveries,omitempty"`
	RecoveryTokens int     `json:"recovery_tokens,omitempty"`
	RecoveryCost   float64 `json:"recovery_cost,omitempty"`
}

func (t *RequestCost) add(r RequestCost) {
	t.Recoveries += r.Recoveries
	t.RecoveryTokens += r.RecoveryTokens
	t.RecoveryCost += r.RecoveryCost
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

// appSummary is the AppSummary of a, decided for the request at position
// request.
func appSummary(request int, a *events.Application) AppSummary {
	return AppSummary{
		Request: request, RequestID: a.Request, Trigger: a.Trigger, Marks: len(a.Marks),
		FirstDivergence: a.FirstDivergence, MutationRadius: a.MutationRadius,
		TokensRemoved: a.TokensRemoved, CacheCost: a.CacheCost, ExpectedSaving: a.ExpectedSaving,
	}
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
// Items are priced at events.PricedTokens (the exact count where the fact
// has one), never at the estimate a decision may have used.
func (c *Core) Economics() Ledger { return c.economics(c.head()) }

// head estimates the context the provider saw that the log does not hold:
// the median over reported requests of input + cache read + cache write
// minus the rendered bundle, floored at 0 (0 without reports).
func (c *Core) head() int {
	var d []int
	for _, r := range c.reqs {
		if u := r.usage; u != nil {
			d = append(d, u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens-c.tokensAs(c.spanAt(r.fact), true))
		}
	}
	if len(d) == 0 {
		return 0
	}
	sort.Ints(d)
	return max(0, d[len(d)/2])
}

func (c *Core) economics(head int) Ledger {
	l := c.ledger(head)
	if l.Unpriced {
		l.unprice()
	}
	return l
}

// ledger is economics before an unpriced ledger's costs are zeroed (its
// costs are then at the fallback prices the scheduler times with).
func (c *Core) ledger(head int) Ledger {
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
		n := head + c.tokensAs(cur, true)
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
		c.priceRecovered(&rc, cur, prev, pr, rc.CacheRead > 0)
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
	for _, a := range c.apps {
		k, ok := reqIndex[a.after]
		if !ok {
			k = -1
		}
		l.ApplicationEvents = append(l.ApplicationEvents, a.ev)
		l.Applications = append(l.Applications, appSummary(k, &a.app))
	}
	return l
}

// priceRecovered fills rc's recovery fields from the recovered items in
// the bundle cur: one new since the previous request's bundle prev, or
// sent when the cache is cold, is written (or sent uncached); one sent
// before is read while the cache is warm.
func (c *Core) priceRecovered(rc *RequestCost, cur, prev span, pr pricing, warm bool) {
	for _, it := range c.recoveries {
		if it.pos < cur.lo || it.pos >= cur.hi {
			continue
		}
		_, n := it.sizeAt(cur.f, true)
		rc.RecoveryTokens += n
		first := it.pos >= prev.hi || prev.lo != cur.lo
		if first {
			rc.Recoveries++
		}
		switch {
		case warm && !first:
			rc.RecoveryCost += usd(n, pr.read())
		case rc.CacheWrite > 0:
			rc.RecoveryCost += usd(n, pr.write())
		default:
			rc.RecoveryCost += usd(n, pr.price.Input)
		}
	}
}

// unprice zeroes every cost of an unpriced ledger, keeping the tokens.
func (l *Ledger) unprice() {
	for i := range l.Requests {
		r := &l.Requests[i]
		r.ReadCost, r.WriteCost, r.UncachedCost, r.Cost, r.OutputCost, r.RecoveryCost = 0, 0, 0, 0, 0, 0
	}
	t := &l.Total
	t.ReadCost, t.WriteCost, t.UncachedCost, t.Cost, t.OutputCost, t.RecoveryCost = 0, 0, 0, 0, 0, 0
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
//
// Strategy hindsight applies the same PRUNE marks at the requests that
// prove cheapest once the whole session is known: starting from the best
// of the scheduler's own schedule, immediate application, application at
// the first free point (cache expired, host compaction) and no pruning,
// each mark in turn is moved to whichever of its candidate requests (its
// first request, every later free point, the requests other marks apply
// at, or never) lowers the session's prompt cost, for two passes. It is
// an upper bound on the best schedule (a local optimum over those
// candidates), never worse than scheduled, immediate or none.
func SimulateAll(p policy.Policy, evs []events.Event, strategies ...string) map[string]Ledger {
	return simulateFrom(p, evs, replay(p, evs, StrategyNone), strategies)
}

// simulateFrom is SimulateAll given the unpruned replay of evs.
func simulateFrom(p policy.Policy, evs []events.Event, none *Core, strategies []string) map[string]Ledger {
	head := none.head()
	out := make(map[string]Ledger, len(strategies))
	for _, st := range strategies {
		if st == StrategyHindsight {
			l := hindsight(p, evs, none, head).economics(head)
			l.Strategy = st
			out[st] = l
			continue
		}
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
	case StrategyNone, StrategyImmediate, StrategyScheduled, StrategyNextRequest, StrategyHindsight:
	default:
		panic(fmt.Sprintf("scheduler.Simulate: unknown strategy %q", strategy))
	}
	return replayPlan(p, evs, strategy, nil)
}

// replayPlan is replay with a hindsight plan (nil: the strategy's rules).
func replayPlan(p policy.Policy, evs []events.Event, strategy string, plan map[string]int) *Core {
	if strategy != StrategyNone && strategy != StrategyHindsight {
		p.Scheduler.Mode = strategy
	}
	tenant, session := "", ""
	if len(evs) > 0 {
		tenant, session = evs[0].Tenant, evs[0].Session
	}
	c := New(p, tenant, session)
	c.plan = plan
	// Without marks (StrategyNone) Feed decides nothing. The log's own
	// applications are not fed: a simulation decides them again.
	r := Replayer{Fact: func(ev events.Event) { c.Feed(ev) }}
	if strategy != StrategyNone {
		r.Mark = c.Observe
	}
	Replay(evs, 0, r)
	return c
}

// maxHindsightReplays bounds the replays one hindsight search makes (each
// is one pass over the session, about a millisecond on a real one).
const maxHindsightReplays = 400

// hindsight searches the application requests of the session's PRUNE
// marks for the cheapest prompt cost (see SimulateAll) and returns the
// replay of the best plan found.
func hindsight(p policy.Policy, evs []events.Event, none *Core, head int) *Core {
	// Each PRUNE mark's first request: the first whose fact index is past
	// the mark's cause.
	var ids []string
	first := map[string]int{}
	for _, ev := range evs {
		m, ok := ev.Data.(*events.Mark)
		if !ok || m.Decision != events.Prune {
			continue
		}
		k := sort.Search(len(none.reqs), func(i int) bool { return none.reqs[i].fact > m.CauseIndex })
		if k < len(none.reqs) {
			if _, dup := first[ev.ID]; !dup {
				ids = append(ids, ev.ID)
			}
			first[ev.ID] = k
		}
	}
	// Free points: requests the unpruned session sends with a cold cache.
	var free []int
	for k, r := range none.reqs {
		if k > 0 && !none.cacheAt(r.fact, r.at, false).warm {
			free = append(free, k)
		}
	}
	replays := 0
	eval := func(plan map[string]int) (*Core, float64, int) {
		replays++
		c := replayPlan(p, evs, StrategyHindsight, plan)
		t := c.ledger(head).Total
		return c, t.Cost, t.Tokens
	}
	better := func(cost float64, tok int, bc float64, bt int) bool {
		const eps = 1e-12
		return cost < bc-eps || (cost <= bc+eps && tok < bt)
	}
	// Starting plans: none, immediate, first free point, scheduled.
	imm, atFree, sched := map[string]int{}, map[string]int{}, map[string]int{}
	for _, id := range ids {
		imm[id] = first[id]
		if i := sort.SearchInts(free, first[id]); i < len(free) {
			atFree[id] = free[i]
		}
	}
	sc := replay(p, evs, StrategyScheduled)
	reqOfFact := map[int]int{}
	for k, r := range sc.reqs {
		reqOfFact[r.fact] = k
	}
	for _, a := range sc.apps {
		if k, ok := reqOfFact[a.after]; ok {
			for _, id := range a.app.Marks {
				if _, isPrune := first[id]; isPrune {
					sched[id] = k
				}
			}
		}
	}
	var best *Core
	var bestPlan map[string]int
	bc, bt := 0.0, 0
	for _, plan := range []map[string]int{sched, imm, atFree, {}} {
		c, cost, tok := eval(plan)
		if best == nil || better(cost, tok, bc, bt) {
			best, bestPlan, bc, bt = c, plan, cost, tok
		}
	}
	for pass := 0; pass < 2 && len(ids) > 0; pass++ {
		improved := false
		for _, id := range ids {
			opts := map[int]bool{-1: true, first[id]: true}
			for _, k := range free {
				if k >= first[id] {
					opts[k] = true
				}
			}
			for other, k := range bestPlan {
				if other != id && k >= first[id] {
					opts[k] = true
				}
			}
			keys := make([]int, 0, len(opts))
			for k := range opts {
				keys = append(keys, k)
			}
			sort.Ints(keys)
			cur, has := bestPlan[id]
			for _, k := range keys {
				if (k < 0 && !has) || (has && k == cur) || replays >= maxHindsightReplays {
					continue
				}
				plan := make(map[string]int, len(bestPlan))
				for x, v := range bestPlan {
					plan[x] = v
				}
				if k < 0 {
					delete(plan, id)
				} else {
					plan[id] = k
				}
				if c, cost, tok := eval(plan); better(cost, tok, bc, bt) {
					best, bestPlan, bc, bt = c, plan, cost, tok
					cur, has = k, k >= 0
					improved = true
				}
			}
		}
		if !improved {
			break
		}
	}
	return best
}

// PricedRemoved is an application's tokens removed as the economics price
// them: Application.TokensRemoved (the decision's figure, net of the
// placeholders) with each removed item at events.PricedTokens. Marks the
// core has not observed count at their decision's figure alone.
func (c *Core) PricedRemoved(app *events.Application) int {
	n := app.TokensRemoved
	for _, id := range app.Marks {
		m, ok := c.markByID[id]
		if !ok || m.m.Decision != events.Prune || m.m.Reason == events.ReasonSpanReference {
			continue // a span reference removes runs, priced as decided
		}
		if it, _ := c.markTarget(m); it != nil {
			n += it.priced - it.tokens
		}
	}
	return max(n, 0)
}
