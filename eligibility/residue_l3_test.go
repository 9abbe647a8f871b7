package eligibility

import (
	"testing"

	"github.com/prunesched/prunesched/events"
)

func TestL3(t *testing.T) {
	// work opens a subtask, reads, edits, runs the tests (c3 passes or not)
	// and leaves c1 (a grep) and c2 (a read) as operational trace.
	work := func(s *sess, testOut string, exit int) {
		s.feed(&events.SubtaskOpened{Subtask: "t1", Title: "fix loader"})
		s.tool("Grep", map[string]any{"pattern": "Load"}, "hits")
		s.tool("Bash", bash("cat loader.go"), "loader")
		s.tool("Edit", edit("loader.go"), "ok") // c3
		s.toolR("Bash", bash("go test ./..."), &events.ToolResult{Output: strPtr(body(testOut, 400)), ExitCode: &exit})
	}
	cases := []struct {
		name  string
		run   func(s *sess)
		wants []want
	}{
		{"verified, consequence recorded", func(s *sess) {
			work(s, "ok", 0)
			s.assistant("m1", "Fixed: Load now returns ErrMissing when the file is absent.")
			s.feed(&events.SubtaskClosed{Subtask: "t1", VerifiedBy: &events.Verification{Kind: "test_run", Item: "c4"}, Consequence: []string{"m1"}})
		}, []want{{"c1", events.Prune, events.ReasonCompletedResidue}, {"c2", events.Prune, events.ReasonCompletedResidue}, {"c4", "", ""}, {"m1", "", ""}}},
		{"agent's say-so", func(s *sess) {
			work(s, "ok", 0)
			s.assistant("m1", "done")
			s.feed(&events.SubtaskClosed{Subtask: "t1", VerifiedBy: &events.Verification{Kind: "agent"}, Consequence: []string{"m1"}})
		}, []want{{"c1", events.Abstain, events.ReasonUnverifiedClosure}}},
		{"no verification", func(s *sess) {
			work(s, "ok", 0)
			s.feed(&events.SubtaskClosed{Subtask: "t1"})
		}, []want{{"c1", events.Abstain, events.ReasonUnverifiedClosure}}},
		{"failing run", func(s *sess) {
			work(s, "FAIL", 1)
			s.assistant("m1", "done")
			s.feed(&events.SubtaskClosed{Subtask: "t1", VerifiedBy: &events.Verification{Kind: "test_run", Item: "c4"}, Consequence: []string{"m1"}})
		}, []want{{"c1", events.Abstain, events.ReasonUnverifiedClosure}}},
		{"run before the last change", func(s *sess) {
			work(s, "ok", 0)
			s.tool("Edit", edit("other.go"), "ok")
			s.assistant("m1", "done")
			s.feed(&events.SubtaskClosed{Subtask: "t1", VerifiedBy: &events.Verification{Kind: "test_run", Item: "c4"}, Consequence: []string{"m1"}})
		}, []want{{"c1", events.Abstain, events.ReasonUnverifiedClosure}}},
		{"verified, no consequence yet", func(s *sess) {
			work(s, "ok", 0)
			s.feed(&events.SubtaskClosed{Subtask: "t1", VerifiedBy: &events.Verification{Kind: "test_run", Item: "c4"}})
		}, []want{{"c1", events.Defer, events.ReasonAwaitConsequence}}},
		{"consequence named before it appears", func(s *sess) {
			work(s, "ok", 0)
			s.feed(&events.SubtaskClosed{Subtask: "t1", VerifiedBy: &events.Verification{Kind: "test_run", Item: "c4"}, Consequence: []string{"m9"}})
			s.assistant("m9", "Decision: keep the v1 format.")
		}, []want{{"c1", events.Prune, events.ReasonCompletedResidue}}},
		{"consequence left the context", func(s *sess) {
			work(s, "ok", 0)
			s.assistant("m1", "Decision recorded.")
			s.feed(&events.PruneRequest{Item: "m1", By: "ana"})
			s.feed(&events.SubtaskClosed{Subtask: "t1", VerifiedBy: &events.Verification{Kind: "test_run", Item: "c4"}, Consequence: []string{"m1"}})
		}, []want{{"c1", events.Abstain, events.ReasonNoConsequence}}},
		{"consequence pruned after the close", func(s *sess) {
			work(s, "ok", 0)
			s.assistant("m1", "Decision recorded.")
			s.feed(&events.SubtaskClosed{Subtask: "t1", VerifiedBy: &events.Verification{Kind: "test_run", Item: "c4"}, Consequence: []string{"m1"}})
			s.feed(&events.PruneRequest{Item: "m1", By: "ana"})
		}, []want{{"c1", events.Abstain, events.ReasonNoConsequence}, {"c2", events.Abstain, events.ReasonNoConsequence}}},
		{"items outside the subtask are untouched", func(s *sess) {
			s.tool("Grep", map[string]any{"pattern": "before"}, "hits")
			work(s, "ok", 0)
			s.assistant("m1", "done")
			s.feed(&events.SubtaskClosed{Subtask: "t1", VerifiedBy: &events.Verification{Kind: "check", Item: "c5"}, Consequence: []string{"m1"}})
		}, []want{{"c1", "", ""}, {"c2", events.Prune, events.ReasonCompletedResidue}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSess(t, withL3)
			tc.run(s)
			check(t, s, tc.wants)
		})
	}
}
