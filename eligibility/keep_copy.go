package eligibility

import (
	"strings"

	"github.com/prunesched/prunesched/events"
)

// keepCopy is the one rule for which of two proven copies stays (L0
// identical copies, L1 observations of one source version): o is the older
// copy (the latest one before n), n the newcomer, first the earliest copy
// of the current run. It returns the item to prune, its survivor, and the
// "keep_copy" evidence that says which rule chose them.
//
//   - keep_copy first (default): the earliest copy still in the rendered
//     context stays and the newcomer goes. The earliest copy is usually
//     inside the provider's cached prefix and the newcomer has never been
//     sent, so the prune breaks no cache: the scheduler applies it at the
//     newcomer's first request (trigger never_sent). The content stays in
//     front of the model, so recent-turn protection does not hold the
//     newcomer back (see protMask). Value "first".
//   - Fallback: when the earliest copy has left the context (host-pruned or
//     compacted away) or is itself pruned (other than as a copy of the
//     same content, see inContext), there is no earlier copy in front of
//     the model: the rule falls back to keep_copy last. Value
//     "last (fallback)", the detail naming the earliest copy and why.
//   - keep_copy last: the newest copy stays, the older goes (as DCP does).
//     Value "last".
func (c *Core) keepCopy(o, n, first *item, rung events.Rung) (victim, survivor *item, ev events.Evidence) {
	if c.el.KeepCopy != "first" {
		return o, n, events.Evidence{Kind: "keep_copy", Value: "last", Detail: "the newest copy stays"}
	}
	if first == nil || first == n {
		first = o
	}
	s, why := c.inContext(first, rung)
	if why == "" {
		return n, s, events.Evidence{Kind: "keep_copy", Item: s.id, Value: "first", Detail: "the earliest copy in context stays; the newcomer goes"}
	}
	return o, n, events.Evidence{Kind: "keep_copy", Item: first.id, Value: "last (fallback)",
		Detail: "the earliest copy " + first.id + " " + why + "; the newest copy stays"}
}

// inContext follows a copy through its own copy prunes to the copy whose
// content is still rendered: from an item pruned as a copy (rung L0, or for
// an L1 pair L0 or L1) to its survivor. It returns that copy, or why there
// is none ("left the context", "is pruned (<rung> <reason>)").
func (c *Core) inContext(s *item, rung events.Rung) (*item, string) {
	for hops := 0; hops < 4096; hops++ {
		if s.gone {
			return nil, "left the context"
		}
		if !s.curPrune || s.curSpan {
			return s, "" // a span reference keeps the content rendered
		}
		k := markKey(s.last)
		if s.curSurv == nil || !(k.rung == events.L0 || rung == events.L1 && k.rung == events.L1) {
			return nil, "is pruned (" + strings.TrimSpace(string(k.rung)+" "+string(k.reason)) + ")"
		}
		s = s.curSurv
	}
	return nil, "is pruned"
}
