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
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/policy"
)

var update = flag.Bool("update", false, "rewrite the behaviour goldens")

// goldenTraces is every shared trace, in the order of docs/results.md's command.
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
// The files go to a temporary directory, not the package's lab-out.
func TestGoldenLab(t *testing.T) {
	code, out, errOut := runT(t, "lab", "--json", "--quiet", "--out", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	checkGolden(t, "lab-results.json", []byte(out))
}

// TestGoldenEconomicsAPI: GET /v1/sessions/{session}/economics over every
// shared trace is unchanged (the service's JSON, byte for byte, one session
// a line after its name).
func TestGoldenEconomicsAPI(t *testing.T) {
	dir, files := goldenTraces(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	svc, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), HTTPListen: "127.0.0.1:0", Policy: policy.Default()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	var sessions []string
	seen := map[string]bool{}
	for _, f := range files {
		ss, err := importers.Import(f, importers.FormatAuto)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, s := range ss {
			if len(s.Events) == 0 || seen[s.Events[0].Session] {
				continue
			}
			seen[s.Events[0].Session] = true
			if _, err := svc.Store.Append(ctx, s.Events); err != nil {
				t.Fatalf("append %s: %v", f, err)
			}
			sessions = append(sessions, s.Events[0].Session)
		}
	}
	if err := svc.Pipeline.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, s := range sessions {
		resp, err := http.Get("http://" + svc.HTTPAddr + "/v1/sessions/" + url.PathEscape(s) + "/economics")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("economics of %s: %d %v %s", s, resp.StatusCode, err, b)
		}
		fmt.Fprintf(&out, "%s\n%s\n", s, bytes.TrimRight(b, "\n"))
	}
	checkGolden(t, "economics-api.json", []byte(strings.ReplaceAll(out.String(), dir, "TRACES")))
}
