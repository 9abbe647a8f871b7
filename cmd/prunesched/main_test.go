package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runT runs the CLI in-process and returns its exit code and output.
func runT(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runTEnv(t, nil, args...)
}

// runTEnv is runT with an environment.
func runTEnv(t *testing.T, environ map[string]string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, &env{stdout: &out, stderr: &errb, getenv: func(k string) string { return environ[k] }}, args)
	return code, out.String(), errb.String()
}

const sample = "../../examples/sample-session.jsonl"

func TestHelpOnEveryCommand(t *testing.T) {
	for _, h := range []string{"--help", "-h"} {
		if code, out, errOut := runT(t, h); code != 0 || !strings.Contains(out, "Usage: prunesched <command>") || errOut != "" {
			t.Errorf("prunesched %s: exit %d, stdout %q, stderr %q", h, code, out, errOut)
		}
	}
	code, out, _ := runT(t, "help")
	if code != 0 {
		t.Fatalf("help exit %d", code)
	}
	for _, c := range commands() {
		if !strings.Contains(out, c.name) {
			t.Errorf("help does not list %s", c.name)
		}
		for _, h := range []string{"--help", "-h"} {
			code, out, errOut := runT(t, c.name, h)
			if code != 0 {
				t.Errorf("%s %s: exit %d", c.name, h, code)
			}
			if !strings.Contains(out, "Usage: prunesched "+c.name) || errOut != "" {
				t.Errorf("%s %s: usage not on stdout alone:\nstdout %q\nstderr %q", c.name, h, out, errOut)
			}
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	cases := [][]string{
		{"nope"},
		{"analyze"},
		{"analyze", "--bogus", sample},
		{"item", "only-session"},
		{"render", "s", "--time", "yesterday"},
		{"worker", "eligibility"},
		{"worker", "juggler", "--nats", "nats://127.0.0.1:1"},
		{"serve", "--sync", "sometimes"},
		{"proxy", "--upstream", "http://127.0.0.1:1", "--stream-idle-timeout", "-1s"},
	}
	for _, args := range cases {
		if code, _, _ := runT(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestAnalyzeBadInputNamesTheLine(t *testing.T) {
	bad := writeBadSample(t, t.TempDir())
	code, _, errOut := runT(t, "analyze", "--quiet", bad)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(errOut, "bad.jsonl:7") || !strings.Contains(errOut, "data.role") {
		t.Errorf("error does not name the file, line and field: %s", errOut)
	}
}

// analyzeReport mirrors the fields the issue promises in analyze --json.
type analyzeReport struct {
	Tokenizer string `json:"tokenizer"`
	Sessions  []struct {
		Source    string `json:"source"`
		Format    string `json:"format"`
		Session   string `json:"session"`
		Items     *int   `json:"items"`
		ToolCalls *int   `json:"tool_calls"`
		Tokens    struct {
			Raw         *int `json:"raw"`
			Rendered    *int `json:"rendered"`
			Removed     *int `json:"removed"`
			Placeholder *int `json:"placeholder"`
		} `json:"tokens"`
		Decisions []struct {
			Item     string `json:"item"`
			Decision string `json:"decision"`
			Rung     string `json:"rung"`
			Reason   string `json:"reason"`
			Applied  *bool  `json:"applied"`
		} `json:"decisions"`
		Economics *struct {
			Provider   string         `json:"provider"`
			None       *float64       `json:"none"`
			Immediate  *float64       `json:"immediate"`
			Scheduled  *float64       `json:"scheduled"`
			Hindsight  *float64       `json:"hindsight"`
			TokensSent map[string]int `json:"tokens_sent"`
		} `json:"economics"`
		Applications []struct {
			Request         *int   `json:"request"`
			Trigger         string `json:"trigger"`
			FirstDivergence *int   `json:"first_divergence"`
			MutationRadius  *int   `json:"mutation_radius"`
			TokensRemoved   *int   `json:"tokens_removed"`
		} `json:"applications"`
	} `json:"sessions"`
}

func TestAnalyzeJSONBundlesAndRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bundles := filepath.Join(dir, "bundles")
	keep := filepath.Join(dir, "log")
	code, out, errOut := runT(t, "analyze", "--progress", "--json", "--bundles", bundles, "--keep", keep, sample)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "pipeline idle") {
		t.Errorf("no progress on stderr: %q", errOut)
	}
	var rep analyzeReport
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	if !strings.Contains(rep.Tokenizer, "o200k_base") {
		t.Errorf("tokenizer not named: %q", rep.Tokenizer)
	}
	if len(rep.Sessions) != 1 {
		t.Fatalf("%d sessions", len(rep.Sessions))
	}
	s := rep.Sessions[0]
	if s.Source != sample || s.Format != "native" || s.Session != "sample" {
		t.Errorf("source/format/session = %q %q %q", s.Source, s.Format, s.Session)
	}
	if s.Items == nil || *s.Items != 19 || s.ToolCalls == nil || *s.ToolCalls != 7 {
		t.Errorf("items/tool_calls wrong: %v %v", s.Items, s.ToolCalls)
	}
	tk := s.Tokens
	if tk.Raw == nil || tk.Rendered == nil || tk.Removed == nil || tk.Placeholder == nil {
		t.Fatal("tokens fields missing")
	}
	if *tk.Rendered != *tk.Raw-*tk.Removed+*tk.Placeholder {
		t.Errorf("rendered %d != raw %d - removed %d + placeholder %d", *tk.Rendered, *tk.Raw, *tk.Removed, *tk.Placeholder)
	}
	prunes := 0
	for _, d := range s.Decisions {
		if d.Item == "" || d.Decision == "" || d.Reason == "" || d.Applied == nil {
			t.Errorf("incomplete decision %+v", d)
		}
		if d.Decision == "PRUNE" {
			prunes++
		}
		if d.Item == "t2" || d.Item == "t6" || d.Item == "u1" || d.Item == "sys" {
			if d.Decision == "PRUNE" {
				t.Errorf("%s pruned: a test run, user message or system prompt", d.Item)
			}
		}
	}
	if prunes == 0 {
		t.Error("no PRUNE decisions on the sample")
	}
	if e := s.Economics; e == nil || e.Provider != "anthropic" || e.None == nil || e.Immediate == nil || e.Scheduled == nil || e.Hindsight == nil || len(e.TokensSent) != 4 || *e.Hindsight > *e.Scheduled {
		t.Errorf("economics incomplete: %+v", s.Economics)
	}
	for _, a := range s.Applications {
		if a.Request == nil || a.Trigger == "" || a.FirstDivergence == nil || a.MutationRadius == nil || a.TokensRemoved == nil {
			t.Errorf("incomplete application %+v", a)
		}
	}
	for _, ext := range []string{"anthropic.json", "openai.json", "txt"} {
		b, err := os.ReadFile(filepath.Join(bundles, "sample."+ext))
		if err != nil {
			t.Fatalf("bundle %s: %v", ext, err)
		}
		if strings.HasSuffix(ext, ".json") && !json.Valid(b) {
			t.Errorf("bundle %s is not JSON", ext)
		}
	}

	// The kept log answers `prunesched item --data DIR` offline.
	code, out, errOut = runT(t, "item", "--data", keep, "sample", "t1")
	if code != 0 {
		t.Fatalf("item: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "func Load(path string)") {
		t.Errorf("item t1 is not the original read:\n%s", out)
	}
	// A placeholder's recovery handle (#N, the item's position) names the
	// same original.
	txt, err := os.ReadFile(filepath.Join(bundles, "sample.txt"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`── \[(\d+)\] user tool_result \S+ \(t1\)`).FindSubmatch(txt)
	if m == nil {
		t.Fatalf("t1 not in the bundle:\n%s", txt)
	}
	code, byHandle, errOut := runT(t, "item", "--data", keep, "sample", "#"+string(m[1]))
	if code != 0 || byHandle != out {
		t.Errorf("item #%s: exit %d %s\n%s\nwant\n%s", m[1], code, errOut, byHandle, out)
	}
	code, out, errOut = runT(t, "decisions", "--data", keep, "sample")
	if code != 0 || !strings.Contains(out, "DUPLICATE_OUTPUT") {
		t.Errorf("decisions: exit %d\n%s%s", code, out, errOut)
	}
}
