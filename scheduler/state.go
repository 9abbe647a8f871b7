package scheduler

import (
	"sort"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/agenttools"
	"github.com/prunesched/prunesched/placeholder"
	"github.com/prunesched/prunesched/policy"
)

// item is one unit of context in render order.
type item struct {
	id   string
	pos  int // index in Core.items
	fact int // fact index at which the item entered the session
	// tokens is the decision count; priced the count the economics price
	// (events.PricedTokens: the exact count where the fact has one).
	tokens int
	priced int
	callID string // tool call id, for tool inputs and results
	result bool   // a tool result (output half)
	// changes are the item's render-state changes in order of eff: from
	// fact index eff on the item renders pruned (with a placeholder of
	// placeholder tokens) or whole.
	changes []change
}

type change struct {
	eff         int
	pruned      bool
	placeholder int
	// span is set when the applied prune is a span reference (the item
	// still rendered, its repeated runs as reference lines); spanSurv is
	// the item whose lines it names.
	span     bool
	spanSurv string
}

// pruned reports whether the item renders pruned (whole or as a span
// reference) in the bundle of the request at fact index f.
func (it *item) pruned(f int) bool {
	p, _ := it.stateAt(f)
	return p
}

// spanAt reports whether the item renders as a span reference in the
// bundle of the request at fact index f, and the item whose lines the
// reference names.
func (it *item) spanAt(f int) (bool, string) {
	for i := len(it.changes) - 1; i >= 0; i-- {
		if c := it.changes[i]; c.eff <= f {
			return c.pruned && c.span, c.spanSurv
		}
	}
	return false, ""
}

// stateAt returns whether the item renders pruned in the bundle of the
// request at fact index f, and its rendered size as decisions count it.
func (it *item) stateAt(f int) (pruned bool, size int) { return it.sizeAt(f, false) }

// sizeAt is stateAt with the size the economics price when priced: the
// item's priced count whole, a placeholder as decided, and a span
// reference's rendered rest moved by what the exact count corrects.
func (it *item) sizeAt(f int, priced bool) (pruned bool, size int) {
	whole := it.tokens
	if priced {
		whole = it.priced
	}
	for i := len(it.changes) - 1; i >= 0; i-- {
		c := it.changes[i]
		if c.eff <= f {
			switch {
			case !c.pruned:
				return false, whole
			case c.span && priced:
				return true, max(c.placeholder+it.priced-it.tokens, 0)
			}
			return true, c.placeholder
		}
	}
	return false, whole
}

// request is one ModelRequest fact.
type request struct {
	fact     int
	id       string
	at       time.Time
	provider string
	model    string
	usage    *events.Usage
	tier     string // "5m" or "1h": the cache tier in force after it
	// runStart is the index (in Core.reqs) of the first request of the
	// warm run this one belongs to: the last request sent with nothing to
	// reuse (the first, or after a gap past the TTL or a host compaction).
	runStart int
}

// mark is one observed Mark event.
type mark struct {
	id    string
	seq   int // arrival order among marks
	at    time.Time
	m     *events.Mark
	index int // position in Core.marks
	// applied is set once an application put the mark into effect.
	applied bool
	// tgt is the item the mark removes once resolved for good (see
	// Core.markTarget), and ph its placeholder tokens (Core.placeholder):
	// both fixed from then on, so a Decide does not look them up again
	// for every mark of a long session.
	tgt *item
	ph  int
}

// Core is the scheduler core for one session. It is not safe for
// concurrent use. Its decisions are a deterministic function of the
// observed events, the policy and the arguments of Decide.
type Core struct {
	pol     policy.Policy
	tenant  string
	session string
	version string

	facts       int
	items       []*item
	byID        map[string]int
	reqs        []request
	compactions []int // fact indices of HostCompaction facts
	// recoveries are the results of the model's context_recover calls:
	// originals brought back, priced in the economics as recovery.
	recoveries []*item
	subtasks   []closedSubtask // SubtaskClosed facts, in order
	opened     map[string]int  // subtask id -> fact index of its SubtaskOpened
	provider   string
	model      string

	marks       []*mark
	markByID    map[string]*mark
	marksByItem map[string][]*mark
	appsSeen    map[string]bool
	// waiting holds applications whose marks were not observed yet:
	// mark id -> fact index the application took effect at.
	waiting map[string]int

	// flushes are the fact indexes of FlushRequest facts; flushServed the
	// fact index of the request that last served one.
	flushes     []int
	flushServed int
	reasons     map[string]waitReason // mark id -> why it waited at the last Decide
	apps        []appRecord

	// eff keeps effective's winners between calls (see effective).
	eff effCache
	// scratch holds Decide's working slices between calls, so a request
	// on a long session does not allocate them anew: nothing keeps them
	// past the call that filled them.
	scratch struct {
		cands, sent, mandatory []candidate
		off                    []int
	}

	// plan, when set (hindsight replays only), overrides the timing rules:
	// a PRUNE mark applies at the request whose index (among the session's
	// requests) plan gives, or later; a mark plan omits never applies.
	plan map[string]int
}

