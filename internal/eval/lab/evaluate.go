package lab

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/eval/lab/fixtures"
	"github.com/prunesched/prunesched/internal/eval/lab/peers"
	"github.com/prunesched/prunesched/internal/eval/lateruse"
	"github.com/prunesched/prunesched/placeholder"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// Providers priced in every run.
var providers = []string{"anthropic", "openai"}

// sessionRun is one session under one condition: raw counts, aggregated
// later in session order.
type sessionRun struct {
	red      redCounts
	pres     presCounts
	beh      map[string]behCounts                   // strategy -> probe outcomes
	ledgers  map[string]map[string]scheduler.Ledger // provider -> strategy -> ledger
	prodSame bool                                   // production run's applications equal the replay's
	lu       luCounts                               // the later-use signal against the labels
	// recovery is what the recoveries of the row's own timing add, per
	// provider (scheduler.PriceRecoveries).
	recovery map[string]scheduler.RecoveryCost
	agent    agentCounts // the agent's removal requests and their verdicts
}

// agentCounts are the agent's removal requests (events.PruneRequest by
// events.ByAgent) and eligibility's verdicts on them: the mark each
// request caused on its item.
type agentCounts struct {
	asked, accepted int
	refused         map[string]int // by reason (the protection)
}

// luCounts scores the later-use signal (lateruse) against the fixture
// labels over the items removed under the row's own timing: a positive is
// a removed item labelled needed or trap (a false prune), a negative one
// labelled safe (proven redundant); a later-used item labelled keep
// (nothing proves it either way) is undetermined.
type luCounts struct {
	removed, laterUsed, tp, fp, fn, undetermined int
}

type count struct {
	Items  int `json:"items"`
	Tokens int `json:"tokens"`
}

type redCounts struct {
	removed, placeholder, items, marked int
	byClass, byCategory, byReason       map[string]count
}

type presCounts struct {
	prunes, safe, falsePr, unproven, traps int
	// falseUnrecoverable are the false prunes one recovery cannot undo:
	// the row's placeholder names no original (a peer's), or the log does
	// not hold it.
	falseUnrecoverable       int
	safeWorth, safePruned    int
	critical, criticalIntact int
	refs, refsOK             int
	falseItems               []string
}

type behCounts struct {
	probes, passed, recoverable int
	byKind                      map[string][3]int // probes, passed, recoverable
	// recs are the recoveries that answer the recoverable probes: one per
	// removed item, at the first probe that needs it (it then stays in
	// context to the end of the session).
	recs []scheduler.Recovery
}

// strategiesOf are the strategies a condition is run under.
func strategiesOf(c condition) []string {
	if c.primary == StrategyNone {
		return []string{StrategyNone}
	}
	return []string{StrategyImmediate, StrategyScheduled}
}

