package eligibility

import (
	"fmt"
	"path"
	"strings"

	"github.com/prunesched/prunesched/events"
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
//     L4 the source must still be at the version read. L3 rests on its own
//     evidence (the consequence recorded elsewhere) and errored inputs on
//     their residue;
//   - RECENT_TURN: the last eligibility.protect_recent_turns turns (default
//     2), where a turn is one model request: an item is protected while fewer
//     than N model requests were dispatched after it entered the log. Only
//     PRUNE candidates wait for it (a DEFER already waits).
func (c *Core) protections(it *item, cand *verdict, wantRecent bool) ([]events.Reason, []events.Evidence) {
	var rs []events.Reason
	var ev []events.Evidence
	add := func(r events.Reason, detail string) {
		rs = append(rs, r)
		ev = append(ev, events.Evidence{Kind: "protection", Value: string(r), Detail: detail})
	}
	if it.kind == kMessage {
		switch it.role {
		case events.RoleUser:
			add(events.ReasonUserMessage, "user message")
		case events.RoleSystem:
			add(events.ReasonSystemPrompt, "system prompt")
		}
	}
	if cl := it.call; cl != nil {
		if cl.rule != "" {
			add(events.ReasonProjectRule, "project-rule file matching "+cl.rule)
		}
		if it == c.planIn || it == c.planOut {
			add(events.ReasonActivePlan, "latest plan/todo state ("+cl.tool+")")
		}
		if c.protectedTool(cl.tool) {
			add(events.ReasonProtectedTool, "tool "+cl.tool+" is in protected_tools")
		}
		if cl.protFile != "" {
			add(events.ReasonProtectedFile, "path matches protected_files pattern "+cl.protFile)
		}
		if it.kind == kInput && cl.failed {
			if c.unresolved(cl) {
				add(events.ReasonUnresolved, "latest failure on its target with no later success")
			}
			if cl.explains != "" {
				add(events.ReasonExplainsFailure, cl.explains)
			}
		}
	}
	if cand != nil && cand.decision == events.Prune {
		if cand.survivor != nil && !c.chainOK(it, cand.survivor) {
			add(events.ReasonUniqueEvidence, "no surviving copy in context: "+cand.survivor.id+" left it or was pruned")
		}
		if cand.rung == events.L4 && cand.source == "" {
			add(events.ReasonUniqueEvidence, "not recoverable from its source: no unchanged versioned source")
		}
		if n := c.el.RecentTurns(); wantRecent && c.requests-it.req < n {
			add(events.ReasonRecentTurn, fmt.Sprintf("%d of %d protected model requests since it entered", c.requests-it.req, n))
			if !it.recentWake {
				it.recentWake = true
				c.wakeAt(it.req+n, it)
			}
		}
	}
	return rs, ev
}

// chainOK reports whether the survivor chain of a pruned item ends at an
// item in context that is not pruned.
func (c *Core) chainOK(it, s *item) bool {
	for hops := 0; hops < 4096; hops++ {
		if s == nil || s == it || s.gone {
			return false
		}
		if !isPrune(s.cur) {
			return true
		}
		s = s.curSurv
	}
	return false
}

func (c *Core) protectedTool(tool string) bool {
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
