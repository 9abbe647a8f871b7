package eligibility

import (
	"testing"

	"github.com/prunesched/prunesched/events"
)

func TestL1(t *testing.T) {
	withSrc := func(out, version, hash string) *events.ToolResult {
		return &events.ToolResult{Output: strPtr(body(out, 400)), Source: &events.SourceIdentity{Kind: "file", Path: "a.go", Version: version, ContentHash: hash}}
	}
	h := events.HashBytes([]byte("src"))
	cases := []struct {
		name  string
		run   func(s *sess)
		wants []want
	}{
		{"same path spelled differently, identical output", func(s *sess) {
			s.tool("Read", read("./a.go"), "A")
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", events.Prune, events.ReasonSameSource}, {"c2", events.Keep, events.ReasonSurvivingCopy}}},
		{"identical output but a write between", func(s *sess) {
			s.tool("Read", read("./a.go"), "A")
			s.tool("Edit", edit("a.go"), "ok")
			s.tool("Read", read("a.go"), "A")
		}, []want{{"c1", events.Prune, events.ReasonSuperseded}}}, // L2, not L1
		{"equal source versions, different rendering", func(s *sess) {
			s.toolR("Read", read("a.go"), withSrc("A", "v1", ""))
			s.toolR("Read", read("a.go"), withSrc("A+reminder", "v1", ""))
		}, []want{{"c1", events.Prune, events.ReasonSameSource}}},
		{"equal versions but a write between", func(s *sess) {
			s.toolR("Read", read("a.go"), withSrc("A", "v1", ""))
			s.tool("Edit", edit("a.go"), "ok")
			s.toolR("Read", read("a.go"), withSrc("B", "v1", ""))
		}, []want{{"c1", events.Prune, events.ReasonSuperseded}}}, // L2 after the edit, not L1
		{"equal content hashes prove it across a write", func(s *sess) {
			s.toolR("Read", read("a.go"), withSrc("A", "", h))
			s.tool("Edit", edit("a.go"), "ok")
			s.toolR("Read", read("a.go"), withSrc("A2", "", h))
		}, []want{{"c1", events.Prune, events.ReasonSameSource}}},
		{"different versions", func(s *sess) {
			s.toolR("Read", read("a.go"), withSrc("A", "v1", ""))
			s.toolR("Read", read("a.go"), withSrc("B", "v2", ""))
		}, []want{{"c1", events.Abstain, events.ReasonDifferentOutput}}},
		{"Read and cat of the whole file with equal content hashes", func(s *sess) {
			s.toolR("Read", read("a.go"), withSrc("A numbered", "", h))
			s.toolR("Bash", bash("cat a.go"), withSrc("A plain", "", h))
		}, []want{{"c1", events.Prune, events.ReasonSameSource}}},
		{"partial ranges of different tools never compare", func(s *sess) {
			s.tool("Read", map[string]any{"file_path": "a.go", "offset": 10, "limit": 5}, "A")
			s.tool("Bash", bash("sed -n '10,14p' a.go"), "A")
		}, []want{{"c1", "", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSess(t, lastCopy)
			tc.run(s)
			check(t, s, tc.wants)
		})
	}
}

func TestL1Recoverability(t *testing.T) {
	s := newSess(t, lastCopy)
	src := func(out string) *events.ToolResult {
		return &events.ToolResult{Output: strPtr(body(out, 400)), Source: &events.SourceIdentity{Kind: "file", Path: "a.go", Version: "abc123"}}
	}
	s.toolR("Read", read("a.go"), src("A"))
	s.toolR("Read", read("a.go"), src("A'"))
	m := s.want("c1", events.Prune, events.ReasonSameSource)
	if m.Rung != events.L1 || m.Recoverability.Source != "a.go@abc123" || m.Recoverability.Survivor != "c2" {
		t.Fatalf("%+v %+v", m, m.Recoverability)
	}
}