// evaluate runs one condition on one session.
func evaluate(ctx context.Context, c condition, fx *fixtures.Fixture, s *fixtures.Session, tc events.TokenCounter) (*sessionRun, error) {
	if c.script != nil {
		g, err := c.script(s)
		if err != nil {
			return nil, fmt.Errorf("condition %s session %s: %w", c.name, s.ID, err)
		}
		s = g
	}
	facts := s.Events
	base := policy.Default()
	if c.pol != nil {
		base = *c.pol
	}
	var marks, prodApps []events.Event
	switch {
	case c.pol != nil:
		marks, prodApps = runProduction(base, facts, fx.Blobs)
	case c.marks != nil:
		marks = c.marks(s)
	}
	r := &sessionRun{beh: map[string]behCounts{}, ledgers: map[string]map[string]scheduler.Ledger{}}
	appsBy := map[string][]events.Event{}
	for _, prov := range providers {
		p := base
		p.Scheduler.DefaultProvider = prov
		r.ledgers[prov] = map[string]scheduler.Ledger{}
		for _, st := range strategiesOf(c) {
			apps, l := replay(p, facts, marks, st)
			r.ledgers[prov][st] = l
			if prov == providers[0] {
				appsBy[st] = apps
			}
		}
	}
	if c.pol != nil {
		r.prodSame = sameIDs(prodApps, appsBy[StrategyScheduled])
		appsBy[StrategyScheduled] = prodApps
	}
	pruned := map[string]bool{}
	var finalPrimary *projections.Session
	for _, st := range strategiesOf(c) {
		b, final, err := behaviour(ctx, fx, s, facts, marks, appsBy[st], tc, !c.foreignPlaceholder, nil)
		if err != nil {
			return nil, fmt.Errorf("condition %s session %s strategy %s: %w", c.name, s.ID, st, err)
		}
		r.beh[st] = b
		for _, it := range final.Items() {
			if it.Pruned && (it.Applied == nil || it.Applied.Reason != events.ReasonSpanReference) {
				pruned[it.ID] = true
			}
		}
		if st == c.primary {
			finalPrimary = final
			if err := reduction(ctx, fx, s, final, tc, !c.foreignPlaceholder, &r.red, &r.pres); err != nil {
				return nil, fmt.Errorf("condition %s session %s: %w", c.name, s.ID, err)
			}
		}
	}
	for _, it := range latestPrunes(marks) {
		pruned[it] = true
	}
	r.red.marked = preservation(s, pruned, &r.pres)
	r.agent = agentVerdicts(facts, marks)
	r.pres.falseUnrecoverable = unrecoverable(s, pruned, finalPrimary, !c.foreignPlaceholder)
	if recs := r.beh[c.primary].recs; len(recs) > 0 {
		r.recovery = map[string]scheduler.RecoveryCost{}
		for _, prov := range providers {
			p := base
			p.Scheduler.DefaultProvider = prov
			l := r.ledgers[prov][c.primary]
			rc, err := scheduler.PriceRecoveries(p, events.MergeLog(facts, marks, l.ApplicationEvents), l.Head, recs, scheduler.RecoveryAnswerTokens)
			if err != nil {
				return nil, fmt.Errorf("condition %s session %s: %w", c.name, s.ID, err)
			}
			r.recovery[prov] = rc
		}
	}
	if c.primary != StrategyNone {
		rs, err := lateruse.Evaluate(ctx, facts, marks, appsBy[c.primary], fx.Blobs)
		if err != nil {
			return nil, fmt.Errorf("condition %s session %s: %w", c.name, s.ID, err)
		}
		r.lu = scoreLaterUse(s, rs)
	}
	return r, nil
}

// scoreLaterUse compares the later-use verdicts with the labels (copy
// roles settled by what was removed, as preservation does).
func scoreLaterUse(s *fixtures.Session, rs []lateruse.Removal) luCounts {
	used := map[string]bool{}
	removed := map[string]bool{}
	for _, r := range rs {
		if r.Partial {
			continue // a span reference: its runs are still rendered elsewhere
		}
		removed[r.Item] = true
		used[r.Item] = used[r.Item] || r.LaterUsed
	}
	labels := copyRoles(s.Labels, removed)
	var lu luCounts
	for id := range removed {
		lu.removed++
		l := labels[id]
		truth := l.Class == fixtures.Needed || l.Class == fixtures.Trap
		switch {
		case used[id] && truth:
			lu.tp++
		case used[id] && l.Class == fixtures.Safe:
			lu.fp++
		case used[id]:
			lu.undetermined++ // labelled keep: nothing proves it needed or safe
		case truth:
			lu.fn++
		}
		if used[id] {
			lu.laterUsed++
		}
	}
	return lu
}

func sameIDs(a, b []events.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID {
			return false
		}
	}
	return true
}

// markTarget is the item a mark removes.
func markTarget(m *events.Mark) string {
	if m.Part == "input" && !strings.HasSuffix(m.Item, "/input") {
		return events.CallInputItem(m.Item)
	}
	return m.Item
}

