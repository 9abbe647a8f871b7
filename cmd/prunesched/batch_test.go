package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeBadSample writes the sample with a bad role on line 7 into dir.
func writeBadSample(t *testing.T, dir string) string {
	t.Helper()
	good, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(good), "\n")
	lines[6] = strings.Replace(lines[6], `"role":"user"`, `"role":"robot"`, 1)
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return bad
}

// TestAnalyzeBatchKeepsGoing: a directory (read recursively, a README in it
// passed over) holding a bad file and a good one: the good one is reported,
// the bad one named with file:line in a summary on stderr, exit 1; with
// --strict the first error stops everything.
func TestAnalyzeBatchKeepsGoing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sub := filepath.Join(dir, "nested", "deeper")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	writeBadSample(t, dir)
	good, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "good.jsonl"), good, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runT(t, "analyze", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, errOut)
	}
	if !strings.Contains(out, "good.jsonl") || !strings.HasPrefix(out, "Saved $") {
		t.Errorf("the good file is not reported, headline first:\n%s", out)
	}
	if !strings.Contains(errOut, "1 of 2 file(s) failed") || !strings.Contains(errOut, "bad.jsonl:7") {
		t.Errorf("no summary naming bad.jsonl:7:\n%s", errOut)
	}
	code, out, errOut = runT(t, "analyze", "--strict", dir)
	if code != 1 || out != "" || !strings.Contains(errOut, "bad.jsonl:7") {
		t.Errorf("--strict: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestAnalyzeDiscover finds Claude Code and Codex transcripts under HOME.
func TestAnalyzeDiscover(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	good, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".claude/projects/-src-app/sess.jsonl", ".codex/sessions/2026/12/01/rollout-2026-12-01T10-00-00-abc.jsonl"} {
		full := filepath.Join(home, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		// Native events stand in for the agents' formats: discovery picks
		// files by place, the importer by content.
		if err := os.WriteFile(full, good, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(home, ".local/share/opencode"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runTEnv(t, map[string]string{"HOME": home}, "analyze", "--discover", "--summary")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"claude-code: 1 transcript(s)", "codex: 1 transcript(s)", "opencode export ID"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if !strings.Contains(out, "| sess.jsonl |") || !strings.Contains(out, "| rollout-2026-12-01T10-00-00-abc.jsonl |") {
		t.Errorf("both transcripts not analysed:\n%s", out)
	}
}

// TestImportBatchKeepsGoing: import takes a directory; the bad file is
// named with its line, the good one imported, exit 1.
func TestImportBatchKeepsGoing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeBadSample(t, dir)
	good, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "good.jsonl"), good, 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	code, out, errOut := runT(t, "import", dir, "--data", data)
	if code != 1 || !strings.Contains(out, "good.jsonl: session sample") || !strings.Contains(errOut, "bad.jsonl:7") || !strings.Contains(errOut, "1 of 2 file(s) failed") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if code, out, _ = runT(t, "sessions", "--ids", "--data", data); code != 0 || strings.TrimSpace(out) != "sample" {
		t.Errorf("sessions after import: exit %d %q", code, out)
	}
}
