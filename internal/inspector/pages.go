package inspector

import (
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/placeholder"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"usd": usd,
	"pct": func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) },
	"num": func(n int) string { return groupDigits(n) },
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04")
	},
	"fixed": func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) },
	"add":   func(a, b int) int { return a + b },
	// The unit words (projections.Unit*): one meaning per number.
	"unitContextNow": func() string { return projections.UnitContextNow },
	"unitTokensSent": func() string { return projections.UnitTokensSent },
	"unitPromptCost": func() string { return projections.UnitPromptCost },
	// spanRanges reads a span's evidence value ("10-57=3-50@130") as
	// line ranges; ok is false when it is not one.
	"spanRanges": spanRanges,
	// short cuts a long session id to its first 13 characters for table
	// cells (the link and its title keep the whole id).
	"short": func(id string) string {
		if len(id) > 16 {
			return id[:13] + "…"
		}
		return id
	},
}

// groupDigits writes n with thin separators every three digits.
func groupDigits(n int) string {
	s := strconv.Itoa(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// base is what every page's layout needs.
type base struct {
	Title  string
	Tenant string
	// Query carries the tenant on links and API calls ("" or "?tenant=X").
	Query string
	Nav   string
	// SignedIn shows the log-out button (a login session's cookie).
	SignedIn bool
}

func (r request) base(title, nav string) base {
	return base{Title: title, Tenant: r.tenant, Query: r.query, Nav: nav, SignedIn: r.signedIn}
}

// sessionsPage lists the tenant's sessions with totals on top.
func (h *Handler) sessionsPage(w http.ResponseWriter, r request) error {
	rows, err := h.loadAll(r.Context(), r.tenant)
	if err != nil {
		return err
	}
	return h.render(w, "sessions.html", map[string]any{
		"Base": r.base("Sessions", "sessions"), "Rows": rows, "Total": totals(rows),
	})
}

// sessionPage is one session: strip, timeline, economics, pending.
func (h *Handler) sessionPage(w http.ResponseWriter, r request) error {
	id := r.PathValue("session")
	if !events.ValidToken(id) {
		return fmt.Errorf("session %q: use letters, digits, '_' or '-': %w", id, errBadRequest)
	}
	v, evs, sum, err := h.load(r.Context(), r.tenant, id, listStrategies)
	if err != nil {
		return err
	}
	// Hindsight searches up to hundreds of replays of the whole session:
	// seconds on a few thousand items, minutes on tens of thousands. Past
	// HindsightMaxItems it runs only when asked (?hindsight=1).
	hindsight := len(v.Items) <= HindsightMaxItems || r.URL.Query().Get("hindsight") == "1"
	if hindsight {
		for k, l := range h.cfg.Source.Economics(evs, scheduler.StrategyHindsight) {
			sum.Ledgers[k] = l
		}
	}
	sch := sum.Ledgers[scheduler.StrategyScheduled]
	reqIdx := requestIndex(sch)
	dec := decisionIndex(v.Decisions)
	t := timingOf(evs, reqIdx)
	st := buildStrip(v.Items, dec, t)
	steps := buildSteps(evs, sch, reqIdx)
	stepsJSON, err := json.Marshal(steps)
	if err != nil {
		return fmt.Errorf("session %s: timeline: %w", id, err)
	}
	var ss []series
	var tot []strategyTotal
	none := sum.Ledgers[scheduler.StrategyNone]
	for _, name := range sessionStrategies {
		l, ok := sum.Ledgers[name]
		if !ok {
			continue
		}
		s := series{Name: name, Colour: strategyColour[name]}
		for _, rc := range l.Requests {
			s.Values = append(s.Values, rc.Cost)
		}
		ss = append(ss, s)
		tot = append(tot, strategyTotal{
			Name: name, Colour: strategyColour[name], Tokens: l.Total.Tokens, Cost: l.Total.Cost,
			CacheRead: l.Total.CacheRead, CacheWrite: l.Total.CacheWrite, Applications: len(l.Applications),
			SavedUSD: none.Total.Cost - l.Total.Cost, SavedTokens: none.Total.Tokens - l.Total.Tokens,
		})
	}
	counts := map[string]int{}
	for _, b := range buildBlocks(v.Items, dec, t) {
		counts[b.Class]++
	}
	var legend []classCount
	for _, c := range classes {
		legend = append(legend, classCount{Class: c, Items: counts[c]})
	}
	return h.render(w, "session.html", map[string]any{
		"Base": r.base("Session "+id, "session"), "ID": id, "Sum": sum, "Stats": v.Stats,
		"Strip": st, "Legend": legend, "Steps": template.JS(stepsJSON), "Requests": len(steps),
		"Chart": lineChart(ss, "request", "prompt cost"), "Totals": tot,
		"Pending": pendingRows(v), "Head": sch.Head, "Provider": sch.Provider,
		"HindsightSkipped": !hindsight, "HindsightMax": HindsightMaxItems,
	})
}

// HindsightMaxItems is the largest session whose page prices the
// hindsight strategy unasked (its search costs grow faster than the
// session: about 2 s at 2,000 items and 14 s at 5,000 here).
const HindsightMaxItems = 2000

// strategyTotal is one row of the session's economics table.
type strategyTotal struct {
	Name, Colour                  string
	Tokens, CacheRead, CacheWrite int
	Cost, SavedUSD                float64
	SavedTokens, Applications     int
}

// classCount is one legend entry.
type classCount struct {
	Class string
	Items int
}

// itemFragment is the certificate panel of one item (HTML fragment).
func (h *Handler) itemFragment(w http.ResponseWriter, r request) error {
	id, item := r.PathValue("session"), r.PathValue("item")
	v, err := h.cfg.Source.View(r.Context(), r.tenant, id)
	if err != nil {
		return err
	}
	var it *projections.Item
	for i := range v.Items {
		if v.Items[i].ID == item {
			it = &v.Items[i]
			break
		}
	}
	if it == nil {
		return fmt.Errorf("item %s in session %s: %w", item, id, ErrNotFound)
	}
	d := decisionIndex(v.Decisions)[item]
	var pend *scheduler.PendingMark
	for i := range v.Pending {
		if v.Pending[i].Item == item {
			pend = &v.Pending[i]
		}
	}
	data := map[string]any{
		"Base": r.base("Item "+item, ""), "Session": id, "Item": it, "D": d,
		"Class": classOf(*it, d), "Pending": pend,
	}
	if d != nil {
		data["ControlText"] = controlText(d.Control)
		if info, ok := d.Reason.Info(); ok {
			data["ReasonText"] = info.Description
		}
		var prot []string
		for _, p := range d.Protection {
			if info, ok := p.Info(); ok {
				prot = append(prot, string(p)+": "+info.Description)
			} else {
				prot = append(prot, string(p))
			}
		}
		data["Protection"] = prot
	}
	return h.render(w, "item.html", data)
}

// stripFragment draws items [from, to] of an aggregated strip one block
// per item (at most MaxBlocks).
func (h *Handler) stripFragment(w http.ResponseWriter, r request) error {
	id := r.PathValue("session")
	from, err1 := strconv.Atoi(r.URL.Query().Get("from"))
	to, err2 := strconv.Atoi(r.URL.Query().Get("to"))
	if err1 != nil || err2 != nil || from < 0 || to < from {
		return fmt.Errorf("strip: query from and to must be item indices, from <= to: %w", errBadRequest)
	}
	// The request ids and their order are the same in every ledger; the
	// unpruned replay is the cheapest to get them from.
	v, evs, sum, err := h.load(r.Context(), r.tenant, id, []string{scheduler.StrategyNone})
	if err != nil {
		return err
	}
	to = min(to, len(v.Items)-1, from+MaxBlocks-1)
	if from > to {
		return fmt.Errorf("strip: items %d-%d: %w", from, to, ErrNotFound)
	}
	t := timingOf(evs, requestIndex(sum.Ledgers[scheduler.StrategyNone]))
	st := buildStrip(v.Items[from:to+1], decisionIndex(v.Decisions), t)
	return h.render(w, "strip.html", map[string]any{"Strip": st, "From": from, "To": to})
}

// fleetPage is the tenant's totals across sessions and over time.
func (h *Handler) fleetPage(w http.ResponseWriter, r request) error {
	rows, err := h.loadAll(r.Context(), r.tenant)
	if err != nil {
		return err
	}
	tot := totals(rows)
	rungs := map[string]int{}
	decisions := map[events.Decision]int{}
	type day struct{ none, imm, sch float64 }
	days := map[string]*day{}
	for _, s := range rows {
		for k, n := range s.Stats.Rungs {
			rungs[k] += n
		}
		for k, n := range s.Stats.Decisions {
			decisions[k] += n
		}
		for name, l := range s.Ledgers {
			for _, rc := range l.Requests {
				k := rc.Time.UTC().Format("2006-01-02")
				d := days[k]
				if d == nil {
					d = &day{}
					days[k] = d
				}
				switch name {
				case scheduler.StrategyNone:
					d.none += rc.Cost
				case scheduler.StrategyImmediate:
					d.imm += rc.Cost
				case scheduler.StrategyScheduled:
					d.sch += rc.Cost
				}
			}
		}
	}
	rungNames := slices.Sorted(maps.Keys(rungs))
	rs := series{Name: "prunes", Colour: "#2a7ab8"}
	for _, k := range rungNames {
		rs.Values = append(rs.Values, float64(rungs[k]))
	}
	dayNames := slices.Sorted(maps.Keys(days))
	costs := []series{{Name: "none", Colour: strategyColour["none"]}, {Name: "immediate", Colour: strategyColour["immediate"]}, {Name: "scheduled", Colour: strategyColour["scheduled"]}}
	savings := series{Name: "saved vs none", Colour: strategyColour["hindsight"]}
	for _, k := range dayNames {
		d := days[k]
		costs[0].Values = append(costs[0].Values, d.none)
		costs[1].Values = append(costs[1].Values, d.imm)
		costs[2].Values = append(costs[2].Values, d.sch)
		savings.Values = append(savings.Values, max(0, d.none-d.sch))
	}
	sessLabels := make([]string, len(rows))
	sessSaved := series{Name: "saved vs none", Colour: strategyColour["hindsight"]}
	sessCost := series{Name: "scheduled cost", Colour: strategyColour["scheduled"]}
	for i, s := range rows {
		sessLabels[i] = strconv.Itoa(i + 1)
		sessCost.Values = append(sessCost.Values, s.CostScheduled)
		sessSaved.Values = append(sessSaved.Values, max(0, s.SavedUSDNone))
	}
	var decs []classCount
	for _, d := range events.Decisions {
		decs = append(decs, classCount{Class: string(d), Items: decisions[d]})
	}
	var rungRows []classCount
	for _, k := range rungNames {
		rungRows = append(rungRows, classCount{Class: k, Items: rungs[k]})
	}
	return h.render(w, "fleet.html", map[string]any{
		"Base": r.base("Fleet", "fleet"), "Rows": rows, "Total": tot, "Decisions": decs, "Rungs": rungRows,
		"RungChart":    barChart(rungNames, []series{rs}, false),
		"CostChart":    barChart(dayNames, costs, true),
		"SavingsChart": barChart(dayNames, []series{savings}, true),
		"SessionChart": barChart(sessLabels, []series{sessCost, sessSaved}, true),
		"Days":         len(dayNames),
	})
}

// controlText says what a control mode (events.Control) means, under the
// badge of the item panel.
func controlText(mode string) string {
	switch mode {
	case events.ControlRule:
		return "the evidence ladder decided, automatically"
	case events.ControlAgent:
		return "the model asked (context_prune); judged with every protection, refused with the protection's reason"
	case events.ControlPerson:
		return "a person decided: a manual prune, pin or restore"
	}
	return ""
}

// pendingRow is one row of the session page's pending marks: the pending
// mark and the control mode of its certificate ("" when the mark is no
// longer an item's latest).
type pendingRow struct {
	scheduler.PendingMark
	Control string
	// Tool and Source name the item (its certificate's).
	Tool, Source string
}

// pendingRows pairs each pending mark with its certificate's control mode
// and the item's tool and source.
func pendingRows(v View) []pendingRow {
	byMark := make(map[string]*projections.Decision, len(v.Decisions))
	for i := range v.Decisions {
		byMark[v.Decisions[i].Mark] = &v.Decisions[i]
	}
	out := make([]pendingRow, len(v.Pending))
	for i, p := range v.Pending {
		out[i] = pendingRow{PendingMark: p}
		if d := byMark[p.Mark]; d != nil {
			out[i].Control, out[i].Tool, out[i].Source = d.Control, d.Tool, d.Source
		}
	}
	return out
}

// spanLines is a span reference's evidence as people read it: lines
// From-To of this item are lines SrcFrom-SrcTo of the item it points to
// (renumbered from Renumb when set).
type spanLines struct {
	OK                               bool
	From, To, SrcFrom, SrcTo, Renumb int
}

// spanRanges decodes the evidence value of a span reference
// (placeholder.SpanRanges' format).
func spanRanges(v string) spanLines {
	var sp placeholder.Span
	if err := placeholder.ParseSpanRanges(v, &sp); err != nil {
		return spanLines{}
	}
	return spanLines{OK: true, From: sp.From, To: sp.To, SrcFrom: sp.SrcFrom, SrcTo: sp.SrcTo, Renumb: sp.Renumbered}
}
