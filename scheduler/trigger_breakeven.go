package scheduler

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/prunesched/prunesched/events"
)

// ruleNeverSent (trigger never_sent): the item was not in the bundle of the
// previous request, so removing it diverges only after everything cached:
// it breaks nothing and applies at once.
func ruleNeverSent(cd candidate) bool { return !cd.sent }

// perMark decides mark by mark when no global trigger fired and the cache
// is warm. Restores (KEEP of a pruned item) apply at once: correctness
// before cost (trigger next_request). Never-sent prunes apply at once
// (never_sent), and so do prunes inside a subtask that just closed (the
// caller names the trigger subtask_boundary). Sent prunes go by break-even: once the bundle is cut at
// offset d, every later mark rides along for free, so the candidate sets
// are the suffixes (in render order) of the sent prunes; the one with the
// largest positive value saving - break (see costs.go) applies, trigger
// break_even. The rest stay pending with the numbers that kept them.
func (c *Core) perMark(m moment, cands []candidate) ([]candidate, events.Trigger) {
	mandatory, sent := c.scratch.mandatory[:0], c.scratch.sent[:0]
	defer func() { c.scratch.mandatory, c.scratch.sent = mandatory[:0], sent[:0] }()
	restore := false
	for _, cd := range cands {
		switch {
		case !cd.prune:
			restore = true
			mandatory = append(mandatory, cd)
		case ruleNeverSent(cd), cd.boundary:
			mandatory = append(mandatory, cd)
		default:
			sent = append(sent, cd)
		}
	}
	dM, netM := m.prevTotal, 0
	for _, cd := range mandatory {
		netM += cd.net
		if cd.sent {
			dM = min(dM, cd.offset)
		}
	}
	value := func(d, net int) (cost, saving float64) {
		r := max(0, m.cs.cached-d)
		return breakCost(m.cs.pr, r), expectedSaving(m.cs.pr, net, m.horizon)
	}
	// suffix[k]: net of sent[k:].
	suffix := make([]int, len(sent)+1)
	for k := len(sent) - 1; k >= 0; k-- {
		suffix[k] = suffix[k+1] + sent[k].net
	}
	bestK := len(sent)
	bc, bs := value(dM, netM)
	best := bs - bc
	for k := len(sent) - 1; k >= 0; k-- {
		cost, saving := value(min(dM, sent[k].offset), netM+suffix[k])
		if v := saving - cost; v > best {
			best, bestK = v, k
		}
	}
	chosen := append([]candidate(nil), mandatory...)
	chosen = append(chosen, sent[bestK:]...)
	for k, cd := range sent[:bestK] {
		cost, saving := value(min(dM, cd.offset), netM+suffix[k])
		c.reasons[cd.mk.id] = waitReason{cost: cost, saving: saving, horizon: m.horizon}
	}
	if len(chosen) == 0 {
		return nil, ""
	}
	sortByPos(chosen)
	switch {
	case restore:
		return chosen, events.TriggerNextRequest
	case bestK < len(sent):
		return chosen, events.TriggerBreakEven
	}
	return chosen, events.TriggerNeverSent
}

// waitReason is why a mark waited at the last Decide; it is formatted
// only when asked for (Pending), not on every request.
type waitReason struct {
	cost, saving float64
	horizon      int
}

func (w waitReason) String() string {
	if w.saving <= w.cost {
		return fmt.Sprintf("cache warm: break %s USD > saving %s USD over %d requests", money(w.cost), money(w.saving), w.horizon)
	}
	return fmt.Sprintf("cache warm: cutting here (break %s USD, saving %s USD) is worth less than cutting later", money(w.cost), money(w.saving))
}

// money formats USD with three significant digits.
func money(v float64) string { return fmt.Sprintf("%.3g", v) }

func sortByPos(cs []candidate) {
	// A total order (a mark is one candidate), so any sort gives the same
	// result; SortFunc avoids sort.Slice's reflective swaps of these
	// large structs.
	slices.SortFunc(cs, func(a, b candidate) int {
		if a.pos != b.pos {
			return cmp.Compare(a.pos, b.pos)
		}
		return cmp.Compare(a.mk.seq, b.mk.seq)
	})
}