// latestPrunes returns the items whose latest mark is a PRUNE that
// removes the item (span references do not: see behaviour).
func latestPrunes(marks []events.Event) []string {
	last := map[string]events.Decision{}
	var order []string
	for _, ev := range marks {
		m := ev.Data.(*events.Mark)
		t := markTarget(m)
		if _, ok := last[t]; !ok {
			order = append(order, t)
		}
		last[t] = m.Decision
		if m.Reason == events.ReasonSpanReference {
			last[t] = events.Keep
		}
	}
	var out []string
	for _, t := range order {
		if last[t] == events.Prune {
			out = append(out, t)
		}
	}
	return out
}

// Evidence behind a span reference (L1
// span, reason SPAN_REFERENCE). A span reference removes no item: it
// renders a read's repeated runs as references to the same lines of an
// earlier read, which projections renders only while that earlier read is
// itself rendered as it was (otherwise the read is rendered whole). So a
// probe's evidence inside a referenced run is present iff the earlier copy
// is still rendered, which is exactly what the verbatim search of the
// rendered text below finds: the reference line itself never counts. For
// preservation a span-referenced item is not a pruned item (its content is
// still in front of the model); its tokens count in reduction (removed,
// with the rendered partial read as its placeholder).
//
// behaviour replays the merged log into the production projection and, at
// each probe's request, renders the bundle as text and looks for the
// probe's evidence verbatim. Evidence that is absent but whose holder is
// rendered as a placeholder (which names how to recover it) counts as
// recoverable, unless ownPlaceholder is false (a peer whose own placeholder
// names no original). visit, when set, is called at each probe with the
// bundle rendered for its request and the outcome. It returns the
// outcomes and the final projection.
func behaviour(ctx context.Context, fx *fixtures.Fixture, s *fixtures.Session, facts, marks, apps []events.Event, tc events.TokenCounter, ownPlaceholder bool, visit func(p fixtures.Probe, b projections.Bundle, present, recoverable bool) error) (behCounts, *projections.Session, error) {
	b := behCounts{byKind: map[string][3]int{}}
	probesAt := map[int][]fixtures.Probe{}
	for _, p := range s.Probes {
		probesAt[p.Fact] = append(probesAt[p.Fact], p)
	}
	sess := projections.NewSession(facts[0].Tenant, facts[0].Session)
	recovered := map[string]bool{}
	fi := 0
	for _, ev := range events.MergeLog(facts, marks, apps) {
		if ev.IsFact() {
			if ps := probesAt[fi]; len(ps) > 0 {
				bundle := sess.Bundle()
				text, err := projections.RenderText(ctx, bundle, fx.Blobs, tc)
				if err != nil {
					return b, nil, fmt.Errorf("render at %s: %w", ev.ID, err)
				}
				for _, p := range ps {
					k := b.byKind[p.Kind]
					b.probes++
					k[0]++
					present, item := strings.Contains(string(text), p.Evidence), ""
					if !present && ownPlaceholder {
						item = recoverable(bundle, p, recovered)
					}
					if visit != nil {
						if err := visit(p, bundle, present, item != ""); err != nil {
							return b, nil, err
						}
					}
					if present {
						b.passed++
						k[1]++
					} else if item != "" {
						b.recoverable++
						k[2]++
						if !recovered[item] {
							recovered[item] = true
							b.recs = append(b.recs, scheduler.Recovery{Item: item, Fact: fi + 1})
						}
					}
					b.byKind[p.Kind] = k
				}
			}
			fi++
		}
		sess.Observe(ev)
	}
	return b, sess, nil
}

// recoverable returns an item that held the probe's evidence and is
// rendered as our placeholder, which names the item and how to recover it
// ("" when none): one already recovered (in recovered) when there is one,
// else the first of the probe's holders. One recovery of it answers the
// probe: the answer to the probe's request fetches it (context_recover),
// and it comes back byte for byte.
func recoverable(b projections.Bundle, p fixtures.Probe, recovered map[string]bool) string {
	first := ""
	for _, id := range p.Items {
		for _, bi := range b.Items {
			if bi.ID != id || !bi.Pruned || !placeholder.NamesRecovery(bi.Placeholder, bi.Index) {
				continue
			}
			if recovered[id] {
				return id
			}
			if first == "" {
				first = id
			}
		}
	}
	return first
}

