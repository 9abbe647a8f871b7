package eligibility

import (
	"math/bits"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/placeholder"
)

// judge decides an item: it walks the policy ladder once (ladder) and, when
// the decision differs from the item's last emitted mark, builds the mark
// that emit will publish (buildMark) from that same walk. Re-judging an
// item whose decision did not change, the common case, builds no evidence,
// strings or mark. It returns the decision key, the survivor a PRUNE relies
// on, and the mark (nil when the key is unset or equals the last emitted
// one).
func (c *Core) judge(it *item) (decisionKey, *item, *events.Mark) {
	var scratch verdict
	o := c.ladder(it, &scratch)
	k, surv := o.key()
	force := o.agentNow && it.rare.agentForce
	if !c.alwaysBuild && !force && (!k.set() || k == markKey(it.last)) {
		return k, surv, nil
	}
	if o.cand == &scratch {
		// The errored proposal was compared without its evidence and
		// residue: build it whole for the mark.
		o.cand = c.erroredVerdict(it)
	}
	m := c.buildMark(it, o)
	if !k.set() || !force && k == markKey(it.last) {
		return k, surv, nil
	}
	return k, surv, m
}

// step is the rung of the policy ladder that decides an item.
type step uint8

const (
	stepNone         step = iota // no decision
	stepPinned                   // KEEP PINNED
	stepManual                   // PRUNE MANUAL_PRUNE
	stepProtected                // KEEP <first protection>: the proposal is blocked
	stepProposal                 // the best PRUNE or DEFER proposal
	stepAgent                    // PRUNE AGENT_REQUEST
	stepAgentRefused             // KEEP <first protection> or NO_SAVING: the agent's request refused
	stepRestored                 // KEEP RESTORED
	stepSurvivor                 // KEEP SURVIVING_COPY
	stepAbstain                  // ABSTAIN: a tempting prune refused
	stepUnique                   // KEEP UNIQUE: no evidence left
)

// outcome is where the ladder stopped for an item, with what the mark of
// that step is built from.
type outcome struct {
	step step
	// cand is the item's best proposal (candidate), nil when none.
	cand *verdict
	// manual is set when a manual prune request stands (after the last
	// restore).
	manual bool
	// mask is the set of protections blocking cand (stepProtected) or the
	// agent's request (stepAgentRefused).
	mask protSet
	// agent is set when an agent's removal request is in force: made at
	// this fact (agentNow: judged now, accepted or refused) or accepted
	// earlier, after the last restore.
	agent, agentNow bool
}

// ladder combines an item's rung proposals, manual requests and protections
// into its current decision, following the spec's policy ladder:
//
//	pinned                      -> KEEP PINNED (also refuses a manual prune)
//	manual prune request        -> PRUNE MANUAL_PRUNE (after the last restore)
//	best PRUNE or DEFER proposal (L0 < L1 < L2 < L3 < errored < L4, PRUNE
//	before DEFER), blocked by a protection -> KEEP <protection>
//	                            -> the proposal
//	restored                    -> KEEP RESTORED
//	survivor of a pruned copy   -> KEEP SURVIVING_COPY
//	an ABSTAIN proposal         -> ABSTAIN (a tempting prune refused)
//	had a decision before       -> KEEP UNIQUE (no evidence left)
//	otherwise                   -> no decision
//
// A PRUNE that would not net a saving (tokens minus the placeholder it
// would leave, placeholder.Tokens, <= 0; or below min_prune_tokens) is not
// proposed. After a restore only proposals whose evidence arrived after it
// count. The errored proposal may be *scratch (see candidate). Its side
// effect (the RECENT_TURN wake-up, in protMask) is idempotent.
func (c *Core) ladder(it *item, scratch *verdict) outcome {
	o := outcome{cand: c.candidate(it, scratch), manual: it.manualAt >= 0 && it.manualAt > it.restored}
	if r := it.rare; r != nil && r.agentSet && r.agentAt > it.restored {
		o.agentNow = int(r.agentAt) == c.causeIdx
		o.agent = o.agentNow || r.agentOK
	}
	cand := o.cand
	switch {
	case cand == nil && !o.manual && !o.agent && it.last == nil && it.survRefs == 0 && it.restored < 0:
		// No decision (every step below would say so).
	case it.pinned:
		if cand != nil || o.manual || o.agent || it.last != nil || it.survRefs != 0 {
			o.step = stepPinned
		}
	case o.manual:
		o.step = stepManual
	case o.agent && (cand == nil || cand.decision != events.Prune):
		c.agentStep(&o, it)
	case cand != nil && cand.decision != events.Abstain:
		o.step = stepProposal
		if o.mask = c.protMask(it, cand, true); o.mask != 0 {
			o.step = stepProtected
			if o.agent {
				// The rule's proposal is blocked; the agent's request is
				// judged by its own protections.
				c.agentStep(&o, it)
			}
		}
	case it.restored >= 0:
		o.step = stepRestored
	case it.survRefs > 0:
		o.step = stepSurvivor
	case cand != nil:
		o.step = stepAbstain
	case it.last != nil:
		o.step = stepUnique
	}
	return o
}

