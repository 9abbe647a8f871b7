package scheduler

import (
	"fmt"
	"sort"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

// Recovery pricing: what a removal the model needs again costs when the
// model fetches the item back by its handle (the context_recover tool)
// instead of going without it.
//
// The answer to the request whose answer first uses the item becomes a
// recovery call; the original comes back byte for byte as a tool result
// appended at the end (never at its old place, so no cached prefix
// changes); one extra request re-sends the context with the call and the
// item, and its answer is the one the request gave without recovery. The
// recovered item then stays in context for the rest of the session.
//
// Everything is priced by the ledger every request is priced by
// (Core.ledger), on a copy of the session in which the call and the item
// are items entered right after the context of the request whose answer
// needed them, and the extra request a request right after that one, at
// its time, with its provider, model and cache tier. So:
//   - the extra request reads from cache the prefix the request before it
//     just cached (nothing when that prompt is below the minimum cacheable
//     length) and writes the call and the item (or pays them as input);
//   - every later request carries them: read from cache while its cache is
//     warm and the prefix up to them unchanged, written again after the
//     cache expired or an application broke the prefix before them;
//   - a host compaction drops them with the rest of the context.
//
// The pruning policy is not asked to remove a recovered item again: it
// stays to the end (or to a host compaction), an upper bound on what it
// carries. Items first needed by the same answer are fetched by one
// answer with one call each (parallel tool calls) and one extra request.

// RecoveryAnswerTokens is the output tokens assumed for one recovery call
// (the model's answer asking context_recover for one handle: a tool_use
// block with the tool's name, an id and the handle, with a few words
// around it). A fixed number, so that the figure is the same on every
// machine and every session: a context_recover call is about 40 tokens,
// and 60 leaves room for the words a model adds before a tool call.
// analyze --compare and the lab price recoveries with it.
const RecoveryAnswerTokens = 60

// Recovery is one removed item the model fetches back.
type Recovery struct {
	// Item is the removed item's id.
	Item string
	// Fact is the fact index of the first event that uses the item again
	// (an assistant message or tool call). The answer that held it is the
	// answer to the last request before Fact.
	Fact int
}

// RecoveryCost is what recoveries add to a session under one schedule.
// Costs are USD, 0 when the session is unpriced.
type RecoveryCost struct {
	// Recoveries is the items fetched back; Requests the extra model
	// requests that fetched them.
	Recoveries int `json:"recoveries"`
	Requests   int `json:"requests"`
	// Tokens is the prompt tokens added: the extra requests' prompts and
	// the calls and items every later request carries.
	Tokens int `json:"tokens"`
	// Output is the answer tokens of the recovery calls.
	Output int `json:"output"`
	// PromptCost is the prompt cost added (the ledger's prompt side),
	// OutputCost the recovery calls' output; Cost their sum.
	PromptCost float64 `json:"prompt_cost"`
	OutputCost float64 `json:"output_cost"`
	Cost       float64 `json:"cost"`
}

// PriceRecoveries prices recs on one session: evs are its facts, marks
// and the applications of one schedule (e.g. a Ledger's
// ApplicationEvents) in log order (events.MergeLog), head the unchanging
// context before every bundle (that schedule's Ledger.Head), answer the
// output tokens of one recovery call, which enter the context as the call
// item. See the comment at the top of this file for the model. It fails
// on an item the session does not hold, or a use no request precedes.
// Deterministic.
func PriceRecoveries(p policy.Policy, evs []events.Event, head int, recs []Recovery, answer int) (RecoveryCost, error) {
	if answer < 0 {
		return RecoveryCost{}, fmt.Errorf("price recoveries: negative answer tokens %d", answer)
	}
	tenant, session := "", ""
	if len(evs) > 0 {
		tenant, session = evs[0].Tenant, evs[0].Session
	}
	c := New(p, tenant, session)
	for _, ev := range evs {
		c.Observe(ev)
	}
	return c.priceRecoveries(head, recs, answer)
}

// fetch is the recoveries the answer to one request makes.
type fetch struct {
	req   int // index in c.reqs
	items []*item
}

func (c *Core) priceRecoveries(head int, recs []Recovery, answer int) (RecoveryCost, error) {
	var out RecoveryCost
	if len(recs) == 0 {
		return out, nil
	}
	byReq := map[int]*fetch{}
	var fs []*fetch
	for _, r := range recs {
		i, ok := c.byID[r.Item]
		if !ok {
			return out, fmt.Errorf("price recoveries: item %q is not in the session", r.Item)
		}
		k := c.prevRequest(r.Fact)
		if k < 0 {
			return out, fmt.Errorf("price recoveries: item %q used at fact %d before any request", r.Item, r.Fact)
		}
		f := byReq[k]
		if f == nil {
			f = &fetch{req: k}
			byReq[k] = f
			fs = append(fs, f)
		}
		f.items = append(f.items, c.items[i])
	}
	sort.Slice(fs, func(a, b int) bool { return fs[a].req < fs[b].req })
	base := c.ledger(head)
	with := c.withRecoveries(fs, answer).ledger(head)
	out.Recoveries, out.Requests = len(recs), len(fs)
	out.Tokens = with.Total.Tokens - base.Total.Tokens
	for _, f := range fs {
		r := c.reqs[f.req]
		n := answer * len(f.items)
		out.Output += n
		out.OutputCost += usd(n, c.pricingFor(r.provider, r.model, r.tier).price.Output)
	}
	out.PromptCost = with.Total.Cost - base.Total.Cost
	if base.Unpriced || with.Unpriced {
		out.PromptCost, out.OutputCost = 0, 0
	}
	out.Cost = out.PromptCost + out.OutputCost
	return out, nil
}

// withRecoveries returns a copy of the core's session for pricing only
// (Core.ledger): for each fetch, the recovery calls (answer tokens each)
// and the recovered items, never pruned, enter right after the context of
// the fetch's request (at its fact index, which no item holds), and an
// extra request at the next fact index and the same time sends them.
// fs are in request order. The original items are shared, not changed;
// item.pos, byID and the marks are not kept (the ledger reads none).
func (c *Core) withRecoveries(fs []*fetch, answer int) *Core {
	cp := &Core{pol: c.pol, provider: c.provider, model: c.model, compactions: c.compactions}
	add := 0
	for _, f := range fs {
		add += 2 * len(f.items)
	}
	cp.items = make([]*item, 0, len(c.items)+add)
	cp.reqs = make([]request, 0, len(c.reqs)+len(fs))
	next := 0 // next original item to copy
	prevReq := 0
	for _, f := range fs {
		r := c.reqs[f.req]
		cp.reqs = append(cp.reqs, c.reqs[prevReq:f.req+1]...)
		prevReq = f.req + 1
		for next < len(c.items) && c.items[next].fact <= r.fact {
			cp.items = append(cp.items, c.items[next])
			next++
		}
		for _, it := range f.items {
			cp.items = append(cp.items,
				&item{id: "recover/" + it.id + "/call", fact: r.fact, tokens: answer, priced: answer},
				&item{id: "recover/" + it.id, fact: r.fact, tokens: it.tokens, priced: it.priced, result: true})
		}
		x := r
		x.fact, x.id, x.usage = r.fact+1, "recover/"+r.id, nil
		cp.reqs = append(cp.reqs, x)
	}
	cp.items = append(cp.items, c.items[next:]...)
	cp.reqs = append(cp.reqs, c.reqs[prevReq:]...)
	return cp
}
