package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/policy"
)

// compareTrace is the smallest shared Claude Code trace.
func compareTrace(t *testing.T) string {
	t.Helper()
	f := filepath.Join("..", "..", "..", "shared", "traces", "claude-code", "entirecli-60-1ac0eb4d69-0.jsonl")
	if _, err := os.Stat(f); err != nil {
		t.Skipf("shared traces not available: %v", err)
	}
	return f
}

// TestAnalyzeCompare: analyze --compare --json gives the comparison list
// with every documented field, per session and in total, every row under
// both timings (masking with the window asked for, the user's policy as its
// own row), the same JSON twice, and the chart; a bad file among good ones
// is reported while the others are compared.
func TestAnalyzeCompare(t *testing.T) {
	t.Parallel()
	trace := compareTrace(t)
	dir := t.TempDir()
	pol := filepath.Join(dir, "mine.yaml")
	if err := os.WriteFile(pol, []byte("eligibility:\n  span_refs: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	svg := filepath.Join(dir, "c.svg")
	args := []string{"analyze", trace, bad, "--compare", "--json", "--mask-window", "4", "--policy", pol, "--svg", svg, "--quiet"}
	code, out, errOut := runT(t, args...)
	if code != 1 || !strings.Contains(errOut, "bad.jsonl") {
		t.Fatalf("exit %d (want 1: one file failed), stderr %q", code, errOut)
	}
	var res struct {
		Note         string           `json:"note"`
		RecoveryNote string           `json:"recovery_note"`
		Answer       int              `json:"recovery_answer_tokens"`
		Requests     int              `json:"requests"`
		Comparison   []map[string]any `json:"comparison"`
		Sessions     []struct {
			Comparison []map[string]any `json:"comparison"`
		} `json:"sessions"`
		Failed []struct{ File string } `json:"failed"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(res.Note, "not ground truth") {
		t.Errorf("note %q does not label the proxy", res.Note)
	}
	if res.Answer != 60 || !strings.Contains(res.RecoveryNote, "60 output tokens") || res.Requests == 0 {
		t.Errorf("recovery assumption not stated: %d tokens, note %q, %d requests", res.Answer, res.RecoveryNote, res.Requests)
	}
	if len(res.Sessions) != 1 || len(res.Failed) != 1 {
		t.Fatalf("%d sessions, %d failed; want 1 and 1", len(res.Sessions), len(res.Failed))
	}
	want := map[string]bool{"B": false, "C": false, "D": false, "D-span": false, "D+L3": false, "R": false, "E": false, "DCP": false,
		"clear_tool_uses": false, "masking-4": false, "policy mine.yaml": false}
	for _, list := range [][]map[string]any{res.Comparison, res.Sessions[0].Comparison} {
		timings := map[string]int{}
		for _, e := range list {
			for _, k := range []string{"policy", "timing", "tokens_sent", "cost_usd", "items_removed", "tokens_removed", "later_used", "recoveries", "cost_with_recoveries"} {
				if _, ok := e[k]; !ok {
					t.Errorf("entry %v has no %q", e, k)
				}
			}
			p, _ := e["policy"].(string)
			if _, ok := want[p]; !ok {
				t.Errorf("unexpected row %q", p)
			}
			want[p] = true
			timings[e["timing"].(string)]++
		}
		if timings["immediate"] != len(want) || timings["scheduled"] != len(want) {
			t.Errorf("timings %v, want %d of each", timings, len(want))
		}
	}
	for p, seen := range want {
		if !seen {
			t.Errorf("row %q missing", p)
		}
	}
	if b, err := os.ReadFile(svg); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("chart: %v", err)
	}
	if _, again, _ := runT(t, args...); again != out {
		t.Error("the same files gave another comparison")
	}
}

// TestAnalyzeCompareRecommend: --recommend prints a policy file that
// --policy accepts, naming its bound and every candidate tried; a bound
// nothing can meet still prints a valid file.
func TestAnalyzeCompareRecommend(t *testing.T) {
	t.Parallel()
	trace := compareTrace(t)
	code, out, errOut := runT(t, "analyze", "--compare", "--recommend", "--risk", "0", "--quiet", trace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"later_used <= 0 over 1 sessions", "candidates tried", "default"} {
		if !strings.Contains(out, want) {
			t.Errorf("recommendation lacks %q:\n%s", want, out)
		}
	}
	if _, err := policy.Parse([]byte(out)); err != nil {
		t.Errorf("the recommendation is not a policy file: %v\n%s", err, out)
	}
	f := filepath.Join(t.TempDir(), "rec.yaml")
	if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runT(t, "analyze", "--policy", f, "--quiet", "--summary", trace); code != 0 {
		t.Errorf("analyze --policy with the recommendation: exit %d: %s", code, errOut)
	}
}

// TestAnalyzeCompareRecoveryBudget: --recovery-budget bounds the
// recommendation in recoveries per 100 requests, and says so; JSON
// carries the budget.
func TestAnalyzeCompareRecoveryBudget(t *testing.T) {
	t.Parallel()
	trace := compareTrace(t)
	code, out, errOut := runT(t, "analyze", "--compare", "--recommend", "--risk", "1000", "--recovery-budget", "0", "--quiet", trace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"recoveries <= 0 per 100 requests", "recoveries 0", "USD with them"} {
		if !strings.Contains(out, want) {
			t.Errorf("recommendation lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = runT(t, "analyze", "--compare", "--recommend", "--recovery-budget", "2.5", "--json", "--quiet", trace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		Recommendation struct {
			RecoveryBudget *float64 `json:"recovery_budget"`
			Best           *struct {
				Recoveries int `json:"recoveries"`
			} `json:"best"`
		} `json:"recommendation"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if b := res.Recommendation.RecoveryBudget; b == nil || *b != 2.5 || res.Recommendation.Best == nil {
		t.Errorf("recommendation JSON: %s", out)
	}
}

// TestAnalyzeCompareUsage: the compare flags need --compare, the budget
// --recommend; a bad value is a usage error naming its flag.
func TestAnalyzeCompareUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"analyze", "--recommend", "x.jsonl"}, "--recommend"},
		{[]string{"analyze", "--svg", "c.svg", "x.jsonl"}, "--svg"},
		{[]string{"analyze", "--compare", "--risk", "-1", "x.jsonl"}, "--risk"},
		{[]string{"analyze", "--recovery-budget", "1", "x.jsonl"}, "--recovery-budget"},
		{[]string{"analyze", "--compare", "--recovery-budget", "1", "x.jsonl"}, "--recovery-budget"},
		{[]string{"analyze", "--compare", "--recommend", "--recovery-budget", "-1", "x.jsonl"}, "--recovery-budget"},
		{[]string{"analyze", "--compare", "--recommend", "--recovery-budget", "NaN", "x.jsonl"}, "--recovery-budget"},
		{[]string{"analyze", "--compare", "--recommend", "--recovery-budget", "Inf", "x.jsonl"}, "--recovery-budget"},
		{[]string{"analyze", "--compare", "--recommend", "--recovery-budget", "lots", "x.jsonl"}, "recovery-budget"},
	} {
		if code, _, errOut := runT(t, tc.args...); code != 2 || !strings.Contains(errOut, tc.flag) {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming %s", tc.args, code, errOut, tc.flag)
		}
	}
}