// agentStep judges the agent's standing request on it: PRUNE
// AGENT_REQUEST, or refused by its protections (agentMask) or for saving
// nothing. A request judged at its own fact records whether it stands.
func (c *Core) agentStep(o *outcome, it *item) {
	o.step = stepAgent
	if o.mask = c.agentMask(it); o.mask != 0 || c.netOf(it, events.RungNone, events.ReasonAgentRequest, nil, nil) <= 0 {
		o.step = stepAgentRefused
	}
	if o.agentNow {
		it.rare.agentOK = o.step == stepAgent
	}
}

// key is the decision of an outcome and, for a PRUNE, the survivor it
// relies on.
func (o outcome) key() (decisionKey, *item) {
	switch o.step {
	case stepPinned:
		return keyOf(events.Keep, "", events.ReasonPinned), nil
	case stepManual:
		return keyOf(events.Prune, "", events.ReasonManualPrune), nil
	case stepAgent:
		return keyOf(events.Prune, "", events.ReasonAgentRequest), nil
	case stepAgentRefused:
		if o.mask == 0 {
			return keyOf(events.Keep, "", events.ReasonNoSaving), nil
		}
		return keyOf(events.Keep, "", firstProtection(o.mask)), nil
	case stepProtected:
		return keyOf(events.Keep, "", firstProtection(o.mask)), nil
	case stepProposal:
		k := keyOf(o.cand.decision, o.cand.rung, o.cand.reason)
		if o.cand.decision == events.Prune {
			return k, o.cand.survivor
		}
		return k, nil
	case stepRestored:
		return keyOf(events.Keep, "", events.ReasonRestored), nil
	case stepSurvivor:
		return keyOf(events.Keep, "", events.ReasonSurvivingCopy), nil
	case stepAbstain:
		return keyOf(o.cand.decision, o.cand.rung, o.cand.reason), nil
	case stepUnique:
		return keyOf(events.Keep, "", events.ReasonUnique), nil
	}
	return decisionKey{}, nil
}

func keyOf(d events.Decision, r events.Rung, why events.Reason) decisionKey {
	return decisionKey{decision: d, rung: r, reason: why}
}

