package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLabCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the lab on one fixture session")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	if code := run(context.Background(), e, []string{"lab", "--seed", "5", "--sessions", "1", "--out", dir, "--json"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Conditions []struct {
			Name      string `json:"name"`
			Reduction struct {
				TokensRemoved *int `json:"tokens_removed"`
			} `json:"reduction"`
			Preservation struct {
				FalsePrunes *int     `json:"false_prunes"`
				Precision   *float64 `json:"precision"`
				Recall      *float64 `json:"recall"`
			} `json:"preservation"`
			Behaviour struct {
				ProbePassRate *float64 `json:"probe_pass_rate"`
			} `json:"behaviour"`
			Economics struct {
				Cost *float64 `json:"cost"`
			} `json:"economics"`
		} `json:"conditions"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("--json output does not parse: %v", err)
	}
	var names []string
	for _, c := range res.Conditions {
		names = append(names, c.Name)
		if c.Reduction.TokensRemoved == nil || c.Preservation.FalsePrunes == nil || c.Preservation.Precision == nil ||
			c.Preservation.Recall == nil || c.Behaviour.ProbePassRate == nil || c.Economics.Cost == nil {
			t.Errorf("%s: a required field is missing", c.Name)
		}
	}
	if got := strings.Join(names, ","); got != "A,B,C,D,D+L3,D-span,G,E,F,DCP,clear_tool_uses,masking" {
		t.Errorf("conditions %s", got)
	}
	for _, f := range []string{"results.json", "results.csv", "saved-vs-false-prunes.svg", "cost.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	js, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil || !bytes.Equal(js, out.Bytes()) {
		t.Errorf("results.json differs from --json output (%v)", err)
	}
	if !strings.Contains(errb.String(), "lab: session") {
		t.Errorf("no progress on stderr: %q", errb.String())
	}
}

func TestLabUsage(t *testing.T) {
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	if code := run(context.Background(), e, []string{"lab", "--sessions", "0"}); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
}
