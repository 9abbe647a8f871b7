package eligibility

import (
	"math/bits"
	"path"
	"strconv"
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/agenttools"
)

// Protection is checked before any prune and derives from properties of the
// item, never from an importance score. Each protection is a reason code;
// when one blocks a PRUNE (or a DEFER) candidate the item gets KEEP with the
// first reason below, Protection listing all in force, and the blocked
// candidate in the evidence. In order:
//
//   - PINNED: a person pinned the item (checked first; it also refuses a
//     manual prune, which every other protection yields to);
//   - RESTORED: a person restored the item after a prune; no automatic prune
//     applies again unless its evidence arrived after the restore;
//   - USER_MESSAGE, SYSTEM_PROMPT: user and system messages. Assistant text
//     and thinking are not protected by a reason but no rung ever proposes
//     them, so only a person can prune them;
//   - PROJECT_RULE: reads (and writes) of project-rule files
//     (eligibility.project_rule_files: CLAUDE.md, AGENTS.md, .cursorrules,
//     .github/copilot-instructions.md, GEMINI.md, CONVENTIONS.md, ...);
//   - ACTIVE_PLAN: the latest plan/todo call (TodoWrite, todowrite,
//     update_plan, TaskCreate/TaskUpdate) and its result;
//   - PROTECTED_TOOL, PROTECTED_FILE: eligibility.protected_tools (by name,
//     case-insensitive) and eligibility.protected_files (glob on the path and
//     on its base name);
//   - UNRESOLVED_ERROR, INPUT_EXPLAINS_FAILURE: see errored.go;
//   - UNIQUE_EVIDENCE: a pruned item must have a survivor in context or a
//     recoverable source. For L0/L1/L2 the survivor chain (survivor, its
//     survivor, ...) must end at an item in context that is not pruned; for
//     L4 PREDICTED_IRRELEVANT the source must still be at the version read;
//     L4 COLD_RECOVERABLE (recoverable from the log) must not be what
//     pruned copies or span references rely on, nor record a closed
//     subtask's consequence. L3 rests on its own evidence (the consequence
//     recorded elsewhere) and errored inputs on their residue;
//   - RECENT_TURN: the last eligibility.protect_recent_turns turns (default
//     2), where a turn is one model request: an item is protected while fewer
//     than N model requests were dispatched after it entered the log. Only
//     PRUNE candidates wait for it (a DEFER already waits), and not a
//     newcomer pruned as a copy of an earlier item still in context
//     (keep_copy first: its content is still in front of the model).
//
// protMask evaluates them (and schedules the RECENT_TURN wake-up) and returns
// the set in force as a bit set; protections turns that set into the reasons
// and their evidence, in the order above.
func (c *Core) protMask(it *item, cand *verdict, wantRecent bool) protSet {
	var m protSet
	if it.kind == kMessage {
		m |= it.msgProt
	}
	if cl := it.call; cl != nil {
		if cl.rule != "" {
			m |= pProjectRule
		}
		if it == c.planIn || it == c.planOut {
			m |= pActivePlan
		}
		if c.protectedTool(cl.tool) {
			m |= pProtectedTool
		}
		if cl.protFile != "" {
			m |= pProtectedFile
		}
		if it.kind == kInput && cl.fail != nil {
			if c.unresolved(cl) {
				m |= pUnresolved
			}
			if cl.fail.explains != "" {
				m |= pExplains
			}
		}
	}
	if cand != nil && cand.decision == events.Prune {
		if cand.survivor != nil && !c.chainOK(it, cand.survivor) {
			m |= pNoSurvivor
		}
		if cand.span != nil && (cand.survivor.gone || cand.survivor.curPrune) {
			// A span reference points at lines that must be rendered as
			// they were: the earlier read itself, not a copy of it.
			m |= pNoSurvivor
		}
		if cand.reason == events.ReasonColdRecoverable {
			// Recoverable from the log, not from a source (see
			// cold_recoverable.go); no survivor, so unique evidence is
			// what others rely on.
			if it.survRefs > 0 {
				m |= pReliedOn
			}
			if len(it.conseqOf()) > 0 {
				m |= pConsequence
			}
		} else if cand.rung == events.L4 && cand.source == "" {
			m |= pNoSource
		}
		if n := c.el.RecentTurns(); wantRecent && c.requests-int(it.req) < n && !copyInFront(it, cand) {
			m |= pRecentTurn
			if !it.recentWake {
				it.recentWake = true
				c.wakeAt(int(it.req)+n, it)
			}
		}
	}
	return m
}