// appRecord keeps what the ledger reports about one application.
type appRecord struct {
	after int
	app   events.Application
	ev    events.Event // the envelope, for callers that render it
}

// New returns a core for one session under policy p. p is defaulted if it
// was not already.
func New(p policy.Policy, tenant, session string) *Core {
	p.SetDefaults()
	return &Core{
		pol: p, tenant: tenant, session: session, version: p.Version(),
		byID:        map[string]int{},
		markByID:    map[string]*mark{},
		marksByItem: map[string][]*mark{},
		appsSeen:    map[string]bool{},
		waiting:     map[string]int{},
		reasons:     map[string]waitReason{},
	}
}

// Observe feeds one session event. Facts must come in log order (their
// position among facts is counted here); marks and applications may arrive
// at any point after the facts they name. Events of other sessions and
// duplicates (same mark or application id) are ignored.
func (c *Core) Observe(ev events.Event) {
	if !c.owns(ev) {
		return
	}
	switch p := ev.Data.(type) {
	case *events.Mark:
		c.observeMark(ev, p)
		return
	case *events.Application:
		c.observeApplication(ev, p)
		return
	}
	if !ev.IsFact() {
		return
	}
	f := c.facts
	c.facts++
	switch p := ev.Data.(type) {
	case *events.SessionStarted:
		if p.Provider != "" {
			c.provider = p.Provider
		}
		if p.Model != "" {
			c.model = p.Model
		}
	case *events.Message:
		c.addItem(p.Item, f, p.Tokens, p.TokensExact, len(p.Text), "", false)
	case *events.ToolCall:
		c.addItem(p.Item, f, p.InputTokens, p.InputTokensExact, len(p.Input), p.CallID, false)
	case *events.ToolResult:
		tok, exact := resultTokens(p)
		c.addItem(p.Item, f, tok, exact, 0, p.CallID, true)
		if k, ok := agenttools.Match(p.Tool); ok && k == agenttools.Recover {
			if i, found := c.byID[p.Item]; found && c.items[i].fact == f {
				c.recoveries = append(c.recoveries, c.items[i])
			}
		}
	case *events.ModelRequest:
		c.observeRequest(ev, p, f)
	case *events.SubtaskOpened:
		if c.opened == nil {
			c.opened = map[string]int{}
		}
		if _, dup := c.opened[p.Subtask]; !dup {
			c.opened[p.Subtask] = f
		}
	case *events.SubtaskClosed:
		// Without a recorded opening the subtask's span is unknown: it
		// starts at the close, so nothing counts as inside it.
		lo, ok := c.opened[p.Subtask]
		if !ok {
			lo = f
		}
		c.subtasks = append(c.subtasks, closedSubtask{fact: f, opened: lo})
	case *events.HostCompaction:
		c.compactions = append(c.compactions, f)
	case *events.FlushRequest:
		c.flushes = append(c.flushes, f)
	case *events.Restore:
		if i, ok := c.byID[p.Item]; ok {
			it := c.items[i]
			it.changes = append(it.changes, change{eff: f + 1})
		}
	}
}

// owns reports whether ev belongs to the core's session (an event or a
// core without a session matches any).
func (c *Core) owns(ev events.Event) bool {
	return ev.Session == "" || c.session == "" || ev.Session == c.session
}

// resultTokens is a tool result's stored token count and the exact count
// beside it (0: none), or an estimate of len/4 for inline output (input
// form, tests) or an error-only result.
func resultTokens(p *events.ToolResult) (tokens, exact int) {
	switch {
	case p.OutputRef != nil:
		return p.OutputRef.Tokens, p.OutputRef.TokensExact
	case p.Output != nil:
		return events.EstimateTokens(len(*p.Output)), 0
	case p.Error != nil:
		return events.EstimateTokens(len(p.Error.Message)), 0
	}
	return 0, 0
}

func (c *Core) addItem(id string, f, tokens, exact, bytes int, callID string, result bool) {
	if _, dup := c.byID[id]; dup {
		return
	}
	if tokens == 0 && bytes > 0 {
		tokens = events.EstimateTokens(bytes)
	}
	c.byID[id] = len(c.items)
	c.items = append(c.items, &item{id: id, pos: len(c.items), fact: f, tokens: tokens, priced: events.PricedTokens(tokens, exact), callID: callID, result: result})
}

func (c *Core) observeRequest(ev events.Event, p *events.ModelRequest, f int) {
	prov, model := p.Provider, p.Model
	if prov == "" {
		prov = c.provider
	}
	if model == "" {
		model = c.model
	}
	c.provider, c.model = prov, model
	tier := ""
	if len(c.reqs) > 0 {
		tier = c.reqs[len(c.reqs)-1].tier
	}
	if t := tierOf(p); t != "" {
		tier = t
	}
	r := request{fact: f, id: p.Request, at: ev.Time, provider: prov, model: model, usage: p.Usage, tier: tier, runStart: len(c.reqs)}
	if n := len(c.reqs); n > 0 {
		last := c.reqs[n-1]
		if ev.Time.Sub(last.at) <= c.pricingFor(last.provider, last.model, last.tier).ttl() && c.lastCompactionBefore(f) < last.fact {
			r.runStart = last.runStart
		}
	}
	c.reqs = append(c.reqs, r)
}