// agentVerdicts counts the agent's removal requests among facts and the
// verdict eligibility gave each: the mark on the requested item caused by
// the request (PRUNE: accepted; otherwise refused, by its reason).
func agentVerdicts(facts, marks []events.Event) agentCounts {
	asked := map[string]string{} // request event id -> item
	var a agentCounts
	for _, ev := range facts {
		if p, ok := ev.Data.(*events.PruneRequest); ok && p.By == events.ByAgent {
			asked[ev.ID] = p.Item
			a.asked++
		}
	}
	if a.asked == 0 {
		return a
	}
	a.refused = map[string]int{}
	for _, ev := range marks {
		m := ev.Data.(*events.Mark)
		if item, ok := asked[m.Cause]; !ok || markTarget(m) != item {
			continue
		}
		delete(asked, m.Cause)
		if m.Decision == events.Prune {
			a.accepted++
		} else {
			a.refused[string(m.Reason)]++
		}
	}
	if len(asked) > 0 {
		a.refused["NO_VERDICT"] += len(asked)
	}
	return a
}

// unrecoverable counts the false prunes (items decided PRUNE that the
// labels call needed or trap) that one recovery cannot undo: every one
// when the row's own placeholder names no original (ownPlaceholder false),
// else those the final bundle renders as a placeholder that does not name
// their handle. A false prune never applied is still in context.
func unrecoverable(s *fixtures.Session, pruned map[string]bool, final *projections.Session, ownPlaceholder bool) int {
	labels := copyRoles(s.Labels, pruned)
	isFalse := func(id string) bool {
		c := labels[id].Class
		return pruned[id] && (c == fixtures.Needed || c == fixtures.Trap)
	}
	if !ownPlaceholder {
		n := 0
		for id := range pruned {
			if isFalse(id) {
				n++
			}
		}
		return n
	}
	if final == nil {
		return 0
	}
	n := 0
	for _, bi := range final.Bundle().Items {
		if bi.Pruned && isFalse(bi.ID) && !placeholder.NamesRecovery(bi.Placeholder, bi.Index) {
			n++
		}
	}
	return n
}

// reduction measures the final bundle: what was removed (stored counts),
// the placeholders that replaced it, by class, category and reason, and
// whether every placeholder's recover reference resolves (never, for a
// peer whose own placeholder names no original).
func reduction(ctx context.Context, fx *fixtures.Fixture, s *fixtures.Session, final *projections.Session, tc events.TokenCounter, ownPlaceholder bool, red *redCounts, pres *presCounts) error {
	st, err := final.Stats(ctx, fx.Blobs, tc)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	red.removed, red.placeholder, red.items = st.Tokens.Removed, st.Tokens.Placeholder, st.PrunedItems
	red.byClass, red.byCategory, red.byReason = map[string]count{}, map[string]count{}, map[string]count{}
	texts, err := fx.ItemTexts(s)
	if err != nil {
		return err
	}
	bundle := final.Bundle()
	removed := map[string]bool{}
	for _, bi := range bundle.Items {
		if bi.Pruned {
			removed[bi.ID] = true
		}
	}
	labels := copyRoles(s.Labels, removed)
	for _, bi := range bundle.Items {
		if !bi.Pruned {
			continue
		}
		l := labels[bi.ID]
		add := func(m map[string]count, k string) {
			c := m[k]
			c.Items++
			c.Tokens += bi.PricedTokens()
			m[k] = c
		}
		add(red.byClass, string(l.Class))
		add(red.byCategory, l.Category)
		if bi.Applied != nil {
			add(red.byReason, strings.TrimSpace(string(bi.Applied.Rung)+" "+string(bi.Applied.Reason)))
		}
		pres.refs++
		_, inLog := texts[bi.ID]
		if ownPlaceholder && inLog && (placeholder.NamesRecovery(bi.Placeholder, bi.Index) || spanRefsOK(bundle, bi)) {
			pres.refsOK++
		}
	}
	return nil
}

