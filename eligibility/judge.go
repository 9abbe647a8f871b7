package eligibility

import (
	"github.com/prunesched/prunesched/events"
)

// judge combines an item's rung proposals, manual requests and protections
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
// A PRUNE that would not net a saving (tokens - PlaceholderTokens <= 0, or
// below min_prune_tokens) is not proposed. After a restore only proposals
// whose evidence arrived after it count. It returns the mark (without cause
// fields) and, for a PRUNE, the survivor it relies on.
func (c *Core) judge(it *item) (*events.Mark, *item) {
	cand := c.candidate(it)
	manual := it.manualAt >= 0 && it.manualAt > it.restored
	if cand == nil && !manual && it.last == nil && it.survRefs == 0 && it.restored < 0 {
		return nil, nil // no decision (every branch below would say so)
	}
	m := &events.Mark{Item: it.id, Part: partOf(it)}
	if it.pinned {
		if cand == nil && !manual && it.last == nil && it.survRefs == 0 {
			return nil, nil
		}
		m.Decision, m.Reason = events.Keep, events.ReasonPinned
		m.Protection = []events.Reason{events.ReasonPinned}
		m.Evidence = []events.Evidence{{Kind: "protection", Value: string(events.ReasonPinned), Detail: "pinned" + byWhom(it.pinBy)}}
		if manual {
			m.Evidence = append(m.Evidence, events.Evidence{Kind: "manual_request", Detail: "prune requested" + byWhom(it.manualBy) + " refused: the item is pinned"})
		}
		if cand != nil {
			m.Evidence = append(m.Evidence, candidateEvidence(cand)...)
		}
		return m, nil
	}
	if manual {
		m.Decision, m.Reason = events.Prune, events.ReasonManualPrune
		detail := "prune requested" + byWhom(it.manualBy)
		if it.manualRs != "" {
			detail += ": " + it.manualRs
		}
		m.Evidence = []events.Evidence{{Kind: "manual_request", Detail: detail}}
		m.Recoverability = c.recoverability(it, nil, "")
		m.TokensEstimated = net(it.tokens)
		if it.manualBy != "" {
			m.By = it.manualBy
		}
		return m, nil
	}
	if cand != nil && cand.decision != events.Abstain {
		prot, pev := c.protections(it, cand, true)
		if len(prot) > 0 {
			m.Decision, m.Reason, m.Protection = events.Keep, prot[0], prot
			m.Evidence = append(pev, candidateEvidence(cand)...)
			return m, nil
		}
		m.Decision, m.Rung, m.Reason = cand.decision, cand.rung, cand.reason
		m.Evidence = append([]events.Evidence(nil), cand.evidence...)
		m.Residue = cand.residue
		m.TokensEstimated = net(it.tokens)
		if cand.decision == events.Prune {
			m.Recoverability = c.recoverability(it, cand.survivor, cand.source)
			return m, cand.survivor
		}
		return m, nil
	}
	if it.restored >= 0 {
		m.Decision, m.Reason = events.Keep, events.ReasonRestored
		m.Evidence = []events.Evidence{{Kind: "restore", Detail: "restored by a person; no automatic prune until new evidence"}}
		return m, nil
	}
	if it.survRefs > 0 {
		m.Decision, m.Reason = events.Keep, events.ReasonSurvivingCopy
		m.Evidence = []events.Evidence{{Kind: "surviving_copy", Hash: it.hash, Detail: "the copy that stays for its pruned duplicates"}}
		return m, nil
	}
	if cand != nil {
		prot, _ := c.protections(it, nil, false)
		m.Decision, m.Rung, m.Reason = cand.decision, cand.rung, cand.reason
		m.Evidence = append([]events.Evidence(nil), cand.evidence...)
		m.Protection = prot
		return m, nil
	}
	if it.last != nil {
		m.Decision, m.Reason = events.Keep, events.ReasonUnique
		m.Evidence = []events.Evidence{{Kind: "no_evidence", Detail: "no rung proposes removing it any more"}}
		return m, nil
	}
	return nil, nil
}

// candidate returns the item's best proposal: the first PRUNE in rung order,
// else the first DEFER, else the first ABSTAIN. Rungs the policy disables
// (eligibility.rungs, eligibility.errored_inputs) propose nothing; their
// evidence is still gathered, so other rungs see the same facts.
func (c *Core) candidate(it *item) *verdict {
	var best *verdict
	for s := 0; s < nSlots; s++ {
		if !c.slotOn[s] {
			continue
		}
		v := it.v[s]
		if s == sErr {
			v = c.erroredVerdict(it)
		}
		if v == nil || (it.restored >= 0 && v.at <= it.restored) {
			continue
		}
		if v.decision == events.Prune && !c.worth(it) {
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

// worth reports whether removing the item nets a saving under the policy.
func (c *Core) worth(it *item) bool {
	return it.tokens > PlaceholderTokens && it.tokens >= c.el.MinPruneTokens
}

func net(tokens int) int {
	if tokens <= PlaceholderTokens {
		return 0
	}
	return tokens - PlaceholderTokens
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

func byWhom(by string) string {
	if by == "" {
		return ""
	}
	return " by " + by
}

// candidateEvidence describes a blocked or overridden proposal.
func candidateEvidence(v *verdict) []events.Evidence {
	out := []events.Evidence{{Kind: "candidate", Value: string(v.decision) + " " + string(v.rung) + " " + string(v.reason)}}
	return append(out, v.evidence...)
}

// recoverability says how to bring a pruned item back.
func (c *Core) recoverability(it *item, survivor *item, source string) *events.Recoverability {
	r := &events.Recoverability{Log: it.eventID, Source: source, Command: "prunesched item " + c.session + " " + it.id}
	if it.kind == kOutput {
		r.Blob = it.hash
	}
	if survivor != nil {
		r.Survivor = survivor.id
	}
	return r
}
