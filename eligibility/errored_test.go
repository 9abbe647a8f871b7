package eligibility

import (
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/toolspec"
)

// bigWrite is a Write whose content is about 1000 tokens.
func bigWrite(p, tag string) map[string]any {
	return map[string]any{"file_path": p, "content": body(tag, 1000)}
}

func TestErrored(t *testing.T) {
	cases := []struct {
		name   string
		policy string
		run    func(s *sess)
		wants  []want
	}{
		{"unresolved failure keeps its input", "", func(s *sess) {
			s.fail("Write", bigWrite("a.go", "X"), "permission denied")
			s.reqs(6)
		}, []want{{"c1/input", events.Keep, events.ReasonUnresolved}, {"c1", "", ""}}},
		{"resolved, before the horizon: defer", "", func(s *sess) {
			s.fail("Write", bigWrite("a.go", "X"), "permission denied")
			s.req()
			s.tool("Write", bigWrite("a.go", "Y"), "ok")
		}, []want{{"c1/input", events.Defer, events.ReasonHorizon}}},
		{"resolved, after the horizon: prune with residue", "", func(s *sess) {
			s.fail("Write", bigWrite("a.go", "X"), "permission denied")
			s.tool("Write", bigWrite("a.go", "Y"), "ok")
			s.reqs(4)
		}, []want{{"c1/input", events.Prune, events.ReasonErroredInput}, {"c1", "", ""}}},
		{"horizon is configurable", "eligibility:\n  error_horizon_requests: 1\n  protect_recent_turns: 0\n", func(s *sess) {
			s.fail("Write", bigWrite("a.go", "X"), "permission denied")
			s.tool("Write", bigWrite("a.go", "Y"), "ok")
			s.req()
		}, []want{{"c1/input", events.Prune, events.ReasonErroredInput}}},
		{"small input is left alone", "", func(s *sess) {
			s.fail("Write", map[string]any{"file_path": "a.go", "content": "x"}, "permission denied")
			s.tool("Write", map[string]any{"file_path": "a.go", "content": "y"}, "ok")
			s.reqs(5)
		}, []want{{"c1/input", "", ""}}},
		{"later failure on the same target frees the earlier", "", func(s *sess) {
			s.fail("Write", bigWrite("a.go", "X"), "permission denied")
			s.fail("Write", bigWrite("a.go", "Z"), "permission denied")
			s.reqs(4)
		}, []want{{"c1/input", events.Prune, events.ReasonErroredInput}, {"c2/input", events.Keep, events.ReasonUnresolved}}},
		{"error quotes the input", "", func(s *sess) {
			s.fail("Write", map[string]any{"file_path": "a.py", "content": body("def f(:\n    return broken_value_42\n", 1000)}, "SyntaxError: invalid syntax near 'return broken_value_42'")
			s.tool("Write", bigWrite("a.py", "ok"), "ok")
			s.reqs(5)
		}, []want{{"c1/input", events.Keep, events.ReasonExplainsFailure}}},
		{"error points into the input", "", func(s *sess) {
			s.fail("Write", bigWrite("a.json", "X"), "invalid JSON at line 12 column 4")
			s.tool("Write", bigWrite("a.json", "Y"), "ok")
			s.reqs(5)
		}, []want{{"c1/input", events.Keep, events.ReasonExplainsFailure}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSess(t, tc.policy)
			tc.run(s)
			check(t, s, tc.wants)
		})
	}
}

func TestErroredResidue(t *testing.T) {
	s := newSess(t, "")
	s.fail("Write", bigWrite("src/a.go", "X"), "permission denied")
	s.tool("Write", bigWrite("src/a.go", "Y"), "ok")
	s.reqs(4)
	m := s.want("c1/input", events.Prune, events.ReasonErroredInput)
	if m.Part != "input" || m.Rung != events.RungNone {
		t.Fatalf("part %q rung %q", m.Part, m.Rung)
	}
	r := m.Residue
	if r == nil || r.Tool != "Write" || r.ErrorType != "tool_error" || r.ErrorMessage != "permission denied" {
		t.Fatalf("residue %+v", r)
	}
	if !strings.Contains(r.Skeleton, `"file_path":"src/a.go"`) || !strings.Contains(r.Skeleton, `"content":<4000 bytes>`) {
		t.Fatalf("skeleton %s", r.Skeleton)
	}
	if m.Recoverability == nil || m.Recoverability.Log != "e1" || m.Recoverability.Blob != "" {
		t.Fatalf("recoverability %+v", m.Recoverability)
	}
	// The DEFER came first, then the PRUNE at the horizon.
	var seq []string
	for _, e := range s.marks {
		mk := e.Data.(*events.Mark)
		if mk.Item == "c1/input" {
			seq = append(seq, string(mk.Decision)+" "+string(mk.Reason))
		}
	}
	want := []string{"KEEP UNRESOLVED_ERROR", "DEFER WAITING_HORIZON", "PRUNE ERRORED_INPUT"}
	if strings.Join(seq, ",") != strings.Join(want, ",") {
		t.Fatalf("mark sequence %v, want %v", seq, want)
	}
}

func TestExplainsFailure(t *testing.T) {
	_, v, _ := toolspec.CanonicalJSON([]byte(`{"file_path":"a/b/c.go","old_string":"func Load() error {\n  return nil\n}"}`))
	cases := []struct {
		msg  string
		want bool
	}{
		{"String to replace not found in file.\nString: func Load() error {", true},
		{"permission denied", false},
		{"file a/b/c.go not found", false}, // paths stay in the skeleton
		{"unexpected token at position 17", true},
		{"", false},
	}
	for _, tc := range cases {
		if got := explainsFailure(v, tc.msg) != ""; got != tc.want {
			t.Errorf("%q: got %v want %v", tc.msg, got, tc.want)
		}
	}
}
