package eligibility

import (
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/placeholder"
)

type want struct {
	item     string
	decision events.Decision // "" for no decision
	reason   events.Reason
}

func check(t *testing.T, s *sess, wants []want) {
	t.Helper()
	for _, w := range wants {
		if w.decision == "" {
			s.wantNone(w.item)
			continue
		}
		s.want(w.item, w.decision, w.reason)
	}
}

const noRecent = "eligibility:\n  protect_recent_turns: 0\n"

// withL3 is noRecent with the opt-in L3 rung on.
const withL3 = "eligibility:\n  protect_recent_turns: 0\n  rungs: [L0, L1, L2, L3]\n"

func TestL0(t *testing.T) {
	cases := []struct {
		name   string
		policy string
		run    func(s *sess)
		wants  []want
	}{
		{"identical read, newest stays", lastCopy, func(s *sess) {
			s.tool("Read", read("a.go"), "A")
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", events.Prune, events.ReasonDuplicateOutput}, {"c2", events.Keep, events.ReasonSurvivingCopy}}},
		{"keep_copy first", noRecent + "  keep_copy: first\n", func(s *sess) {
			s.tool("Read", read("a.go"), "A")
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", events.Keep, events.ReasonSurvivingCopy}, {"c2", events.Prune, events.ReasonDuplicateOutput}}},
		{"same call different output", lastCopy, func(s *sess) {
			s.tool("Grep", map[string]any{"pattern": "x"}, "A")
			s.tool("Grep", map[string]any{"pattern": "x"}, "B")
		}, []want{{"c1", events.Abstain, events.ReasonDifferentOutput}, {"c2", "", ""}}},
		{"canonical args ignore key order and spacing", lastCopy, func(s *sess) {
			s.tool("Grep", map[string]any{"pattern": "x", "path": "src"}, "A")
			s.feed(&events.ToolCall{Item: "z/input", CallID: "z", Tool: "Grep", Input: []byte(`{ "path" : "src",  "pattern":"x" }`)})
			s.feed(&events.ToolResult{Item: "z", CallID: "z", Output: strPtr(body("A", 400))})
		}, []want{{"c1", events.Prune, events.ReasonDuplicateOutput}, {"z", events.Keep, events.ReasonSurvivingCopy}}},
		{"state tool, nothing between", lastCopy, func(s *sess) {
			s.tool("Grep", map[string]any{"pattern": "x"}, "A")
			s.tool("Read", read("b.go"), "B")
			s.tool("Grep", map[string]any{"pattern": "x"}, "A")
		}, []want{{"c1", events.Prune, events.ReasonDuplicateOutput}}},
		{"state tool across an edit", lastCopy, func(s *sess) {
			s.tool("Grep", map[string]any{"pattern": "x"}, "A")
			s.tool("Edit", edit("b.go"), "ok")
			s.tool("Grep", map[string]any{"pattern": "x"}, "A")
		}, []want{{"c1", events.Abstain, events.ReasonStateChanged}, {"c3", "", ""}}},
		{"git status across a shell write", lastCopy, func(s *sess) {
			s.tool("Bash", bash("git status"), "clean")
			s.tool("Bash", bash("echo hi > notes.txt"), "")
			s.tool("Bash", bash("git status"), "clean")
		}, []want{{"c1", events.Abstain, events.ReasonStateChanged}}},
		{"side-effecting tool never", lastCopy, func(s *sess) {
			s.tool("Write", map[string]any{"file_path": "a.go", "content": "x"}, "written")
			s.tool("Write", map[string]any{"file_path": "a.go", "content": "x"}, "written")
		}, []want{{"c1", events.Abstain, events.ReasonStateChanged}}},
		{"versioned read across an edit, identical bytes", lastCopy, func(s *sess) {
			s.tool("Read", read("a.go"), "A")
			s.tool("Edit", edit("a.go"), "ok")
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", events.Prune, events.ReasonDuplicateOutput}}},
		{"unknown tool", lastCopy, func(s *sess) {
			s.tool("mcp__db__query", map[string]any{"q": "select 1"}, "1")
			s.tool("mcp__db__query", map[string]any{"q": "select 1"}, "1")
		}, []want{{"c1", events.Abstain, events.ReasonUnknownTool}}},
		{"policy override makes a tool pure", lastCopy + "  tools:\n    mcp__db__query: pure\n", func(s *sess) {
			s.tool("mcp__db__query", map[string]any{"q": "select 1"}, "1")
			s.tool("Edit", edit("a.go"), "ok")
			s.tool("mcp__db__query", map[string]any{"q": "select 1"}, "1")
		}, []want{{"c1", events.Prune, events.ReasonDuplicateOutput}}},
		{"importer determinism wins over default", lastCopy, func(s *sess) {
			for i := 0; i < 2; i++ {
				s.toolR("mcp__calc__add", map[string]any{"a": 1}, &events.ToolResult{Output: strPtr(body("2", 400)), Determinism: events.DeterminismPure})
			}
		}, []want{{"c1", events.Prune, events.ReasonDuplicateOutput}}},
		{"chain of three copies", lastCopy, func(s *sess) {
			s.tool("Read", read("a.go"), "A")
			s.tool("Read", read("a.go"), "A")
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", events.Prune, events.ReasonDuplicateOutput}, {"c2", events.Prune, events.ReasonDuplicateOutput}, {"c3", events.Keep, events.ReasonSurvivingCopy}}},
		{"too small to net a saving", lastCopy, func(s *sess) {
			for i := 0; i < 2; i++ {
				s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr("tiny")})
			}
		}, []want{{"c1", "", ""}, {"c2", "", ""}}},
		{"min_prune_tokens", lastCopy + "  min_prune_tokens: 1000\n", func(s *sess) {
			s.tool("Read", read("a.go"), "A")
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", "", ""}}},
		{"a different output breaks the run", lastCopy, func(s *sess) {
			s.tool("Read", read("a.go"), "A")
			s.tool("Read", read("a.go"), "B")
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", events.Abstain, events.ReasonDifferentOutput}, {"c2", events.Abstain, events.ReasonDifferentOutput}, {"c3", "", ""}}},
		{"stored form compares content addresses", lastCopy, func(s *sess) {
			ref := &events.ContentRef{Hash: events.HashBytes([]byte("x")), Bytes: 4000, Tokens: 1000}
			s.toolR("Read", read("a.go"), &events.ToolResult{OutputRef: ref})
			s.toolR("Read", read("a.go"), &events.ToolResult{OutputRef: ref})
		}, []want{{"c1", events.Prune, events.ReasonDuplicateOutput}}},
		{"host-pruned output is not judged", lastCopy, func(s *sess) {
			s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr(body("A", 400)), HostPruned: true})
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", "", ""}, {"c2", "", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSess(t, tc.policy)
			tc.run(s)
			check(t, s, tc.wants)
		})
	}
}

func TestL0Certificate(t *testing.T) {
	s := newSess(t, lastCopy)
	s.tool("Read", read("a.go"), "A")
	s.tool("Read", read("a.go"), "A")
	m := s.want("c1", events.Prune, events.ReasonDuplicateOutput)
	if m.Rung != events.L0 || m.Part != "output" {
		t.Fatalf("rung %q part %q", m.Rung, m.Part)
	}
	kinds := map[string]events.Evidence{}
	for _, e := range m.Evidence {
		kinds[e.Kind] = e
	}
	if kinds["canonical_args"].Value != `{"file_path":"a.go"}` || kinds["canonical_args"].Item != "c2" {
		t.Errorf("canonical_args evidence %+v", kinds["canonical_args"])
	}
	if kinds["content_hash"].Hash != events.HashBytes([]byte(body("A", 400))) {
		t.Errorf("content_hash evidence %+v", kinds["content_hash"])
	}
	r := m.Recoverability
	if r == nil || r.Survivor != "c2" || r.Log != "e2" || r.Blob == "" || r.Command != "prunesched item s1 c1" {
		t.Errorf("recoverability %+v", r)
	}
	// Net of the placeholder this item would leave (placeholder.Tokens),
	// not of a fixed floor.
	ph := placeholder.Tokens(placeholder.Spec{Part: "output", Tool: "Read", Source: "a.go", Rung: events.L0, Reason: m.Reason, Tokens: 400, Survivor: "#3", Item: "#1"})
	if m.TokensEstimated != 400-ph || m.Cause != "e4" || m.CauseIndex != 3 || m.By != By || m.PolicyVersion == "" {
		t.Errorf("mark fields %+v", m)
	}
}
