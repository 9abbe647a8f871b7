package inspector

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// Decision classes of the context strip: what an item's latest decision
// makes of it now. One rule (classOf) assigns them; CSS colours them.
const (
	ClassKept        = "kept"
	ClassPruned      = "pruned"
	ClassDeferred    = "deferred"
	ClassAbstained   = "abstained"
	ClassProtected   = "protected"
	ClassHostRemoved = "host-removed"
)

// classes lists the decision classes in legend order.
var classes = []string{ClassKept, ClassPruned, ClassDeferred, ClassAbstained, ClassProtected, ClassHostRemoved}

// classOf is the strip's class of an item: host-removed when the host
// compacted or cleared it; pruned when our placeholder renders in its
// place; protected when pinned or kept under a protection reason;
// deferred when its latest mark is DEFER or a PRUNE the scheduler has not
// applied yet; abstained when it is ABSTAIN; kept otherwise (no mark, a
// plain KEEP, or a prune undone by a restore). d is the item's
// certificate, nil when it has none.
func classOf(it projections.Item, d *projections.Decision) string {
	switch {
	case it.HostCompacted || it.HostPruned:
		return ClassHostRemoved
	case it.Pruned:
		return ClassPruned
	case it.Pinned:
		return ClassProtected
	}
	m := it.LatestMark
	if m == nil {
		return ClassKept
	}
	switch m.Decision {
	case events.Defer:
		return ClassDeferred
	case events.Prune:
		if !m.Applied {
			return ClassDeferred
		}
	case events.Abstain:
		return ClassAbstained
	case events.Keep:
		if d != nil && len(d.Protection) > 0 {
			return ClassProtected
		}
	}
	return ClassKept
}

// listStrategies are the strategies every view prices sessions under; the
// session page adds hindsight (see HindsightMaxItems).
var listStrategies = []string{scheduler.StrategyNone, scheduler.StrategyImmediate, scheduler.StrategyScheduled}

// sessionStrategies is the order of the session page's economics.
var sessionStrategies = []string{scheduler.StrategyNone, scheduler.StrategyImmediate, scheduler.StrategyScheduled, scheduler.StrategyHindsight}

// summary is one session's row on the sessions page and its share of the
// fleet page.
type summary struct {
	ID, Agent, Title, Model string
	Start                   time.Time
	Requests                int
	RawTokens               int
	// Saved* are what the scheduled strategy saves over no pruning and
	// over immediate application: prompt tokens sent (summed over
	// requests) and prompt cost in USD. Negative means it costs more.
	SavedTokensNone, SavedTokensImmediate int
	SavedUSDNone, SavedUSDImmediate       float64
	// CostScheduled is the prompt cost under the scheduler.
	CostScheduled float64
	// Decided counts the latest marks; Abstained the ABSTAIN ones.
	Decided, Abstained int
	Pending            int
	Deferred           int
	Unpriced           bool
	// NotYetSaved says why a session with prunes shows no saving
	// (projections.NotYetSaved), "" otherwise.
	NotYetSaved string
	Stats       projections.Stats
	Ledgers     map[string]scheduler.Ledger
}

// AbstentionRate is Abstained / Decided (0 with no marks).
func (s summary) AbstentionRate() float64 {
	if s.Decided == 0 {
		return 0
	}
	return float64(s.Abstained) / float64(s.Decided)
}

// sessionMeta reads agent, title, model and start time from the log. A
// session without a title is named by the first line of its first user
// message (quoted from the log, projections.TitleLine).
func sessionMeta(evs []events.Event) (agent, title, model string, start time.Time) {
	first := ""
	for _, ev := range evs {
		if start.IsZero() || ev.Time.Before(start) {
			start = ev.Time
		}
		switch p := ev.Data.(type) {
		case *events.SessionStarted:
			agent = cmpOr(p.Agent, agent, p.Format)
			title = cmpOr(p.Title, title)
			model = cmpOr(p.Model, model)
		case *events.Message:
			if first == "" && p.Role == events.RoleUser && !p.Meta {
				first = projections.TitleLine(p.Text)
			}
		}
	}
	return agent, cmpOr(title, first), model, start
}

func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// summarize builds one session's summary from its view, log and ledgers.
func summarize(id string, v View, evs []events.Event, ledgers map[string]scheduler.Ledger) summary {
	s := summary{ID: id, Stats: v.Stats, Ledgers: ledgers, RawTokens: v.Stats.Tokens.Raw, Pending: v.Stats.Pending}
	s.Agent, s.Title, s.Model, s.Start = sessionMeta(evs)
	for _, n := range v.Stats.Decisions {
		s.Decided += n
	}
	s.Abstained = v.Stats.Decisions[events.Abstain]
	s.Deferred = v.Stats.Decisions[events.Defer] + v.Stats.Pending
	none, imm, sch := ledgers[scheduler.StrategyNone], ledgers[scheduler.StrategyImmediate], ledgers[scheduler.StrategyScheduled]
	s.Requests = len(sch.Requests)
	s.SavedTokensNone = none.Total.Tokens - sch.Total.Tokens
	s.SavedTokensImmediate = imm.Total.Tokens - sch.Total.Tokens
	s.SavedUSDNone = none.Total.Cost - sch.Total.Cost
	s.SavedUSDImmediate = imm.Total.Cost - sch.Total.Cost
	s.CostScheduled = sch.Total.Cost
	s.Unpriced = sch.Unpriced
	s.NotYetSaved = projections.NotYetSaved(v.Stats.Decisions[events.Prune], v.Stats.Applied, s.Requests)
	return s
}

// load reads one session through the source and prices it.
func (h *Handler) load(ctx context.Context, tenant, id string, strategies []string) (View, []events.Event, summary, error) {
	v, err := h.cfg.Source.View(ctx, tenant, id)
	if err != nil {
		return View{}, nil, summary{}, err
	}
	evs, err := h.cfg.Source.Log(ctx, tenant, id)
	if err != nil {
		return View{}, nil, summary{}, err
	}
	led := h.cfg.Source.Economics(evs, strategies...)
	return v, evs, summarize(id, v, evs, led), nil
}

// loadAll summarizes every session of the tenant, in session id order.
func (h *Handler) loadAll(ctx context.Context, tenant string) ([]summary, error) {
	ids, err := h.cfg.Source.Sessions(ctx, tenant)
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	out := make([]summary, 0, len(ids))
	for _, id := range ids {
		_, _, s, err := h.load(ctx, tenant, id, listStrategies)
		if err != nil {
			return nil, fmt.Errorf("session %s: %w", id, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// totals adds the summaries up (the tenant's row on the sessions page).
func totals(rows []summary) summary {
	t := summary{ID: "all sessions"}
	for _, r := range rows {
		t.Requests += r.Requests
		t.RawTokens += r.RawTokens
		t.SavedTokensNone += r.SavedTokensNone
		t.SavedTokensImmediate += r.SavedTokensImmediate
		t.SavedUSDNone += r.SavedUSDNone
		t.SavedUSDImmediate += r.SavedUSDImmediate
		t.CostScheduled += r.CostScheduled
		t.Decided += r.Decided
		t.Abstained += r.Abstained
		t.Pending += r.Pending
		t.Deferred += r.Deferred
		t.Unpriced = t.Unpriced || r.Unpriced
		if t.Start.IsZero() || (!r.Start.IsZero() && r.Start.Before(t.Start)) {
			t.Start = r.Start
		}
	}
	return t
}
