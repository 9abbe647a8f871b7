package scheduler

import (
	"time"

	"github.com/prunesched/prunesched/events"
)

// candidate is a mark that would change the bundle if applied now.
type candidate struct {
	mk    *mark
	it    *item
	pos   int  // index of the item in c.items
	prune bool // PRUNE (else a KEEP that restores a pruned item)
	// net is the tokens removed net of the placeholder (negative for a
	// restore); ph the placeholder tokens added (negative for a restore).
	net, ph int
	sent    bool // rendered in the bundle of the previous request
	offset  int  // token offset in that bundle when sent
	// boundary is true for an item inside a subtask that closed since the
	// previous request: it applies at this request (subtask_boundary).
	boundary bool
	// deps are the restores of span references that name this prune's
	// item (see candidates): they apply with it, and net counts them.
	deps []candidate
}

// PendingMark is a mark waiting to be applied.
type PendingMark struct {
	// Mark is the mark event id; Item the item it names.
	Mark     string          `json:"mark"`
	Item     string          `json:"item"`
	Decision events.Decision `json:"decision"`
	// Since is the mark event's time.
	Since time.Time `json:"since"`
	// Reason says why it waits, e.g. "cache warm: break 0.41 USD > saving
	// 0.12 USD over 3 requests".
	Reason string `json:"reason"`
}

// ReasonAwaiting is the reason of a pending mark no Decide has judged yet.
const ReasonAwaiting = "awaiting the next request"

// effCache holds the winners of effective for one fact index, so the next
// call merges only the marks it has not considered. The winner of an item
// is the maximum of its eligible marks under (CauseIndex, seq), an order
// that does not depend on the order marks are merged in, so merging later
// is exact. Marks are append-only; a call for an earlier fact index
// rebuilds from scratch.
type effCache struct {
	f      int
	merged int              // c.marks[:merged] were considered
	best   map[string]*mark // item -> winner among marks with CauseIndex < f
	later  []*mark          // considered marks with CauseIndex >= f
}

// effectiveMap returns the winners by item at fact index f. The map is the
// core's cache: callers must not modify it or keep it past the next call.
func (c *Core) effectiveMap(f int) map[string]*mark {
	e := &c.eff
	if e.best == nil || f < e.f {
		*e = effCache{f: f, best: map[string]*mark{}}
	}
	e.f = f
	merge := func(m *mark) {
		b, ok := e.best[m.m.Item]
		if !ok || m.m.CauseIndex > b.m.CauseIndex || (m.m.CauseIndex == b.m.CauseIndex && m.seq > b.seq) {
			e.best[m.m.Item] = m
		}
	}
	kept := e.later[:0]
	for _, m := range e.later {
		if m.m.CauseIndex < f {
			merge(m)
		} else {
			kept = append(kept, m)
		}
	}
	e.later = kept
	for _, m := range c.marks[e.merged:] {
		if m.m.CauseIndex < f {
			merge(m)
		} else {
			e.later = append(e.later, m)
		}
	}
	e.merged = len(c.marks)
	return e.best
}