// spanRefsOK reports whether an item rendered with span references names,
// in each, an earlier item of the bundle that is rendered whole (the item
// itself is recovered by its own handle like any pruned item).
func spanRefsOK(b projections.Bundle, bi projections.BundleItem) bool {
	if len(bi.Spans) == 0 {
		return false
	}
	for _, sp := range bi.Spans {
		i, ok := placeholder.ParseHandle(sp.Item)
		if !ok {
			return false
		}
		found := false
		for _, o := range b.Items {
			found = found || o.Index == i && !o.Pruned && !o.HostPruned
		}
		if !found {
			return false
		}
	}
	return true
}

// preservation scores the decided prunes against the fixture labels and
// returns their stored tokens.
func preservation(s *fixtures.Session, pruned map[string]bool, pres *presCounts) int {
	ids := make([]string, 0, len(pruned))
	for id := range pruned {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	labels := copyRoles(s.Labels, pruned)
	tokens := 0
	for _, id := range ids {
		l := labels[id]
		tokens += l.Tokens
		pres.prunes++
		switch l.Class {
		case fixtures.Safe:
			pres.safe++
			if l.Tokens > peers.PlaceholderTokens {
				pres.safePruned++
			}
		case fixtures.Needed, fixtures.Trap:
			pres.falsePr++
			if l.Class == fixtures.Trap {
				pres.traps++
			}
			pres.falseItems = append(pres.falseItems, fmt.Sprintf("%s %s (%s)", s.ID, id, l.Category))
		default:
			pres.unproven++
		}
	}
	for id, l := range labels {
		switch l.Class {
		case fixtures.Safe:
			if l.Tokens > peers.PlaceholderTokens {
				pres.safeWorth++
			}
		case fixtures.Needed, fixtures.Trap:
			pres.critical++
			if !pruned[id] {
				pres.criticalIntact++
			}
		}
	}
	return tokens
}

// copyRoles returns the labels with the roles of interchangeable copies
// settled by what was pruned. The fixtures label each of a run of copies
// (L0 byte duplicates, L1 observations of one source version) safe with the
// next copy as its survivor, the last copy carrying the run's own label
// (needed, trap or keep): the labels assume the newest copy stays. Which
// copy stays is a policy choice (eligibility.keep_copy), not a fact about
// the content, so when the last copy was pruned and an earlier copy of its
// run was not, the two trade labels: the earliest unpruned copy carries the
// run's label and the last copy is the safe one. Without such a run the
// labels are returned as they are.
func copyRoles(labels map[string]fixtures.Label, pruned map[string]bool) map[string]fixtures.Label {
	isCopy := func(l fixtures.Label) bool {
		return l.Class == fixtures.Safe && (l.Rung == fixtures.RungL0 || l.Rung == fixtures.RungL1) && l.Survivor != ""
	}
	// runs: last copy -> the copies before it.
	runs := map[string][]string{}
	for id, l := range labels {
		if !isCopy(l) {
			continue
		}
		end := l.Survivor
		for hops := 0; hops < len(labels); hops++ {
			next, ok := labels[end]
			if !ok || !isCopy(next) {
				break
			}
			end = next.Survivor
		}
		runs[end] = append(runs[end], id)
	}
	var out map[string]fixtures.Label
	for end, members := range runs {
		if !pruned[end] {
			continue
		}
		sort.Strings(members)
		keep := ""
		for _, id := range members {
			if !pruned[id] && (keep == "" || labels[id].SafeFrom < labels[keep].SafeFrom) {
				keep = id
			}
		}
		if keep == "" {
			continue
		}
		if out == nil {
			out = make(map[string]fixtures.Label, len(labels))
			for k, v := range labels {
				out[k] = v
			}
		}
		a, b := labels[end], labels[keep]
		a.Item, a.Tokens = keep, b.Tokens
		b.Item, b.Survivor, b.Tokens = end, keep, labels[end].Tokens
		out[keep], out[end] = a, b
	}
	if out == nil {
		return labels
	}
	return out
}
