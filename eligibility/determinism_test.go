package eligibility

import (
	"encoding/json"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/toolspec"
	"github.com/prunesched/prunesched/policy"
)

func TestToolClasses(t *testing.T) {
	cases := []struct {
		tool     string
		args     string
		class    events.Determinism
		readPath string
		policy   map[string]string
	}{
		{"Read", `{"file_path":"a.go"}`, events.DeterminismVersioned, "a.go", nil},
		{"read", `{"filePath":"/repo/a.go"}`, events.DeterminismVersioned, "a.go", nil},
		{"Grep", `{"pattern":"x"}`, events.DeterminismState, "", nil},
		{"Glob", `{"pattern":"*.go"}`, events.DeterminismState, "", nil},
		{"list", `{"path":"."}`, events.DeterminismState, "", nil},
		{"WebFetch", `{"url":"https://x"}`, events.DeterminismState, "", nil},
		{"webfetch", `{"url":"https://x"}`, events.DeterminismState, "", nil},
		{"Edit", `{"file_path":"a.go"}`, events.DeterminismSideEffect, "", nil},
		{"MultiEdit", `{"file_path":"a.go"}`, events.DeterminismSideEffect, "", nil},
		{"NotebookEdit", `{"notebook_path":"a.ipynb"}`, events.DeterminismSideEffect, "", nil},
		{"apply_patch", `{"patchText":"*** Begin Patch\n*** Update File: a.go\n"}`, events.DeterminismSideEffect, "", nil},
		{"TodoWrite", `{"todos":[]}`, events.DeterminismSideEffect, "", nil},
		{"Task", `{"prompt":"x"}`, events.DeterminismSideEffect, "", nil},
		{"Bash", `{"command":"cat a.go"}`, events.DeterminismVersioned, "a.go", nil},
		{"bash", `{"command":"git status"}`, events.DeterminismState, "", nil},
		{"shell", `{"command":["bash","-lc","sed -n '1,5p' a.go"]}`, events.DeterminismVersioned, "a.go", nil},
		{"open", `{"path":"a.py","line_number":10}`, events.DeterminismVersioned, "a.py", nil},
		{"goto", `{"line_number":10}`, events.DeterminismState, "", nil},
		{"search_dir", `{"search_term":"x"}`, events.DeterminismState, "", nil},
		{"find_file", `{"file_name":"x"}`, events.DeterminismState, "", nil},
		{"edit", `{"filePath":"a.go"}`, events.DeterminismSideEffect, "", nil},
		{"create", `{"filename":"a.py"}`, events.DeterminismSideEffect, "", nil},
		{"submit", `{}`, events.DeterminismSideEffect, "", nil},
		{"str_replace_editor", `{"command":"view","path":"/repo/a.py"}`, events.DeterminismVersioned, "a.py", nil},
		{"str_replace_editor", `{"command":"str_replace","path":"a.py"}`, events.DeterminismSideEffect, "", nil},
		{"mcp__x__y", `{}`, events.DeterminismState, "", nil},
		{"mcp__x__y", `{"path":"a.go"}`, events.DeterminismVersioned, "a.go", map[string]string{"mcp__x__y": "versioned"}},
		{"Read", `{"file_path":"a.go"}`, events.DeterminismState, "", map[string]string{"Read": "state"}},
	}
	for _, tc := range cases {
		t.Run(tc.tool+tc.args, func(t *testing.T) {
			p := policy.Default()
			p.Eligibility.Tools = tc.policy
			c := New(p, "", "s")
			c.cwd = "/repo"
			cl, _, _ := c.newCall("x", tc.tool, json.RawMessage(tc.args))
			if cl.class != tc.class || cl.readPath != tc.readPath {
				t.Fatalf("class %q path %q, want %q %q", cl.class, cl.readPath, tc.class, tc.readPath)
			}
		})
	}
}

func TestWritesScope(t *testing.T) {
	cases := []struct {
		tool, args string
		writes     []string
		unscoped   bool
	}{
		{"Edit", `{"file_path":"a.go"}`, []string{"a.go"}, false},
		{"apply_patch", `{"patchText":"*** Update File: a.go\n*** Add File: b.go\n"}`, []string{"a.go", "b.go"}, false},
		{"apply_patch", `"--- a/x.go\n+++ b/x.go\n"`, []string{"x.go", "x.go"}, false},
		{"apply_patch", `{"patchText":"garbage"}`, nil, true},
		{"Task", `{"prompt":"fix"}`, nil, true},
		{"edit", `{"text":"x"}`, nil, true},
		{"TodoWrite", `{"todos":[]}`, nil, false},
		{"mcp__fs__write", `{"path":"a"}`, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.tool+tc.args, func(t *testing.T) {
			c := New(policy.Default(), "", "s")
			_, w, u := c.newCall("x", tc.tool, json.RawMessage(tc.args))
			if len(w) != len(tc.writes) || u != tc.unscoped {
				t.Fatalf("writes %q unscoped %v, want %q %v", w, u, tc.writes, tc.unscoped)
			}
		})
	}
}

func TestSkeleton(t *testing.T) {
	_, v, _ := toolspec.CanonicalJSON([]byte(`{"file_path":"src/a.go","content":"` + body("x", 100) + `","replace_all":false,"n":3}`))
	got := skeleton(v, nil)
	want := `{"content":<400 bytes>,"file_path":"src/a.go","n":3,"replace_all":false}`
	if got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}
