package eligibility

import (
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
)

func TestL2(t *testing.T) {
	rd := func(p string, off, lim int) map[string]any {
		return map[string]any{"file_path": p, "offset": off, "limit": lim}
	}
	cases := []struct {
		name  string
		run   func(s *sess)
		wants []want
	}{
		{"full read after an edit supersedes earlier reads", func(s *sess) {
			s.tool("Read", read("config.go"), "v1")
			s.tool("Read", rd("config.go", 10, 30), "v1 part")
			s.tool("Edit", edit("config.go"), "ok")
			s.tool("Read", read("config.go"), "v2")
		}, []want{{"c1", events.Prune, events.ReasonSuperseded}, {"c2", events.Prune, events.ReasonSuperseded}, {"c4", events.Keep, events.ReasonSurvivingCopy}}},
		{"partial read after an edit does not", func(s *sess) {
			s.tool("Read", read("config.go"), "v1")
			s.tool("Edit", edit("config.go"), "ok")
			s.tool("Read", rd("config.go", 1, 50), "v2 part")
		}, []want{{"c1", "", ""}}},
		{"full read after an unscoped command does not", func(s *sess) {
			s.tool("Read", read("config.go"), "v1")
			s.tool("Bash", bash("python gen.py"), "done")
			s.tool("Read", read("config.go"), "v2")
		}, []want{{"c1", events.Abstain, events.ReasonDifferentOutput}}},
		{"covering range at the same version", func(s *sess) {
			s.tool("Read", rd("a.go", 10, 30), "part")
			s.tool("Read", rd("a.go", 1, 100), "bigger part")
		}, []want{{"c1", events.Prune, events.ReasonSuperseded}}},
		{"full read covers a range at the same version", func(s *sess) {
			s.tool("Bash", bash("sed -n '10,40p' a.go"), "part")
			s.tool("Read", read("a.go"), "all")
		}, []want{{"c1", events.Prune, events.ReasonSuperseded}}},
		{"non-covering range", func(s *sess) {
			s.tool("Read", rd("a.go", 10, 30), "part")
			s.tool("Read", rd("a.go", 20, 100), "other part")
		}, []want{{"c1", "", ""}}},
		{"covering range across a write", func(s *sess) {
			s.tool("Read", rd("a.go", 10, 30), "part")
			s.tool("Edit", edit("a.go"), "ok")
			s.tool("Read", rd("a.go", 1, 100), "bigger part")
		}, []want{{"c1", "", ""}}},
		{"ranges of different tools do not compare", func(s *sess) {
			s.tool("Bash", bash("sed -n '10,20p' a.go"), "part")
			s.tool("Read", rd("a.go", 1, 100), "bigger part")
		}, []want{{"c1", "", ""}}},
		{"a write to a directory above counts as an edit", func(s *sess) {
			s.tool("Read", read("src/pkg/a.go"), "v1")
			s.tool("Bash", bash("git rm -r src/pkg"), "rm")
			s.tool("Read", read("src/pkg/a.go"), "v2")
		}, []want{{"c1", events.Prune, events.ReasonSuperseded}}},
		{"test logs are never superseded", func(s *sess) {
			s.tool("Bash", bash("go test ./..."), "FAIL x")
			s.tool("Edit", edit("x.go"), "ok")
			s.tool("Bash", bash("go test ./..."), "ok")
		}, []want{{"c1", events.Abstain, events.ReasonDifferentOutput}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSess(t, noRecent)
			tc.run(s)
			check(t, s, tc.wants)
		})
	}
}

func TestL2Certificate(t *testing.T) {
	s := newSess(t, noRecent)
	s.tool("Read", map[string]any{"file_path": "config.go", "offset": 10, "limit": 31}, "v1")
	s.tool("Edit", edit("config.go"), "ok")
	s.tool("Read", read("config.go"), "v2")
	m := s.want("c1", events.Prune, events.ReasonSuperseded)
	if m.Rung != events.L2 || len(m.Evidence) != 1 || m.Evidence[0].Kind != "subsumption" {
		t.Fatalf("%+v", m)
	}
	d := m.Evidence[0].Detail
	if !strings.Contains(d, "read config.go lines 1-EOF") || !strings.Contains(d, "after the recorded edit e3") || !strings.Contains(d, "lines 10-40") {
		t.Fatalf("detail %q", d)
	}
}
