package eligibility

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
)

// agentAsk feeds the agent's request to remove item and returns the mark
// caused by it: every agent request gets one, whatever the decision.
func (s *sess) agentAsk(item, reason string) events.Mark {
	s.t.Helper()
	out := s.feed(&events.PruneRequest{Item: item, By: events.ByAgent, Reason: reason})
	for _, e := range out {
		if m := e.Data.(*events.Mark); m.Item == item {
			if m.Cause != fmt.Sprintf("e%d", s.n) {
				s.t.Fatalf("%s: mark caused by %s, want the request e%d", item, m.Cause, s.n)
			}
			return *m
		}
	}
	s.t.Fatalf("agent request on %s: no mark caused by it (marks %+v)", item, out)
	return events.Mark{}
}

// TestAgentRequest: the agent's removal request is a proposal judged with
// every protection. Accepted, it is PRUNE AGENT_REQUEST by the agent;
// refused, a KEEP naming the protection; either way a mark caused by the
// request. A refused request does not stand: it never turns into a prune
// later when the protection lifts.
func TestAgentRequest(t *testing.T) {
	const recent = "eligibility:\n  protect_recent_turns: 2\n"
	cases := []struct {
		name   string
		policy string
		run    func(s *sess) string // returns the item asked about
		want   events.Decision
		reason events.Reason
		prot   []events.Reason
	}{
		{"unique output, past the recent turns: accepted", recent, func(s *sess) string {
			id := s.tool("Bash", bash("go test ./..."), "PASS ok")
			s.reqs(2)
			return id
		}, events.Prune, events.ReasonAgentRequest, nil},
		{"a tool's input: accepted", recent, func(s *sess) string {
			s.tool("Write", map[string]any{"file_path": "a.go", "content": body("package a", 300)}, "ok")
			s.reqs(2)
			return "c1/input"
		}, events.Prune, events.ReasonAgentRequest, nil},
		{"inside the recent turns: refused", recent, func(s *sess) string {
			id := s.tool("Bash", bash("go test ./..."), "PASS ok")
			s.reqs(1)
			return id
		}, events.Keep, events.ReasonRecentTurn, []events.Reason{events.ReasonRecentTurn}},
		{"user message: refused", noRecent, func(s *sess) string {
			s.user("u1", body("never touch prod", 200))
			s.req()
			return "u1"
		}, events.Keep, events.ReasonUserMessage, []events.Reason{events.ReasonUserMessage}},
		{"system prompt: refused", noRecent, func(s *sess) string {
			s.feed(&events.Message{Item: "sys", Role: events.RoleSystem, Text: body("be careful", 200)})
			return "sys"
		}, events.Keep, events.ReasonSystemPrompt, []events.Reason{events.ReasonSystemPrompt}},
		{"project rules: refused", noRecent, func(s *sess) string {
			return s.tool("Read", read("/repo/CLAUDE.md"), "rules")
		}, events.Keep, events.ReasonProjectRule, []events.Reason{events.ReasonProjectRule}},
		{"protected tool: refused", noRecent + "  protected_tools: [grep]\n", func(s *sess) string {
			return s.tool("Grep", map[string]any{"pattern": "x"}, "A")
		}, events.Keep, events.ReasonProtectedTool, []events.Reason{events.ReasonProtectedTool}},
		{"active plan: refused", noRecent, func(s *sess) string {
			s.tool("TodoWrite", map[string]any{"todos": []string{body("x", 300)}}, "plan")
			return "c1/input"
		}, events.Keep, events.ReasonActivePlan, []events.Reason{events.ReasonActivePlan}},
		{"unresolved error's output: refused", noRecent, func(s *sess) string {
			return s.fail("Bash", bash("make"), body("make: *** [all] Error 2", 300))
		}, events.Keep, events.ReasonUnresolved, []events.Reason{events.ReasonUnresolved}},
		{"surviving copy of a pruned duplicate: unique evidence", noRecent, func(s *sess) string {
			s.tool("Read", read("a.go"), "A")
			s.tool("Read", read("a.go"), "A")
			return "c1"
		}, events.Keep, events.ReasonUniqueEvidence, []events.Reason{events.ReasonUniqueEvidence}},
		{"pinned: refused", noRecent, func(s *sess) string {
			id := s.tool("Bash", bash("ls"), "files")
			s.feed(&events.Pin{Item: id, By: "ana"})
			return id
		}, events.Keep, events.ReasonPinned, []events.Reason{events.ReasonPinned}},
		{"too small to save anything", noRecent, func(s *sess) string {
			return s.toolR("Bash", bash("true"), &events.ToolResult{Output: strPtr("ok")})
		}, events.Keep, events.ReasonNoSaving, nil},
		{"a rule's own prune stands", noRecent, func(s *sess) string {
			s.tool("Read", read("a.go"), "A")
			s.tool("Read", read("a.go"), "A")
			return "c2"
		}, events.Prune, events.ReasonDuplicateOutput, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSess(t, tc.policy)
			item := tc.run(s)
			m := s.agentAsk(item, "done with it")
			if m.Decision != tc.want || m.Reason != tc.reason {
				t.Fatalf("got %s %s %s (evidence %+v), want %s %s", m.Decision, m.Rung, m.Reason, m.Evidence, tc.want, tc.reason)
			}
			if len(tc.prot) > 0 && (len(m.Protection) == 0 || m.Protection[0] != tc.prot[0]) {
				t.Fatalf("protection %v, want %v first", m.Protection, tc.prot)
			}
			if m.Reason != events.ReasonDuplicateOutput && events.Control(&m) != events.ControlAgent {
				t.Fatalf("control %q (by %q), want agent", events.Control(&m), m.By)
			}
			var ev *events.Evidence
			for i := range m.Evidence {
				if m.Evidence[i].Kind == "agent_request" {
					ev = &m.Evidence[i]
				}
			}
			if ev == nil || ev.Detail != "removal requested by the agent: done with it" {
				t.Fatalf("agent_request evidence %+v", m.Evidence)
			}
			if m.Decision == events.Prune && m.Recoverability == nil {
				t.Fatal("accepted without recoverability")
			}
		})
	}
}

