package eligibility

import (
	"testing"

	"github.com/prunesched/prunesched/events"
)

func TestL4(t *testing.T) {
	const on = "eligibility:\n  protect_recent_turns: 0\n  l4: true\n  l4_min_age_requests: 3\n"
	cases := []struct {
		name   string
		policy string
		run    func(s *sess)
		wants  []want
	}{
		{"off by default", noRecent, func(s *sess) {
			s.tool("Read", read("docs/old.md"), "old")
			s.reqs(20)
		}, []want{{"c1", "", ""}}},
		{"old, unreferenced, recoverable", on, func(s *sess) {
			s.tool("Read", read("docs/old.md"), "old")
			s.reqs(3)
		}, []want{{"c1", events.Prune, events.ReasonPredicted}}},
		{"not yet old", on, func(s *sess) {
			s.tool("Read", read("docs/old.md"), "old")
			s.reqs(2)
		}, []want{{"c1", "", ""}}},
		{"referenced by a later message", on, func(s *sess) {
			s.tool("Read", read("docs/old.md"), "old")
			s.assistant("m1", "As old.md says, keep the v1 format.")
			s.reqs(5)
		}, []want{{"c1", "", ""}}},
		{"referenced by a later tool input", on, func(s *sess) {
			s.tool("Read", read("docs/old.md"), "old")
			s.tool("Grep", map[string]any{"pattern": "x", "path": "docs/old.md"}, "hit")
			s.reqs(5)
		}, []want{{"c1", "", ""}}},
		{"source changed since: unique evidence", on, func(s *sess) {
			s.tool("Read", read("docs/old.md"), "old")
			s.tool("Bash", bash("python regen.py"), "ok")
			s.reqs(3)
		}, []want{{"c1", events.Keep, events.ReasonUniqueEvidence}}},
		{"state output: unique evidence", on, func(s *sess) {
			s.tool("WebFetch", map[string]any{"url": "https://example.com/limits"}, "max 5 req/s")
			s.reqs(3)
		}, []want{{"c1", events.Keep, events.ReasonUniqueEvidence}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSess(t, tc.policy)
			tc.run(s)
			check(t, s, tc.wants)
		})
	}
}

func TestL4Certificate(t *testing.T) {
	s := newSess(t, "eligibility:\n  protect_recent_turns: 0\n  l4: true\n  l4_min_age_requests: 3\n")
	s.tool("Read", read("docs/old.md"), "old")
	s.reqs(3)
	m := s.want("c1", events.Prune, events.ReasonPredicted)
	if m.Rung != events.L4 || m.Recoverability.Source != "docs/old.md@unchanged-since-e2" {
		t.Fatalf("%+v %+v", m, m.Recoverability)
	}
}
