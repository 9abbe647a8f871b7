package eligibility

// Settling: the verdicts of dirty items become decisions, and changed
// decisions become marks (emit).

import (
	"slices"

	"github.com/prunesched/prunesched/events"
)

// withEvidence returns a copy of v with a copy of evidence ev, both from
// the core's slabs (verdicts and their evidence are never modified, so
// they live and die together).
func (c *Core) withEvidence(v verdict, ev ...events.Evidence) *verdict {
	x := next(&c.slab.verdicts, verdictChunk)
	*x = v
	x.evidence = append(nextN(&c.slab.ev, len(ev), evidenceChunk), ev...)
	return x
}

// runVerdict is withEvidence for the PRUNE a run of copies proposes
// (L0, L1): when ev holds the same entries as the run's previous PRUNE
// (each newcomer of a run proven with the same survivor, hashes and
// rules), the verdict shares that evidence's backing array instead of
// copying it (evidence is never modified). r.ev records the array used.
func (c *Core) runVerdict(r *copyRun, v verdict, ev ...events.Evidence) *verdict {
	if r.ev != nil && slices.Equal(r.ev, ev) {
		x := next(&c.slab.verdicts, verdictChunk)
		*x = v
		x.evidence = r.ev
		return x
	}
	x := c.withEvidence(v, ev...)
	r.ev = x.evidence
	return x
}

// setVerdict records a rung's proposal for an item and queues it.
func (c *Core) setVerdict(it *item, slot int, v *verdict) {
	v.at = c.causeIdx
	if it.v == nil {
		it.v = next(&c.slab.props, propsChunk)
	}
	it.v[slot] = v
	if v.survivor != nil {
		v.survivor.dependents = append(v.survivor.dependents, it)
	}
	c.dirty(it)
}

func (c *Core) dirty(it *item) {
	if it == nil || it.gone {
		return
	}
	if !it.touched {
		it.touched = true
		c.touched = append(c.touched, it)
	}
	if !it.queued {
		it.queued = true
		c.queue = append(c.queue, it)
	}
}

// decisionKey is what makes a decision change: decision, rung and reason.
// The zero key is "no decision" (every decision has a non-empty Decision).
type decisionKey struct {
	decision events.Decision
	rung     events.Rung
	reason   events.Reason
}

func markKey(m *events.Mark) decisionKey {
	if m == nil {
		return decisionKey{}
	}
	return decisionKey{decision: m.Decision, rung: m.Rung, reason: m.Reason}
}

func (k decisionKey) isPrune() bool { return k.decision == events.Prune }

// set reports whether k is a decision.
func (k decisionKey) set() bool { return k.decision != "" }

// settle re-judges queued items until nothing changes.
func (c *Core) settle() {
	limit := 64*len(c.queue) + 4096
	for i := 0; i < len(c.queue); i++ {
		if i > limit {
			break // defensive: decisions never oscillate, but never spin
		}
		it := c.queue[i]
		it.queued = false
		if it.gone {
			continue
		}
		old, oldSurv := it.curPrune, it.curSurv
		k, surv, m := c.judge(it)
		it.curPrune, it.curSurv, it.curMark = k.isPrune(), surv, m
		it.curSpan = k.isPrune() && k.reason == events.ReasonSpanReference
		if oldSurv != surv {
			if oldSurv != nil {
				oldSurv.survRefs--
				c.dirty(oldSurv)
			}
			if surv != nil {
				surv.survRefs++
				c.dirty(surv)
			}
		}
		if old != it.curPrune {
			for _, d := range it.dependents {
				c.dirty(d)
			}
			for _, st := range it.conseqOf() {
				c.evalSubtask(st)
			}
		}
	}
	c.queue = c.queue[:0]
}

// emit turns the changed decisions into mark events, in item order.
func (c *Core) emit() []events.Event {
	if len(c.touched) == 0 {
		return nil
	}
	slices.SortFunc(c.touched, func(a, b *item) int { return int(a.idx) - int(b.idx) })
	n := 0
	for _, it := range c.touched {
		if it.curMark != nil {
			n++
		}
	}
	out := nextN(&c.slab.out, n, eventChunk)
	for _, it := range c.touched {
		it.touched = false
		m := it.curMark
		if m == nil {
			continue
		}
		// it.curMark is the mark built at the item's last judgement, for a
		// decision that differs from the last emitted one (the key set
		// only changes here, so "differs" held at that judgement and
		// still does); it is never modified or shared after: it becomes
		// the emitted mark itself (no copy).
		it.curMark = nil
		if it.rare != nil {
			it.rare.agentForce = false
		}
		m.Cause = c.causeID
		m.CauseIndex = c.causeIdx
		m.PolicyVersion = c.version
		if m.By == "" {
			m.By = By
		}
		id := events.DerivedID("mark", c.tenant, c.session, m.Item, string(m.Decision), string(m.Rung), string(m.Reason), c.causeID)
		e := events.New(id, c.tenant, c.session, c.causeTime, m)
		it.last = m
		out = append(out, e)
	}
	c.touched = c.touched[:0]
	return out
}