// candidates returns the marks that would change the bundle rendered at f,
// in render order of their items, in a slice the next call reuses. DEFER
// and ABSTAIN marks apply nothing: as the latest mark of an item they
// cancel a pending PRUNE, but they do not undo an applied one (only a KEEP
// or a Restore fact does).
func (c *Core) candidates(f int) []candidate {
	s := c.spanAt(f)
	out := c.scratch.cands[:0]
	var held []candidate
	// Map order is fine: out is sorted by (position, seq) below, a total
	// order (an item has one winner).
	for _, m := range c.effectiveMap(f) {
		if m.applied {
			continue
		}
		d := m.m.Decision
		if d != events.Prune && d != events.Keep {
			continue
		}
		it, ph := c.markTarget(m)
		if it == nil {
			continue
		}
		pos := it.pos
		if pos < s.lo || pos >= s.hi {
			continue
		}
		pruned, size := it.stateAt(f)
		switch {
		case d == events.Prune && !pruned:
			out = append(out, candidate{mk: m, it: it, pos: pos, prune: true, net: it.tokens - ph, ph: ph})
		case d == events.Prune && pruned && spanned(it, f) != (m.m.Reason == events.ReasonSpanReference):
			// From a span reference to a whole removal (a rung proved more
			// since), priced like any prune of what is rendered now; or
			// from a whole removal back to a span reference (the whole
			// removal's proof fell away), a partial restore that applies
			// at once like any restore. A span reference replaced by
			// another stays as applied: the projection renders the item
			// whole when the lines it names are gone.
			out = append(out, candidate{mk: m, it: it, pos: pos, prune: ph < size, net: size - ph, ph: ph})
		case d == events.Keep && pruned:
			cd := candidate{mk: m, it: it, pos: pos, net: size - it.tokens, ph: -size}
			if sp, surv := it.spanAt(f); sp {
				if j, ok := c.byID[surv]; ok {
					if sv := c.items[j]; !sv.pruned(f) {
						// A span reference refused because the item it
						// names is marked for removal: its lines are still
						// rendered, so the reference holds until that
						// removal applies, and then goes with it.
						held = append(held, cd)
						continue
					}
				}
			}
			out = append(out, cd)
		}
	}
	if len(held) > 0 {
		at := make(map[string]int, len(out))
		for i := range out {
			if out[i].prune {
				at[out[i].it.id] = i
			}
		}
		for _, cd := range held {
			_, surv := cd.it.spanAt(f)
			if i, ok := at[surv]; ok {
				out[i].deps = append(out[i].deps, cd)
				out[i].net += cd.net
			}
		}
	}
	sortByPos(out)
	c.scratch.cands = out
	return out
}

// spanned reports whether it renders as a span reference at f.
func spanned(it *item, f int) bool {
	sp, _ := it.spanAt(f)
	return sp
}

// flatten lists chosen candidates with the span restores that go with
// them (candidate.deps) after each, every one with its own net.
func flatten(chosen []candidate) []candidate {
	n := 0
	for _, cd := range chosen {
		n += len(cd.deps)
	}
	if n == 0 {
		return chosen
	}
	out := make([]candidate, 0, len(chosen)+n)
	for _, cd := range chosen {
		deps := cd.deps
		cd.deps = nil
		for _, d := range deps {
			cd.net -= d.net
		}
		out = append(out, cd)
		out = append(out, deps...)
	}
	return out
}

// Pending returns every mark that is the latest for its item, would change
// the bundle, and is not applied yet, with the reason it waits (from the
// last Decide, or ReasonAwaiting).
func (c *Core) Pending() []PendingMark {
	cands := c.candidates(c.facts + 1)
	out := make([]PendingMark, 0, len(cands))
	for _, cd := range cands {
		r := ReasonAwaiting
		if w, ok := c.reasons[cd.mk.id]; ok {
			r = w.String()
		}
		out = append(out, PendingMark{Mark: cd.mk.id, Item: cd.mk.m.Item, Decision: cd.mk.m.Decision, Since: cd.mk.at, Reason: r})
	}
	return out
}

// PendingSummary is Pending reduced to what a gauge needs: how many marks
// wait and the time of the oldest (zero when none). It builds no reason
// strings, so a worker can call it after every live decision.
func (c *Core) PendingSummary() (n int, oldest time.Time) {
	for _, cd := range c.candidates(c.facts + 1) {
		n++
		if oldest.IsZero() || cd.mk.at.Before(oldest) {
			oldest = cd.mk.at
		}
	}
	return n, oldest
}

// Facts returns how many session facts the core has observed: the fact
// index the next observed fact will get (what Decide wants as factIndex for
// a request about to be observed).
func (c *Core) Facts() int { return c.facts }