// buildMark builds the mark of an outcome (without cause fields): its
// decision is o.key()'s, with the evidence, protections, recoverability,
// residue and estimated tokens of its step. nil for no decision.
func (c *Core) buildMark(it *item, o outcome) *events.Mark {
	k, _ := o.key()
	if !k.set() {
		return nil
	}
	cand := o.cand
	var m *events.Mark
	switch o.step {
	case stepPinned:
		n := 1
		if o.manual {
			n++
		}
		if cand != nil {
			n += 1 + len(cand.evidence)
		}
		m, _ = c.newMark(it, n, false)
		m.Protection = []events.Reason{events.ReasonPinned}
		m.Evidence = append(m.Evidence, events.Evidence{Kind: "protection", Value: string(events.ReasonPinned), Detail: "pinned" + byWhom(it.pinBy())})
		if o.manual {
			m.Evidence = append(m.Evidence, events.Evidence{Kind: "manual_request", Detail: "prune requested" + byWhom(it.manualBy()) + " refused: the item is pinned"})
		}
		if o.agentNow {
			m.Evidence = append(m.Evidence, agentEvidence(it, "refused: the item is pinned"))
			m.By = events.ByAgent
		}
		if cand != nil {
			m.Evidence = c.appendCandidateEvidence(m.Evidence, cand)
		}
	case stepManual:
		var rec *events.Recoverability
		m, rec = c.newMark(it, 1, true)
		detail := "prune requested" + byWhom(it.manualBy())
		if rs := it.manualRs(); rs != "" {
			detail += ": " + rs
		}
		m.Evidence = append(m.Evidence, events.Evidence{Kind: "manual_request", Detail: detail})
		m.Recoverability = c.recoverability(rec, it, nil, "")
		m.TokensEstimated = c.netOf(it, events.RungNone, events.ReasonManualPrune, nil, nil)
		if by := it.manualBy(); by != "" {
			m.By = by
		}
	case stepAgent:
		var rec *events.Recoverability
		m, rec = c.newMark(it, 1, true)
		m.Evidence = append(m.Evidence, agentEvidence(it, ""))
		m.Recoverability = c.recoverability(rec, it, nil, "")
		m.TokensEstimated = c.netOf(it, events.RungNone, events.ReasonAgentRequest, nil, nil)
		m.By = events.ByAgent
	case stepAgentRefused:
		m, _ = c.newMark(it, bits.OnesCount16(uint16(o.mask))+1, false)
		prot, pev := c.agentProtections(it, o.mask, m.Evidence)
		m.Protection = prot
		why := "refused: "
		if o.mask == 0 {
			why += "removing it would save nothing (the placeholder is as large as the item)"
		} else {
			why += "protected (" + string(prot[0]) + ")"
		}
		m.Evidence = append(pev, agentEvidence(it, why))
		m.By = events.ByAgent
	case stepProtected:
		m, _ = c.newMark(it, bits.OnesCount16(uint16(o.mask))+1+len(cand.evidence), false)
		prot, pev := c.protections(it, cand, o.mask, m.Evidence)
		m.Protection = prot // prot[0] is firstProtection(o.mask): both go in bit order
		m.Evidence = c.appendCandidateEvidence(pev, cand)
		if o.agentNow {
			m.Evidence = append(m.Evidence, agentEvidence(it, "refused: protected ("+string(prot[0])+")"))
			m.By = events.ByAgent
		}
	case stepProposal:
		var rec *events.Recoverability
		m, rec = c.newMark(it, 0, cand.decision == events.Prune)
		if rec != nil {
			m.Recoverability = c.recoverability(rec, it, cand.survivor, cand.source)
		}
		m.Evidence = sharedEvidence(cand.evidence)
		m.Residue = cand.residue
		m.TokensEstimated = c.netOf(it, cand.rung, cand.reason, cand.survivor, cand.residue)
		if cand.span != nil {
			m.TokensEstimated = cand.span.net // runs minus their reference lines
		}
		if o.agentNow {
			m.Evidence = append(m.Evidence, agentEvidence(it, "accepted: the rule's own proposal stands"))
		}
	case stepRestored:
		m, _ = c.newMark(it, 1, false)
		m.Evidence = append(m.Evidence, events.Evidence{Kind: "restore", Detail: "restored by a person; no automatic prune until new evidence"})
	case stepSurvivor:
		m, _ = c.newMark(it, 1, false)
		m.Evidence = append(m.Evidence, events.Evidence{Kind: "surviving_copy", Hash: it.hash, Detail: "the copy that stays for its pruned duplicates"})
	case stepAbstain:
		m, _ = c.newMark(it, 0, false)
		m.Evidence = sharedEvidence(cand.evidence)
		m.Protection = reasonsOf(c.protMask(it, nil, false))
	case stepUnique:
		m, _ = c.newMark(it, 1, false)
		m.Evidence = append(m.Evidence, events.Evidence{Kind: "no_evidence", Detail: "no rung proposes removing it any more"})
	}
	m.Decision, m.Rung, m.Reason = k.decision, k.rung, k.reason
	if len(m.Evidence) == 0 {
		m.Evidence = nil // as a slice built by appending nothing to nil
	}
	return m
}