// agentMask is the set of protections that refuse the agent's request to
// remove it: every protection of a rung proposal (protMask), the recent
// turns without exception (the agent is asking about content it has just
// seen), the output of a failure still unresolved, and unique evidence in
// the sense that fits a request without a survivor: other pruned copies
// rely on it, or a closed subtask's consequence is recorded in it (L3
// removals rest on that).
func (c *Core) agentMask(it *item) protSet {
	m := c.protMask(it, nil, false)
	if cl := it.call; cl != nil && m&pProtectedTool != 0 && !c.listedTool(cl.tool) {
		// A context tool's answer is the agent's own to drop (a recovered
		// original it has read): only rules may not cut it.
		m &^= pProtectedTool
	}
	if cl := it.call; cl != nil && it.kind == kOutput && cl.fail != nil && c.unresolved(cl) {
		m |= pUnresolved
	}
	if c.requests-int(it.req) < c.el.RecentTurns() {
		m |= pRecentTurn
	}
	if it.survRefs > 0 {
		m |= pReliedOn
	}
	if len(it.conseqOf()) > 0 {
		m |= pConsequence
	}
	return m
}

// agentProtections is protections for the agent's refused request.
func (c *Core) agentProtections(it *item, m protSet, ev []events.Evidence) ([]events.Reason, []events.Evidence) {
	return c.protections(it, nil, m, ev)
}

// copyInFront reports whether a PRUNE candidate removes a newcomer whose
// copy (L0) or source version (L1) is an earlier item, still in context
// (chainOK checks that): the content stays in front of the model, so
// recent-turn protection does not hold it back (keep_copy first).
func copyInFront(it *item, cand *verdict) bool {
	return (cand.rung == events.L0 || cand.rung == events.L1) && cand.survivor != nil && cand.survivor.idx < it.idx
}

// protSet is a set of protections in force, one bit each in check order.
type protSet uint16

const (
	pUserMessage protSet = 1 << iota
	pSystemPrompt
	pProjectRule
	pActivePlan
	pProtectedTool
	pProtectedFile
	pUnresolved
	pExplains
	pNoSurvivor // UNIQUE_EVIDENCE: the survivor chain is broken
	pNoSource   // UNIQUE_EVIDENCE: an L4 prune without a recoverable source
	pRecentTurn
	pReliedOn    // UNIQUE_EVIDENCE: pruned copies rely on it (agent requests)
	pConsequence // UNIQUE_EVIDENCE: a closed subtask's consequence (agent requests)
)

// protReasons is the reason of each protSet bit, in bit order.
var protReasons = [...]events.Reason{
	events.ReasonUserMessage, events.ReasonSystemPrompt, events.ReasonProjectRule,
	events.ReasonActivePlan, events.ReasonProtectedTool, events.ReasonProtectedFile,
	events.ReasonUnresolved, events.ReasonExplainsFailure,
	events.ReasonUniqueEvidence, events.ReasonUniqueEvidence, events.ReasonRecentTurn,
	events.ReasonUniqueEvidence, events.ReasonUniqueEvidence,
}

// firstProtection returns the reason of the first protection in m (m != 0).
func firstProtection(m protSet) events.Reason {
	return protReasons[bits.TrailingZeros16(uint16(m))]
}

// reasonsOf lists the reasons of the protections in m (protections
// without the evidence).
func reasonsOf(m protSet) []events.Reason {
	if m == 0 {
		return nil
	}
	rs := make([]events.Reason, 0, bits.OnesCount16(uint16(m)))
	for b := protSet(1); b <= m; b <<= 1 {
		if m&b != 0 {
			rs = append(rs, protReasons[bits.TrailingZeros16(uint16(b))])
		}
	}
	return rs
}

