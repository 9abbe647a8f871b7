package eligibility

import (
	"fmt"

	"github.com/prunesched/prunesched/events"
)

// L3, completed-work residue. A subtask (SubtaskOpened .. SubtaskClosed)
// collects the successful tool outputs observed while it is open (nested
// subtasks collect into every open one). At its close, for each such output
// still in context — except the verification item and the consequence items,
// which stay — the rung proposes:
//
//   - ABSTAIN UNVERIFIED_CLOSURE unless verified_by.kind is test_run or check
//     and verified_by.item is a passing tool result (no is_error, exit code 0
//     or none) recorded after the subtask's last state change (the last side
//     effect while it was open). "user" and "agent" closures are the agent's
//     or a person's say-so, not an outside check;
//   - DEFER AWAITING_CONSEQUENCE when verified but no consequence is named,
//     or a named consequence item has not appeared in the log yet (it is
//     re-judged when it appears, or when the subtask is closed again);
//   - ABSTAIN CONSEQUENCE_NOT_RECORDED when a named consequence item left the
//     context (host compaction or pruning) — it is not recorded elsewhere in
//     context any more;
//   - PRUNE L3 COMPLETED_RESIDUE otherwise, with the verification and every
//     consequence item in the evidence.
//
// Tool inputs, messages and errored outputs are never L3. A PRUNE from one
// subtask is not weakened by a later verdict of an enclosing subtask.
type subtask struct {
	id          string
	items       []*item
	lastChange  int
	closed      bool
	verified    *events.Verification
	consequence []string
}

func (c *Core) onSubtaskOpened(p *events.SubtaskOpened) {
	if st := c.subtasks[p.Subtask]; st != nil && !st.closed {
		return
	}
	st := &subtask{id: p.Subtask, lastChange: -1}
	c.subtasks[p.Subtask] = st
	c.open = append(c.open, st)
}

func (c *Core) onSubtaskClosed(p *events.SubtaskClosed) {
	st := c.subtasks[p.Subtask]
	if st == nil {
		return
	}
	for i, o := range c.open {
		if o == st {
			c.open = append(c.open[:i:i], c.open[i+1:]...)
			break
		}
	}
	st.closed = true
	st.verified = p.VerifiedBy
	st.consequence = append([]string(nil), p.Consequence...)
	c.evalSubtask(st)
}

// evalSubtask sets the L3 proposal of every item of a closed subtask.
func (c *Core) evalSubtask(st *subtask) {
	if !st.closed {
		return
	}
	v := c.l3Verdict(st)
	skip := map[string]bool{}
	if st.verified != nil {
		skip[st.verified.Item] = true
	}
	for _, id := range st.consequence {
		skip[id] = true
	}
	for _, it := range st.items {
		if it.gone || it.errored || skip[it.id] {
			continue
		}
		if old := it.slot(sL3); old != nil && old.subtask != st && rank(old.decision) <= rank(v.decision) {
			continue
		}
		vv := *v
		c.setVerdict(it, sL3, &vv)
	}
}

func (c *Core) l3Verdict(st *subtask) *verdict {
	v := &verdict{subtask: st}
	vb := st.verified
	if vb == nil || (vb.Kind != "test_run" && vb.Kind != "check") {
		kind := "nothing"
		if vb != nil {
			kind = vb.Kind
		}
		v.decision, v.reason = events.Abstain, events.ReasonUnverifiedClosure
		v.evidence = []events.Evidence{{Kind: "verification", Value: kind, Detail: "subtask " + st.id + " closed without an outside check recorded in the log"}}
		return v
	}
	vi := c.lookup(vb.Item)
	switch {
	case vi == nil || vi.kind != kOutput:
		v.decision, v.reason = events.Abstain, events.ReasonUnverifiedClosure
		v.evidence = []events.Evidence{{Kind: "verification", Item: vb.Item, Value: vb.Kind, Detail: "verification item is not a tool result in the log"}}
		return v
	case !vi.passing:
		v.decision, v.reason = events.Abstain, events.ReasonUnverifiedClosure
		v.evidence = []events.Evidence{{Kind: "verification", Item: vb.Item, Value: vb.Kind, Detail: "verification item did not pass"}}
		return v
	case int(vi.factIdx) < st.lastChange:
		v.decision, v.reason = events.Abstain, events.ReasonUnverifiedClosure
		v.evidence = []events.Evidence{{Kind: "verification", Item: vb.Item, Value: vb.Kind, Detail: fmt.Sprintf("verification (fact %d) ran before the last change (fact %d)", vi.factIdx, st.lastChange)}}
		return v
	}
	verEv := events.Evidence{Kind: "verification", Item: vb.Item, Value: vb.Kind, Hash: vi.hash,
		Detail: fmt.Sprintf("subtask %s verified by a passing result recorded after its last change", st.id)}
	if len(st.consequence) == 0 {
		v.decision, v.reason = events.Defer, events.ReasonAwaitConsequence
		v.evidence = []events.Evidence{verEv, {Kind: "consequence", Detail: "no consequence recorded yet"}}
		return v
	}
	evs := []events.Evidence{verEv}
	pending, missing := false, ""
	for _, id := range st.consequence {
		ci := c.lookup(id)
		switch {
		case ci == nil:
			pending = true
			subs := c.awaitItem[id]
			if len(subs) == 0 || subs[len(subs)-1] != st {
				c.awaitItem[id] = append(subs, st)
			}
		case ci.gone:
			missing = id
		default:
			if cs := ci.conseqOf(); len(cs) == 0 || cs[len(cs)-1] != st {
				r := ci.setRare()
				r.conseqOf = append(r.conseqOf, st)
			}
			if ci.curPrune {
				missing = id
			}
		}
		evs = append(evs, events.Evidence{Kind: "consequence", Item: id})
	}
	switch {
	case missing != "":
		v.decision, v.reason = events.Abstain, events.ReasonNoConsequence
		v.evidence = append(evs, events.Evidence{Kind: "consequence", Item: missing, Detail: "consequence item is not in context"})
	case pending:
		v.decision, v.reason = events.Defer, events.ReasonAwaitConsequence
		v.evidence = append(evs, events.Evidence{Kind: "consequence", Detail: "a named consequence item has not appeared yet"})
	default:
		v.decision, v.rung, v.reason = events.Prune, events.L3, events.ReasonCompletedResidue
		v.evidence = evs
	}
	return v
}