// sharedEvidence is a proposal's evidence as its mark's evidence: the same
// backing array, not a copy (a verdict's evidence is never modified, nor is
// an emitted mark's). The capacity is cut to the length, so appending to
// the mark's evidence copies it and never writes into the verdict's.
func sharedEvidence(ev []events.Evidence) []events.Evidence { return ev[:len(ev):len(ev)] }

// newMark returns an empty mark for it with room for n evidence entries
// and, for a PRUNE, the recoverability (returned too, else nil), all from
// the core's slabs. Evidence beyond n spills to the heap as appending
// does.
func (c *Core) newMark(it *item, n int, prune bool) (*events.Mark, *events.Recoverability) {
	m := next(&c.slab.marks, markChunk)
	var rec *events.Recoverability
	if prune {
		rec = next(&c.slab.recs, recChunk)
	}
	m.Evidence = nextN(&c.slab.ev, n, evidenceChunk)
	m.Item, m.Part = it.id, partOf(it)
	return m, rec
}

// candidate returns the item's best proposal: the first PRUNE in rung order,
// else the first DEFER, else the first ABSTAIN. Rungs the policy disables
// (eligibility.rungs, eligibility.errored_inputs) propose nothing; their
// evidence is still gathered, so other rungs see the same facts. The errored
// proposal is compared without its evidence and residue (in *scratch: the
// same decision, rung, reason and fact index, so the same proposal wins);
// the result may be scratch, which erroredVerdict builds whole.
func (c *Core) candidate(it *item, scratch *verdict) *verdict {
	var best *verdict
	for s := 0; s < nSlots; s++ {
		if !c.slotOn[s] {
			continue
		}
		v := it.slot(s)
		if s == sErr {
			v = c.erroredDecision(it, scratch)
		}
		if v == nil || (it.restored >= 0 && v.at <= int(it.restored)) {
			continue
		}
		if v.decision == events.Prune && !c.worth(it, v) {
			continue
		}
		if best == nil || rank(v.decision) < rank(best.decision) {
			best = v
		}
	}
	return best
}

func rank(d events.Decision) int {
	switch d {
	case events.Prune:
		return 0
	case events.Defer:
		return 1
	}
	return 2
}

// worth reports whether removing the item under verdict v nets a saving
// under the policy: at least min_prune_tokens, and more tokens than the
// placeholder it would leave.
func (c *Core) worth(it *item, v *verdict) bool {
	if it.tokens < c.el.MinPruneTokens {
		return false
	}
	if v.span != nil {
		return v.span.net > 0
	}
	pc := c.phEntry(it, v.rung, v.reason, v.survivor, v.residue)
	if pc.fits {
		return true
	}
	if !pc.counted {
		// A placeholder shorter in bytes than the payload in tokens is
		// certainly smaller: no need to count it yet.
		p := c.phSpec(it, v.rung, v.reason, v.survivor, v.residue)
		p.Tokens = it.tokens
		if c.sizer.FitsUnder(p, it.tokens) {
			pc.fits = true
			return true
		}
	}
	return c.netOf(it, v.rung, v.reason, v.survivor, v.residue) > 0
}

// phEntry returns the item's placeholder estimate for these inputs,
// emptied when they changed since the last one (the placeholder's text
// depends on nothing else the item can change).
func (c *Core) phEntry(it *item, rung events.Rung, reason events.Reason, survivor *item, residue *events.Residue) *phCache {
	surv := int32(-1)
	if survivor != nil {
		surv = survivor.idx
	}
	if it.kind != kOutput {
		residue = nil // not in the placeholder's text
	}
	pc := c.phOf(it)
	if pc.rung != rung || pc.reason != reason || pc.survivor != surv || pc.residue != residue {
		*pc = phCache{rung: rung, reason: reason, survivor: surv, residue: residue, handle: pc.handle}
	}
	return pc
}

// phOf returns the item's placeholder cache, allocated on first use.
func (c *Core) phOf(it *item) *phCache {
	if it.ph == nil {
		it.ph = next(&c.slab.ph, phChunk)
		it.ph.survivor = -2
	}
	return it.ph
}

