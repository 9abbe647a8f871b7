package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"unicode/utf8"
)

// keptSample analyzes the sample into a kept log and returns its directory
// and the analyze --json report.
func keptSample(t *testing.T) (string, analyzeReport) {
	t.Helper()
	keep := filepath.Join(t.TempDir(), "log")
	code, out, errOut := runT(t, "analyze", "--json", "--keep", keep, sample)
	if code != 0 {
		t.Fatalf("analyze: exit %d: %s", code, errOut)
	}
	var rep analyzeReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	return keep, rep
}

// TestFlagsAnywhereAndDecisions: flags after the positional arguments; -v
// fits 100 columns; after a manual prune, decisions says pending exactly
// for what pending lists; KEEP rows never say pending; the manual prune's
// row says CONTROL person, the others rule.
func TestFlagsAnywhereAndDecisions(t *testing.T) {
	t.Parallel()
	keep, _ := keptSample(t)
	code, out, errOut := runT(t, "decisions", "sample", "-v", "--data", keep)
	if code != 0 {
		t.Fatalf("decisions SESSION -v: exit %d: %s", code, errOut)
	}
	for _, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > verboseWidth {
			t.Errorf("decisions -v line of %d columns: %q", n, l)
		}
	}
	if code, out, errOut = runT(t, "item", "sample", "t1", "--json", "--data", keep); code != 0 || !json.Valid([]byte(out)) {
		t.Errorf("item S I --json: exit %d %s", code, errOut)
	}
	if code, _, errOut = runT(t, "bundle", "sample", "--format", "text", "--data", keep); code != 0 {
		t.Errorf("bundle S --format text: exit %d %s", code, errOut)
	}
	if code, _, errOut = runT(t, "prune", "sample", "t2", "--data", keep, "--reason", "test"); code != 0 {
		t.Fatalf("prune: exit %d %s", code, errOut)
	}
	_, pend, _ := runT(t, "pending", "sample", "--data", keep)
	_, dec, _ := runT(t, "decisions", "sample", "--data", keep)
	if !strings.Contains(pend, "t2") {
		t.Errorf("pending after a manual prune does not list t2:\n%s", pend)
	}
	for _, l := range strings.Split(dec, "\n")[1:] {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		isPending := strings.Contains(l, " pending ")
		listed := strings.Contains(pend, "\n"+f[0]+" ")
		if isPending != listed {
			t.Errorf("decisions and pending disagree on %s:\n%s\n%s", f[0], dec, pend)
		}
		// ITEM TOOL DECISION CONTROL ...
		if (f[2] == "KEEP" || f[2] == "ABSTAIN") && isPending {
			t.Errorf("%s row says pending: %s", f[2], l)
		}
		// CONTROL: the manual prune is a person's, the rest the rules'.
		if want := map[bool]string{true: "person", false: "rule"}[f[0] == "t2"]; f[3] != want {
			t.Errorf("%s: control %q, want %q: %s", f[0], f[3], want, l)
		}
	}
}

// TestStatsAndSessions: the savings stats and sessions print are the ones
// analyze reports for the same log.
func TestStatsAndSessions(t *testing.T) {
	t.Parallel()
	keep, rep := keptSample(t)
	eco := rep.Sessions[0].Economics
	code, out, errOut := runT(t, "stats", "--json", "--data", keep)
	if code != 0 {
		t.Fatalf("stats: exit %d: %s", code, errOut)
	}
	var st struct {
		Sessions []struct {
			Session string `json:"session"`
			Agent   string `json:"agent"`
			Savings struct {
				SavedUSD          float64 `json:"saved_usd"`
				ImmediateSavedUSD float64 `json:"immediate_saved_usd"`
				SavedTokens       int     `json:"saved_tokens"`
			} `json:"savings"`
		} `json:"sessions"`
		Days []struct {
			Day string `json:"day"`
		} `json:"days"`
		Total struct {
			SavedUSD float64 `json:"saved_usd"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, out)
	}
	if len(st.Sessions) != 1 || st.Sessions[0].Session != "sample" || len(st.Days) == 0 {
		t.Fatalf("stats: %+v", st)
	}
	s := st.Sessions[0].Savings
	if math.Abs(s.SavedUSD-(*eco.None-*eco.Scheduled)) > 1e-9 || math.Abs(s.ImmediateSavedUSD-(*eco.None-*eco.Immediate)) > 1e-9 ||
		s.SavedTokens != eco.TokensSent["none"]-eco.TokensSent["scheduled"] || math.Abs(st.Total.SavedUSD-s.SavedUSD) > 1e-9 {
		t.Errorf("stats %+v disagree with analyze's economics %+v", s, eco)
	}
	code, out, errOut = runT(t, "stats", "sample", "--data", keep)
	if code != 0 || !strings.HasPrefix(out, "Saved $") || !strings.Contains(out, "DAY (UTC)") {
		t.Errorf("stats: exit %d %s\n%s", code, errOut, out)
	}
	code, out, errOut = runT(t, "sessions", "--data", keep)
	if code != 0 || !strings.Contains(out, "SAVED") || !strings.Contains(out, "sample") || !strings.Contains(out, "3/3") {
		t.Errorf("sessions: exit %d %s\n%s", code, errOut, out)
	}
}

func TestVersionFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-12-02T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	got := readBuildInfo(bi, true)
	want := buildInfo{Version: "v1.2.3", Revision: "0123abcd", Time: "2026-12-02T10:00:00Z", Modified: true, Go: "go1.26.8"}
	if got != want {
		t.Errorf("readBuildInfo = %+v, want %+v", got, want)
	}
	if got := readBuildInfo(nil, false); got.Version != "(devel)" || got.Revision != "" {
		t.Errorf("no build info: %+v", got)
	}
	code, out, _ := runT(t, "version")
	if code != 0 || !strings.HasPrefix(out, "prunesched ") || !strings.Contains(out, "revision:") {
		t.Errorf("version: exit %d\n%s", code, out)
	}
}
