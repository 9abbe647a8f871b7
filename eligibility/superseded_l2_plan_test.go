package eligibility

import (
	"testing"

	"github.com/prunesched/prunesched/events"
)

// todos is a TodoWrite (Claude Code, OpenCode) input of a full plan.
func todos(tag string) map[string]any {
	return map[string]any{"todos": []any{map[string]any{"content": body(tag, 200), "status": "pending"}}}
}

// codexPlan is a Codex update_plan input of a full plan.
func codexPlan(tag string) map[string]any {
	return map[string]any{"plan": []any{map[string]any{"step": body(tag, 200), "status": "pending"}}}
}

// TestSupersededPlan is the L2 plan rule: a full plan call (TodoWrite,
// todowrite, update_plan) replaces the whole plan, so its input and output
// are superseded by the next successful full plan call of the same tool;
// the latest plan stays (ACTIVE_PLAN).
func TestSupersededPlan(t *testing.T) {
	cases := []struct {
		name   string
		policy string
		run    func(s *sess)
		wants  []want
	}{
		{"TodoWrite: the earlier plan is superseded, the latest stays", noRecent, func(s *sess) {
			s.tool("TodoWrite", todos("plan one"), "Todos have been modified successfully")
			s.tool("TodoWrite", todos("plan two"), "Todos have been modified successfully")
		}, []want{{"c1/input", events.Prune, events.ReasonSuperseded}, {"c1", events.Prune, events.ReasonSuperseded},
			{"c2/input", events.Keep, events.ReasonSurvivingCopy}, {"c2", events.Keep, events.ReasonSurvivingCopy}}},
		{"todowrite (OpenCode)", noRecent, func(s *sess) {
			s.tool("todowrite", todos("plan one"), "ok")
			s.tool("todowrite", todos("plan two"), "ok")
		}, []want{{"c1/input", events.Prune, events.ReasonSuperseded}}},
		{"update_plan (Codex)", noRecent, func(s *sess) {
			s.tool("update_plan", codexPlan("plan one"), "Plan updated")
			s.tool("update_plan", codexPlan("plan two"), "Plan updated")
		}, []want{{"c1/input", events.Prune, events.ReasonSuperseded}}},
		{"a run of three: each superseded by the next", noRecent, func(s *sess) {
			s.tool("TodoWrite", todos("one"), "ok")
			s.tool("TodoWrite", todos("two"), "ok")
			s.tool("TodoWrite", todos("three"), "ok")
		}, []want{{"c1/input", events.Prune, events.ReasonSuperseded}, {"c2/input", events.Prune, events.ReasonSuperseded}, {"c3/input", events.Keep, events.ReasonSurvivingCopy}}},
		{"only plan: active plan, no decision", noRecent, func(s *sess) {
			s.tool("TodoWrite", todos("one"), "ok")
		}, []want{{"c1/input", "", ""}, {"c1", "", ""}}},
		{"a failed plan call supersedes nothing", noRecent, func(s *sess) {
			s.tool("TodoWrite", todos("one"), "ok")
			s.fail("TodoWrite", todos("two"), "InputValidationError: todos[0].id is missing")
		}, []want{{"c1/input", "", ""}, {"c1", "", ""}}},
		{"a plan call without the plan list supersedes nothing", noRecent, func(s *sess) {
			s.tool("TodoWrite", todos("one"), "ok")
			s.tool("TodoWrite", map[string]any{"merge": true}, "ok")
		}, []want{{"c1/input", "", ""}}},
		{"an empty plan list supersedes nothing", noRecent, func(s *sess) {
			s.tool("TodoWrite", todos("one"), "ok")
			s.tool("TodoWrite", map[string]any{"todos": []any{}}, "ok")
		}, []want{{"c1/input", "", ""}}},
		{"another plan tool does not replace it", noRecent, func(s *sess) {
			s.tool("TodoWrite", todos("one"), "ok")
			s.tool("update_plan", codexPlan("two"), "ok")
		}, []want{{"c1/input", "", ""}}},
		{"TaskCreate is not a full plan", noRecent, func(s *sess) {
			s.tool("TaskCreate", map[string]any{"subject": body("one", 200)}, "ok")
			s.tool("TaskCreate", map[string]any{"subject": body("two", 200)}, "ok")
		}, []want{{"c1/input", "", ""}}},
		{"recent turns protect the earlier plan", "", func(s *sess) {
			s.tool("TodoWrite", todos("one"), "ok")
			s.tool("TodoWrite", todos("two"), "ok")
		}, []want{{"c1/input", events.Keep, events.ReasonRecentTurn}}},
		{"L2 off: no plan supersession", noRecent + "  rungs: [L0, L1]\n", func(s *sess) {
			s.tool("TodoWrite", todos("one"), "ok")
			s.tool("TodoWrite", todos("two"), "ok")
		}, []want{{"c1/input", "", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSess(t, tc.policy)
			tc.run(s)
			check(t, s, tc.wants)
		})
	}
}

// TestSupersededPlanCertificate: the certificate names the rung, the
// replacing call and the full-replacement contract.
func TestSupersededPlanCertificate(t *testing.T) {
	s := newSess(t, noRecent)
	s.tool("TodoWrite", todos("one"), "ok")
	s.tool("TodoWrite", todos("two"), "ok")
	m := s.want("c1/input", events.Prune, events.ReasonSuperseded)
	if m.Rung != events.L2 || m.Part != "input" || m.Recoverability == nil || m.Recoverability.Survivor != "c2/input" {
		t.Fatalf("mark %+v", m)
	}
	if len(m.Evidence) != 1 || m.Evidence[0].Kind != "subsumption" || m.Evidence[0].Item != "c2/input" || m.Evidence[0].Value != "TodoWrite" {
		t.Fatalf("evidence %+v", m.Evidence)
	}
}