// protections lists the protections in m (from protMask on the same state)
// as reasons, with one evidence each appended to ev (nil: a new slice).
func (c *Core) protections(it *item, cand *verdict, m protSet, ev []events.Evidence) ([]events.Reason, []events.Evidence) {
	if m == 0 {
		return nil, ev
	}
	n := bits.OnesCount16(uint16(m))
	rs := make([]events.Reason, 0, n)
	if ev == nil {
		ev = make([]events.Evidence, 0, n)
	}
	add := func(bit protSet, detail string) {
		rs = append(rs, protReasons[bits.TrailingZeros16(uint16(bit))])
		ev = append(ev, events.Evidence{Kind: "protection", Value: string(rs[len(rs)-1]), Detail: detail})
	}
	cl := it.call
	for b := protSet(1); b <= m; b <<= 1 {
		if m&b == 0 {
			continue
		}
		switch b {
		case pUserMessage:
			add(b, "user message")
		case pSystemPrompt:
			add(b, "system prompt")
		case pProjectRule:
			add(b, "project-rule file matching "+cl.rule)
		case pActivePlan:
			add(b, "latest plan/todo state ("+cl.tool+")")
		case pProtectedTool:
			if _, ctx := agenttools.Match(cl.tool); ctx {
				add(b, "tool "+cl.tool+" is a context tool: its answer (a listing, a judgement, a recovered original) stays as sent")
			} else {
				add(b, "tool "+cl.tool+" is in protected_tools")
			}
		case pProtectedFile:
			add(b, "path matches protected_files pattern "+cl.protFile)
		case pUnresolved:
			add(b, "latest failure on its target with no later success")
		case pExplains:
			add(b, cl.fail.explains)
		case pNoSurvivor:
			add(b, "no surviving copy in context: "+cand.survivor.id+" left it or was pruned")
		case pNoSource:
			add(b, "not recoverable from its source: no unchanged versioned source")
		case pRecentTurn:
			add(b, strconv.Itoa(c.requests-int(it.req))+" of "+strconv.Itoa(c.el.RecentTurns())+" protected model requests since it entered")
		case pReliedOn:
			add(b, "the surviving copy of "+strconv.Itoa(int(it.survRefs))+" pruned item(s)")
		case pConsequence:
			d := "records the consequence of a closed subtask"
			if st := it.conseqOf(); len(st) > 0 {
				d += " (" + st[0].id + ")"
			}
			add(b, d)
		}
	}
	return rs, ev
}

// chainOK reports whether the survivor chain of a pruned item ends at an
// item in context that is not pruned (or only partly, by span references,
// which keep its content in front of the model).
func (c *Core) chainOK(it, s *item) bool {
	for hops := 0; hops < 4096; hops++ {
		if s == nil || s == it || s.gone {
			return false
		}
		if !s.curPrune || s.curSpan {
			return true
		}
		s = s.curSurv
	}
	return false
}

// protectedTool reports whether tool's calls are protected: a tool in
// eligibility.protected_tools, or one of prunesched's own context tools,
// whose answers no rule may cut (a recovered original would otherwise be
// pruned again as a copy of what it recovers).
func (c *Core) protectedTool(tool string) bool {
	if _, ok := agenttools.Match(tool); ok {
		return true
	}
	return c.listedTool(tool)
}

// listedTool reports whether tool is in eligibility.protected_tools.
func (c *Core) listedTool(tool string) bool {
	for _, t := range c.el.ProtectedTools {
		if strings.EqualFold(t, tool) {
			return true
		}
	}
	return false
}

// matchProtectedPaths sets the project-rule and protected-file matches of a
// call from its paths.
func (c *Core) matchProtectedPaths(cl *call) {
	for _, p := range cl.paths {
		if cl.rule != "" && cl.protFile != "" {
			break
		}
		m, ok := c.pathMatch[p]
		if !ok {
			m = pathMatch{rule: matchAny(c.el.ProjectRuleFiles, p), prot: matchAny(c.el.ProtectedFiles, p)}
			if c.pathMatch == nil || len(c.pathMatch) >= maxPathMatchCache {
				c.pathMatch = map[string]pathMatch{}
			}
			c.pathMatch[p] = m
		}
		if cl.rule == "" {
			cl.rule = m.rule
		}
		if cl.protFile == "" {
			cl.protFile = m.prot
		}
	}
}

// pathMatch caches the patterns one path matches (the policy's patterns are
// fixed for a core).
type pathMatch struct{ rule, prot string }

// maxPathMatchCache bounds Core.pathMatch; it is emptied when full.
const maxPathMatchCache = 4096

// matchAny returns the first pattern matching p: a pattern with "/" is
// matched against as many trailing path elements as it has, one without
// against the base name; every pattern is also tried on the whole path.
func matchAny(patterns []string, p string) string {
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, p); ok {
			return pat
		}
		if !strings.Contains(pat, "/") {
			if ok, _ := path.Match(pat, path.Base(p)); ok {
				return pat
			}
			continue
		}
		n := strings.Count(strings.Trim(pat, "/"), "/") + 1
		parts := strings.Split(p, "/")
		if len(parts) >= n {
			if ok, _ := path.Match(strings.Trim(pat, "/"), strings.Join(parts[len(parts)-n:], "/")); ok {
				return pat
			}
		}
	}
	return ""
}