// handle is placeholder.Handle of the item, kept with its placeholder
// estimate.
func (c *Core) handle(it *item) string {
	pc := c.phOf(it)
	if pc.handle == "" {
		pc.handle = placeholder.Handle(int(it.idx))
	}
	return pc.handle
}

// netOf is placeholder.Net of the placeholder the item would leave,
// cached per item until rung, reason, survivor or residue change.
func (c *Core) netOf(it *item, rung events.Rung, reason events.Reason, survivor *item, residue *events.Residue) int {
	pc := c.phEntry(it, rung, reason, survivor, residue)
	if !pc.counted {
		pc.net = c.sizer.Net(c.phSpec(it, rung, reason, survivor, residue), it.tokens)
		pc.counted = true
	}
	return pc.net
}

// phSpec is the placeholder the item would leave when pruned with rung,
// reason and survivor, as projections renders it (placeholder.Render),
// so savings are net of the text actually sent. Items are named by their
// position, as the bundle's handles are.
func (c *Core) phSpec(it *item, rung events.Rung, reason events.Reason, survivor *item, residue *events.Residue) placeholder.Spec {
	p := placeholder.Spec{Rung: rung, Reason: reason, Item: c.handle(it), Role: events.RoleAssistant}
	if cl := it.call; cl != nil && it.kind != kMessage {
		p.Part, p.Tool = partOf(it), cl.tool
		if !cl.phSourceSet {
			if obj, ok := cl.parsed.(map[string]any); ok {
				cl.phSource = placeholder.SourceOf(obj, c.cwd)
			} else {
				cl.phSource = placeholder.Source([]byte(cl.canon), c.cwd)
			}
			cl.phSourceSet = true
		}
		p.Source = cl.phSource
		if it.kind == kOutput {
			p.Residue = residue
		}
	}
	if survivor != nil {
		p.Survivor = c.handle(survivor)
	}
	return p
}

func partOf(it *item) string {
	switch it.kind {
	case kInput:
		return "input"
	case kOutput:
		return "output"
	}
	return ""
}

// agentEvidence is the evidence entry of the agent's removal request,
// with the model's reason and, when set, the outcome.
func agentEvidence(it *item, outcome string) events.Evidence {
	d := "removal requested by the agent"
	if rs := it.rare.agentRs; rs != "" {
		d += ": " + rs
	}
	return events.Evidence{Kind: "agent_request", Value: outcome, Detail: d}
}

func byWhom(by string) string {
	if by == "" {
		return ""
	}
	return " by " + by
}

// appendCandidateEvidence appends the description of a blocked or
// overridden proposal to dst.
func (c *Core) appendCandidateEvidence(dst []events.Evidence, v *verdict) []events.Evidence {
	dst = append(dst, events.Evidence{Kind: "candidate", Value: c.candidateValue(v)})
	return append(dst, v.evidence...)
}

// candidateValue is decision + " " + rung + " " + reason of a proposal,
// from a small cache: proposals take few distinct values.
func (c *Core) candidateValue(v *verdict) string {
	k := decisionKey{decision: v.decision, rung: v.rung, reason: v.reason}
	for i := range c.candValues {
		if c.candValues[i].key == k {
			return c.candValues[i].value
		}
	}
	s := string(v.decision) + " " + string(v.rung) + " " + string(v.reason)
	if len(c.candValues) < maxCandValues {
		c.candValues = append(c.candValues, candValue{key: k, value: s})
	}
	return s
}

// candValue is one cached candidateValue.
type candValue struct {
	key   decisionKey
	value string
}

// maxCandValues bounds Core.candValues (searched linearly).
const maxCandValues = 32

// recoverability fills r with how to bring a pruned item back and returns
// it.
func (c *Core) recoverability(r *events.Recoverability, it *item, survivor *item, source string) *events.Recoverability {
	*r = events.Recoverability{Log: it.eventID, Source: source, Command: "prunesched item " + c.session + " " + it.id}
	if it.kind == kOutput {
		r.Blob = it.hash
	}
	if survivor != nil {
		r.Survivor = survivor.id
	}
	return r
}
