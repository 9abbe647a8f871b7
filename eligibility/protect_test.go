package eligibility

import (
	"testing"

	"github.com/prunesched/prunesched/events"
)

func TestProtection(t *testing.T) {
	cases := []struct {
		name   string
		policy string
		run    func(s *sess)
		wants  []want
	}{
		{"recent turns block, then release", "eligibility:\n  keep_copy: last\n", func(s *sess) {
			s.tool("Read", read("a.go"), "A")
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", events.Keep, events.ReasonRecentTurn}}},
		{"recent turns released after N requests", "eligibility:\n  keep_copy: last\n", func(s *sess) {
			s.tool("Read", read("a.go"), "A")
			s.tool("Read", read("a.go"), "A")
			s.reqs(2)
		}, []want{{"c1", events.Prune, events.ReasonDuplicateOutput}}},
		{"project rule file", noRecent, func(s *sess) {
			s.tool("Read", read("/repo/AGENTS.md"), "rules")
			s.tool("Read", read("/repo/AGENTS.md"), "rules")
		}, []want{{"c2", events.Keep, events.ReasonProjectRule}}},
		{"project rule read through the shell", noRecent, func(s *sess) {
			s.tool("Bash", bash("cat .github/copilot-instructions.md"), "rules")
			s.tool("Bash", bash("cat .github/copilot-instructions.md"), "rules")
		}, []want{{"c2", events.Keep, events.ReasonProjectRule}}},
		{"protected tool", noRecent + "  protected_tools: [grep]\n", func(s *sess) {
			s.tool("Grep", map[string]any{"pattern": "x"}, "A")
			s.tool("Grep", map[string]any{"pattern": "x"}, "A")
		}, []want{{"c2", events.Keep, events.ReasonProtectedTool}}},
		{"protected file pattern", noRecent + "  protected_files: ['migrations/*.sql']\n", func(s *sess) {
			s.tool("Read", read("db/migrations/001.sql"), "A")
			s.tool("Read", read("db/migrations/001.sql"), "A")
		}, []want{{"c2", events.Keep, events.ReasonProtectedFile}}}, // a pattern with "/" matches the path end
		{"protected file pattern on the path end", noRecent + "  protected_files: ['migrations/*.sql']\n", func(s *sess) {
			s.tool("Read", read("migrations/001.sql"), "A")
			s.tool("Read", read("migrations/001.sql"), "A")
		}, []want{{"c2", events.Keep, events.ReasonProtectedFile}}},
		{"active plan", noRecent, func(s *sess) {
			s.tool("TodoWrite", map[string]any{"todos": []string{body("x", 300)}}, "plan")
		}, []want{{"c1", "", ""}, {"c1/input", "", ""}}},
		{"user and system messages", noRecent, func(s *sess) {
			s.feed(&events.Message{Item: "sys", Role: events.RoleSystem, Text: "be careful"})
			s.user("u1", "never touch prod")
		}, []want{{"sys", "", ""}, {"u1", "", ""}}},
		{"survivor chain broken: unique evidence", noRecent, func(s *sess) {
			s.tool("Read", read("a.go"), "A")
			s.tool("Read", read("a.go"), "A")
			s.feed(&events.PruneRequest{Item: "c1", By: "ana"})
		}, []want{{"c2", events.Keep, events.ReasonUniqueEvidence}, {"c1", events.Prune, events.ReasonManualPrune}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSess(t, tc.policy)
			tc.run(s)
			check(t, s, tc.wants)
		})
	}
}

func TestMatchAny(t *testing.T) {
	cases := []struct {
		pats []string
		p    string
		want string
	}{
		{[]string{"CLAUDE.md"}, "sub/dir/CLAUDE.md", "CLAUDE.md"},
		{[]string{".cursor/rules/*"}, "/repo/.cursor/rules/go.mdc", ".cursor/rules/*"},
		{[]string{"*.sql"}, "db/x.sql", "*.sql"},
		{[]string{"AGENTS.md"}, "AGENTS.md.bak", ""},
	}
	for _, tc := range cases {
		if got := matchAny(tc.pats, tc.p); got != tc.want {
			t.Errorf("%v %q: got %q want %q", tc.pats, tc.p, got, tc.want)
		}
	}
}
