package importers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExpandWalksByFormat(t *testing.T) {
	dir := t.TempDir()
	native := `{"v":1,"id":"e1","type":"session_started","session":"s","time":"2026-01-01T00:00:00Z","data":{"format":"native"}}` + "\n"
	files := map[string]string{
		"a/one.jsonl":                 native,
		"a/b/two.jsonl":               native,
		"a/b/notes.md":                "# notes\n",
		"a/b/x.aider.chat.history.md": "# aider chat started at 2026-01-01 00:00:00\n",
		"a/settings.json":             `[1,2,3]`,
		"a/skip.txt":                  native,
		"c/run.traj":                  `{"trajectory":[]}`,
	}
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	explicit := filepath.Join(dir, "a", "skip.txt")
	got, skipped, err := Expand([]string{dir, explicit})
	if err != nil {
		t.Fatal(err)
	}
	rel := func(ps []string) string {
		var out []string
		for _, p := range ps {
			r, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(r))
		}
		return strings.Join(out, " ")
	}
	if g := rel(got); g != "a/b/two.jsonl a/b/x.aider.chat.history.md a/one.jsonl c/run.traj a/skip.txt" {
		t.Errorf("files %s", g)
	}
	if s := rel(skipped); s != "a/b/notes.md a/settings.json" {
		t.Errorf("skipped %s", s)
	}
	if _, _, err := Expand([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing path is no error")
	}
}

func TestDiscover(t *testing.T) {
	home := t.TempDir()
	for _, p := range []string{".claude/projects/-w-app/s1.jsonl", ".claude/projects/-w-app/s1/subagents/a.jsonl", ".codex/sessions/2026/01/02/rollout-x.jsonl", ".codex/sessions/2026/01/02/other.jsonl"} {
		full := filepath.Join(home, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	found := Discover(home, func(string) string { return "" })
	if len(found) != 3 || len(found[0].Files) != 1 || len(found[1].Files) != 1 || len(found[2].Files) != 0 || found[2].Note != "" {
		t.Fatalf("found %+v", found)
	}
	if !strings.HasSuffix(found[1].Files[0], "rollout-x.jsonl") {
		t.Errorf("codex %v", found[1].Files)
	}
	alt := t.TempDir()
	found = Discover(home, func(k string) string {
		if k == "CODEX_HOME" {
			return alt
		}
		return ""
	})
	if len(found[1].Files) != 0 {
		t.Errorf("CODEX_HOME ignored: %v", found[1].Files)
	}
}
