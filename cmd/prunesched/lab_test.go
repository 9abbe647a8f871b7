package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestLabCommand(t *testing.T) {
	t.Parallel()
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
	if got := strings.Join(names, ","); got != "A,B,C,D,D+L3,D-span,R,G,E,F,DCP,clear_tool_uses,masking" {
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

// TestLabModelFlags: bad --model flags are usage errors naming the flag;
// model-only flags need --model; the API key is never shown.
func TestLabModelFlags(t *testing.T) {
	const key = "sk-SECRET-lab-key"
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"not a URL", []string{"--model", "localhost:8000"}, "--model"},
		{"ftp", []string{"--model", "ftp://h/v1"}, "--model"},
		{"empty name", []string{"--model", "http://h/v1", "--model-name", " "}, "--model-name"},
		{"negative recoveries", []string{"--model", "http://h/v1", "--max-recoveries", "-1"}, "--max-recoveries"},
		{"zero timeout", []string{"--model", "http://h/v1", "--model-timeout", "0s"}, "--model-timeout"},
		{"missing key variable", []string{"--model", "http://h/v1", "--api-key-env", "NO_SUCH_KEY_VAR"}, "NO_SUCH_KEY_VAR"},
		{"unknown row", []string{"--model", "http://h/v1", "--conditions", "D,Z"}, `--conditions: no row "Z"`},
		{"model flag without --model", []string{"--conditions", "D"}, "--conditions needs --model"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			e := &env{stdout: &out, stderr: &errb, getenv: func(v string) string {
				if v == "LAB_KEY" {
					return key
				}
				return ""
			}}
			if code := run(context.Background(), e, append([]string{"lab"}, tc.args...)); code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.want)
			}
		})
	}
}

// TestLabModelRun: --model runs the probes against an OpenAI-compatible
// endpoint (here one that never knows), sends the key as a bearer token
// and never prints it, reports per row as JSON, and shows progress per
// row; an unreachable endpoint names the URL and the flag.
func TestLabModelRun(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the lab's probes on one fixture session")
	}
	const key = "sk-SECRET-lab-key"
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"I do not know."}}]}`)
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(v string) string {
		if v == "LAB_KEY" {
			return key
		}
		return ""
	}}
	args := []string{"lab", "--seed", "5", "--sessions", "1", "--model", srv.URL + "/v1", "--model-name", "m", "--api-key-env", "LAB_KEY", "--conditions", "A,D", "--json"}
	if code := run(context.Background(), e, args); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep struct {
		Model string `json:"model"`
		Rows  []struct {
			Condition       string `json:"condition"`
			Probes          int    `json:"probes"`
			EvidencePresent int    `json:"evidence_present"`
			Succeeded       *int   `json:"succeeded"`
			RecoveryCalls   *int   `json:"recovery_calls"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out.String())
	}
	if rep.Model != "m" || len(rep.Rows) != 2 || rep.Rows[0].Condition != "A" || rep.Rows[1].Condition != "D" {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Rows {
		if r.Probes == 0 || r.EvidencePresent != r.Probes || r.Succeeded == nil || *r.Succeeded != 0 || r.RecoveryCalls == nil {
			t.Errorf("row %+v", r)
		}
	}
	mu.Lock()
	if len(auth) == 0 || auth[0] != "Bearer "+key {
		t.Errorf("authorization %q", auth)
	}
	mu.Unlock()
	for _, s := range []string{out.String(), errb.String()} {
		if strings.Contains(s, key) {
			t.Error("the API key is printed")
		}
	}
	if !strings.Contains(errb.String(), "model: row A") || !strings.Contains(errb.String(), "model: row D done") {
		t.Errorf("no progress per row on stderr: %q", errb.String())
	}

	srv.Close()
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), e, args); code != 1 {
		t.Fatalf("unreachable endpoint: exit %d", code)
	}
	if msg := errb.String(); !strings.Contains(msg, srv.URL+"/v1") || !strings.Contains(msg, "--model") || !strings.Contains(msg, "unreachable") || strings.Contains(msg, key) {
		t.Errorf("unreachable endpoint: %q", msg)
	}
}