// tierOf reads the cache tier a request used: the client's CacheTTL, else
// the usage report (any 1h write means the 1h tier; writes without 1h mean
// 5m); "" when the request says nothing.
func tierOf(p *events.ModelRequest) string {
	if p.CacheTTL != "" {
		return p.CacheTTL
	}
	if u := p.Usage; u != nil {
		if u.CacheWrite1hTokens > 0 {
			return "1h"
		}
		if u.CacheWriteTokens > 0 {
			return "5m"
		}
	}
	return ""
}

func (c *Core) observeMark(ev events.Event, p *events.Mark) {
	if _, dup := c.markByID[ev.ID]; dup {
		return
	}
	m := &mark{id: ev.ID, seq: len(c.marks), at: ev.Time, m: p, index: len(c.marks)}
	c.marks = append(c.marks, m)
	c.markByID[ev.ID] = m
	c.marksByItem[p.Item] = append(c.marksByItem[p.Item], m)
	if eff, ok := c.waiting[ev.ID]; ok {
		delete(c.waiting, ev.ID)
		c.applyMark(m, eff)
	}
}

func (c *Core) observeApplication(ev events.Event, p *events.Application) {
	if c.appsSeen[ev.ID] {
		return
	}
	c.appsSeen[ev.ID] = true
	for _, mid := range p.Marks {
		if m, ok := c.markByID[mid]; ok {
			c.applyMark(m, p.AfterIndex)
		} else {
			c.waiting[mid] = p.AfterIndex
		}
	}
	c.apps = append(c.apps, appRecord{after: p.AfterIndex, app: *p, ev: ev})
}

// applyMark puts one mark into effect from fact index eff on.
func (c *Core) applyMark(m *mark, eff int) {
	if m.applied {
		return
	}
	m.applied = true
	it, ph := c.markTarget(m)
	if it == nil {
		return
	}
	ch := change{eff: eff}
	if m.m.Decision == events.Prune {
		ch.pruned = true
		ch.placeholder = ph
		if m.m.Reason == events.ReasonSpanReference {
			ch.span = true
			if r := m.m.Recoverability; r != nil {
				ch.spanSurv = r.Survivor
			}
		}
	}
	// Keep changes ordered by eff (applications can be observed late).
	k := sort.Search(len(it.changes), func(i int) bool { return it.changes[i].eff > eff })
	it.changes = append(it.changes, change{})
	copy(it.changes[k+1:], it.changes[k:])
	it.changes[k] = ch
}

// resolve returns the item a mark removes. Mark.Item names the item; when
// Part is "input" and the named item is a tool result, the call's input
// item (events.CallInputItem) is meant. final says the answer cannot
// change (items are only added): it can while the mark names a result
// whose input was not seen yet.
func (c *Core) resolve(m *events.Mark) (it *item, final bool) {
	i, ok := c.byID[m.Item]
	if !ok {
		return nil, false
	}
	it = c.items[i]
	if m.Part == "input" && it.result {
		if j, ok := c.byID[events.CallInputItem(it.callID)]; ok {
			return c.items[j], true
		}
		return it, false
	}
	return it, true
}

// markTarget returns the item m removes (resolve) and its placeholder
// tokens (placeholder), kept on the mark once final.
func (c *Core) markTarget(m *mark) (*item, int) {
	if m.tgt != nil {
		return m.tgt, m.ph
	}
	it, final := c.resolve(m.m)
	if it == nil {
		return nil, 0
	}
	ph := c.placeholder(it, m.m)
	if final {
		m.tgt, m.ph = it, ph
	}
	return it, ph
}

// placeholder is the size of the placeholder left for it: the item's
// tokens minus the mark's net estimate (eligibility nets it with
// placeholder.Tokens) when the mark gives one, else placeholder.Tokens of
// what the scheduler knows of the item (never more than the item itself).
func (c *Core) placeholder(it *item, m *events.Mark) int {
	if m.TokensEstimated > 0 && m.TokensEstimated < it.tokens {
		return it.tokens - m.TokensEstimated
	}
	return min(PlaceholderEstimate(m, it.tokens), it.tokens)
}

// PlaceholderEstimate is placeholder.Tokens for a mark that carries no net
// estimate, from the mark alone: its part, rung and reason, the item's
// tokens as the count. Tests use it to state the figure they expect.
func PlaceholderEstimate(m *events.Mark, tokens int) int {
	return placeholder.Tokens(placeholder.Spec{Part: m.Part, Rung: m.Rung, Reason: m.Reason, Tokens: tokens, Item: placeholder.Handle(0)})
}

// Seen reports whether the core has observed (or decided) the
// application with id: a reader catching up with the log (a proxy of a
// fleet) skips the applications it holds already.
func (c *Core) Seen(id string) bool { return c.appsSeen[id] }
