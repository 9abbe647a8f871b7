//go:build golden

package main

// The behaviour goldens: `analyze --json` over every shared trace and the
// lab's results.json (seed 0), byte for byte, as taken before the
// refactors of issue 20. They run without -race in .ci/run (a stage of
// their own: `go test -tags golden -run TestGolden ./cmd/prunesched/`);
// `-update` rewrites them after a change meant to alter behaviour.

import (
	"bytes"
	"compress/gzip"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the behaviour goldens")

// goldenTraces is every shared trace, in the README's command's order.
func goldenTraces(t *testing.T) (dir string, files []string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "traces"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pat := range []string{"*/*.jsonl", "*/*.json", "*/*.traj", "*/*.md"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Skipf("no shared traces in %s", dir)
	}
	return dir, files
}

// checkGolden compares got with the gzipped golden name, or rewrites it.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".gz")
	if *update {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		zw.Write(got)
		zw.Close()
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	want, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	line := 0
	for line < len(gl) && line < len(wl) && gl[line] == wl[line] {
		line++
	}
	out := filepath.Join(t.TempDir(), name)
	_ = os.WriteFile(out, got, 0o644)
	g, w := "(end)", "(end)"
	if line < len(gl) {
		g = gl[line]
	}
	if line < len(wl) {
		w = wl[line]
	}
	t.Errorf("%s differs from %s from line %d:\n  got:  %.300s\n  want: %.300s\n(the whole output: %s; -update if the change is meant)", name, path, line+1, g, w, out)
}

// TestGoldenAnalyze: analyze --json over every shared trace is unchanged.
func TestGoldenAnalyze(t *testing.T) {
	dir, files := goldenTraces(t)
	args := append([]string{"analyze", "--json", "--quiet"}, files...)
	code, out, errOut := runT(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	checkGolden(t, "analyze.json", []byte(strings.ReplaceAll(out, dir, "TRACES")))
}

// TestGoldenLab: the lab's results.json (seed 0, 12 sessions) is unchanged.
func TestGoldenLab(t *testing.T) {
	code, out, errOut := runT(t, "lab", "--json", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	checkGolden(t, "lab-results.json", []byte(out))
}