// TestAgentRefusalDoesNotStand: a request refused for a recent turn stays
// refused once the turns pass; asked again then, it is accepted; and an
// accepted request yields to a later pin and comes back after the unpin.
func TestAgentRefusalDoesNotStand(t *testing.T) {
	s := newSess(t, "eligibility:\n  protect_recent_turns: 2\n")
	id := s.tool("Bash", bash("go test ./..."), "PASS ok")
	if m := s.agentAsk(id, "old"); m.Reason != events.ReasonRecentTurn {
		t.Fatalf("first ask: %s", m.Reason)
	}
	s.reqs(3)
	s.notPruned(id)
	if m := s.agentAsk(id, "old"); m.Reason != events.ReasonAgentRequest {
		t.Fatalf("second ask: %s %+v", m.Reason, m.Evidence)
	}
	s.feed(&events.Pin{Item: id, By: "ana"})
	s.want(id, events.Keep, events.ReasonPinned)
	s.feed(&events.Unpin{Item: id})
	s.want(id, events.Prune, events.ReasonAgentRequest)
	s.feed(&events.Restore{Item: id, By: "ana"})
	s.want(id, events.Keep, events.ReasonRestored)
}

// TestAgentRequestOnAssistantTextIgnored: assistant text and thinking are
// not the agent's to remove; such a request makes no mark.
func TestAgentRequestOnAssistantTextIgnored(t *testing.T) {
	s := newSess(t, noRecent)
	s.assistant("a1", body("I will now", 300))
	if out := s.feed(&events.PruneRequest{Item: "a1", By: events.ByAgent}); len(out) != 0 {
		t.Fatalf("marks %+v", out)
	}
	s.wantNone("a1")
}

// TestContextToolAnswersProtectedFromRules: a recovered original is never
// cut by a rule as a copy of what it recovers, but the agent may ask to
// drop it.
func TestContextToolAnswersProtectedFromRules(t *testing.T) {
	s := newSess(t, noRecent)
	lines := strings.Repeat("func a() { return 1234567 }\n", 60)
	s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr(lines)})
	s.toolR("mcp__prunesched__context_recover", map[string]any{"handle": "#1"}, &events.ToolResult{Output: strPtr(lines)})
	s.notPruned("c2")
	if m := s.agentAsk("c2", "read it"); m.Decision != events.Prune || m.Reason != events.ReasonAgentRequest {
		t.Fatalf("agent's request on its recovered item: %s %s %+v", m.Decision, m.Reason, m.Evidence)
	}
}
