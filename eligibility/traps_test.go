package eligibility

import (
	"testing"

	"github.com/prunesched/prunesched/events"
)

// The traps an aggressive pruner falls into. None of these items may be
// pruned, under the default policy and with L4 on.
func TestTraps(t *testing.T) {
	policies := map[string]string{
		"default":   "",
		"no recent": noRecent,
		"l4 on":     "eligibility:\n  protect_recent_turns: 0\n  l4: true\n  l4_min_age_requests: 2\n",
	}
	cases := []struct {
		name    string
		run     func(s *sess)
		safe    []string
		abstain map[string]events.Reason // expected ABSTAIN (no-recent policy)
	}{
		{"same file read twice, different output, no recorded write", func(s *sess) {
			s.tool("Read", read("config.json"), `{"retries": 3}`)
			s.req()
			s.tool("Read", read("config.json"), `{"retries": 5}`)
			s.reqs(12)
		}, []string{"c1", "c2"}, map[string]events.Reason{"c1": events.ReasonDifferentOutput}},
		{"git status repeated across an edit, identical output", func(s *sess) {
			s.tool("Bash", bash("git status --short"), " M config.go")
			s.tool("Edit", edit("config.go"), "ok")
			s.tool("Bash", bash("git status --short"), " M config.go")
			s.reqs(12)
		}, []string{"c1", "c3"}, map[string]events.Reason{"c1": events.ReasonStateChanged}},
		{"test run repeated across an edit, identical output", func(s *sess) {
			s.tool("Bash", bash("pytest -q"), "1 failed, 4 passed")
			s.tool("Edit", edit("app.py"), "ok")
			s.tool("Bash", bash("pytest -q"), "1 failed, 4 passed")
			s.reqs(12)
		}, []string{"c1", "c3"}, map[string]events.Reason{"c1": events.ReasonStateChanged}},
		{"a constraint that exists only inside one tool output", func(s *sess) {
			s.tool("WebFetch", map[string]any{"url": "https://api.example.com/docs"}, "Rate limit: never exceed 5 requests per second per tenant")
			s.tool("Bash", bash("curl -s https://api.example.com/limits"), "tenant quota 1000/day")
			s.reqs(12)
		}, []string{"c1", "c2"}, nil},
		{"an identifier a later message depends on", func(s *sess) {
			s.tool("Bash", bash("./scripts/create_user.sh --name bot"), "created user id usr_8841f2")
			s.tool("Grep", map[string]any{"pattern": "migration_id", "path": "db"}, "db/schema.sql: migration_id = 0042_add_users")
			s.reqs(3)
			s.assistant("m1", "I will reference usr_8841f2 and 0042_add_users in the fix.")
			s.reqs(12)
		}, []string{"c1", "c2"}, nil},
		{"a failed call whose input explains the failure", func(s *sess) {
			s.fail("Edit", map[string]any{"file_path": "loader.go", "old_string": body("func Load(path string) (*Config, error) {\n\tdata, err := os.ReadFile(path)\n", 600), "new_string": body("x", 600)},
				"String to replace not found in file.\nString: func Load(path string) (*Config, error) {")
			s.tool("Edit", edit("loader.go"), "ok")
			s.reqs(12)
		}, []string{"c1/input", "c1"}, nil},
		{"an old item that is a project rule", func(s *sess) {
			s.tool("Read", read("CLAUDE.md"), "Never run migrations against prod; use make migrate-staging.")
			s.tool("Read", read("CLAUDE.md"), "Never run migrations against prod; use make migrate-staging.")
			s.reqs(30)
		}, []string{"c1", "c2"}, nil},
		{"the error message of a failed call", func(s *sess) {
			s.fail("Write", map[string]any{"file_path": "a.go", "content": body("x", 1000)}, "disk full")
			s.fail("Write", map[string]any{"file_path": "a.go", "content": body("x", 1000)}, "disk full")
			s.reqs(12)
		}, []string{"c1", "c2"}, nil},
	}
	for pname, pol := range policies {
		for _, tc := range cases {
			t.Run(pname+"/"+tc.name, func(t *testing.T) {
				s := newSess(t, pol)
				tc.run(s)
				s.notPruned(tc.safe...)
				if pol == noRecent {
					for it, r := range tc.abstain {
						s.want(it, events.Abstain, r)
					}
				}
			})
		}
	}
}
