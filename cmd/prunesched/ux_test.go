package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/placeholder"
	"github.com/prunesched/prunesched/projections"
)

// TestDidYouMean: a mistyped command or flag gets the closest one named,
// exit 2, on stderr; a word close to nothing gets the command list.
func TestDidYouMean(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"anlyze", "x.jsonl"}, `unknown command "anlyze"; did you mean "analyze"?`},
		{[]string{"sesions"}, `did you mean "sessions"?`},
		{[]string{"prox"}, `did you mean "proxy"?`},
		{[]string{"analyze", "--discovr"}, "unknown flag: --discovr (did you mean --discover?)"},
		{[]string{"stats", "--sever=http://x"}, "unknown flag: --sever (did you mean --server?)"},
	} {
		code, out, errOut := runT(t, c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
	code, _, errOut := runT(t, "zzzzzz")
	if code != 2 || strings.Contains(errOut, "did you mean") || !strings.Contains(errOut, "Commands:") {
		t.Errorf("a word close to no command: exit %d\n%s", code, errOut)
	}
	if got := suggest("--", []string{"serve"}); got != "" {
		t.Errorf("suggest(--) = %q", got)
	}
	for a, b := range map[string]string{"anlyze": "analyze", "stast": "stats", "pendign": "pending"} {
		if got := suggest(a, commandNames()); got != b {
			t.Errorf("suggest(%q) = %q, want %q", a, got, b)
		}
	}
}

// TestAnalyzeSaysWhatItSkippedAndFailed: files passed over in a directory
// are reported without --progress; when every file fails, the report says
// nothing was analysed instead of "Saved $0.00 over 0 sessions", and the
// exit status is 1.
func TestAnalyzeSaysWhatItSkippedAndFailed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeBadSample(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "notes.jsonl"), []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runT(t, "analyze", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, errOut)
	}
	if !strings.Contains(errOut, "skipped 1 file(s)") || !strings.Contains(errOut, "notes.jsonl") {
		t.Errorf("the skipped file is not reported without --progress:\n%s", errOut)
	}
	if !strings.HasPrefix(out, "Nothing analysed: the one file failed") || strings.Contains(out, "Saved $") {
		t.Errorf("all files failed, yet:\n%s", out)
	}
	if !strings.Contains(errOut, "all 1 file(s) failed: nothing analysed") || strings.Contains(errOut, "the others were analysed") {
		t.Errorf("stderr:\n%s", errOut)
	}
}

// unitWords are the glossary's unit words (the glossary in docs/cli.md).
var unitWords = []string{projections.UnitContextNow, projections.UnitTokensSent, projections.UnitPromptCost}

// oldUnits are phrasings of a figure that name no unit of the glossary.
var oldUnits = regexp.MustCompile(`\d tok\b|\btok\)|prompt tokens sent|cache cost|rendered now|\$ saved`)

// hasUnit reports whether s names one of the unit words (any case).
func hasUnit(s string) bool {
	for _, u := range unitWords {
		if strings.Contains(strings.ToLower(s), strings.ToLower(u)) {
			return true
		}
	}
	return false
}

// TestOneMeaningPerNumber: analyze, stats, sessions and decisions name
// their figures with the glossary's unit words: every line of analyze's
// report that counts tokens or dollars carries one, the tables of stats
// and sessions say theirs, no output uses a phrasing outside the
// glossary, and the README and the glossary in docs/cli.md define the same words.
func TestOneMeaningPerNumber(t *testing.T) {
	t.Parallel()
	keep := filepath.Join(t.TempDir(), "log")
	code, report, errOut := runT(t, "analyze", "--keep", keep, sample)
	if code != 0 {
		t.Fatalf("analyze: %d %s", code, errOut)
	}
	figure := regexp.MustCompile(`(?i)\btokens?\b|\$\d`)
	for _, l := range strings.Split(report, "\n") {
		if figure.MatchString(l) && !strings.HasPrefix(l, "tokenizer:") && !hasUnit(l) {
			t.Errorf("analyze line with a figure and no unit words: %q", l)
		}
	}
	outputs := map[string]string{"analyze": report}
	for name, args := range map[string][]string{
		"stats":     {"stats", "--data", keep},
		"sessions":  {"sessions", "--data", keep},
		"decisions": {"decisions", "sample", "--data", keep},
		"-v":        {"decisions", "sample", "-v", "--data", keep},
	} {
		code, out, errOut := runT(t, args...)
		if code != 0 {
			t.Fatalf("%s: %d %s", name, code, errOut)
		}
		outputs[name] = out
	}
	want := map[string][]string{
		"analyze":   unitWords,
		"stats":     {projections.UnitTokensSent, projections.UnitPromptCost},
		"sessions":  {projections.UnitPromptCost},
		"decisions": {strings.ToUpper(projections.UnitContextNow)},
		"-v":        {projections.UnitContextNow},
	}
	for name, out := range outputs {
		for _, u := range want[name] {
			if !strings.Contains(out, u) {
				t.Errorf("%s does not name %q:\n%s", name, u, out)
			}
		}
		if m := oldUnits.FindString(out); m != "" {
			t.Errorf("%s uses %q, a unit outside the glossary:\n%s", name, m, out)
		}
	}
	// The headline stats leads with is analyze's, units and all.
	if h, _, _ := strings.Cut(report, "\n"); !strings.HasPrefix(outputs["stats"], h+"\n") {
		t.Errorf("stats' headline differs from analyze's:\n%s\n%s", h, outputs["stats"])
	}
	for _, doc := range []string{"../../README.md", "../../docs/cli.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range unitWords {
			if !strings.Contains(string(b), u) {
				t.Errorf("%s does not use the unit words %q", doc, u)
			}
		}
	}
}

// sampleWithout writes the sample session without the lines matching
// drop, with replace applied to the rest, and returns its path.
func sampleWithout(t *testing.T, drop string, replace ...string) string {
	t.Helper()
	b, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.Split(string(b), "\n") {
		if drop != "" && strings.Contains(l, drop) {
			continue
		}
		kept = append(kept, strings.NewReplacer(replace...).Replace(l))
	}
	p := filepath.Join(t.TempDir(), "session.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(kept, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPrunesWithoutPricedRequest: a session whose prunes no priced request
// followed (here: no model request at all) says so in analyze, stats and
// sessions, instead of "Saved $0.00 ... 0 tokens".
func TestPrunesWithoutPricedRequest(t *testing.T) {
	t.Parallel()
	keep := filepath.Join(t.TempDir(), "log")
	code, report, errOut := runT(t, "analyze", "--keep", keep, sampleWithout(t, `"type":"model_request"`))
	if code != 0 {
		t.Fatalf("analyze: %d %s", code, errOut)
	}
	const note = "prunes decided, not yet applied to any priced request"
	if !strings.Contains(report, note) {
		t.Errorf("analyze does not say the prunes wait for a request:\n%s", report)
	}
	_, stats, _ := runT(t, "stats", "--data", keep)
	if !strings.HasPrefix(stats, "Nothing saved yet: ") || !strings.Contains(stats, note) || strings.Contains(stats, "Saved $") {
		t.Errorf("stats:\n%s", stats)
	}
	if _, js, _ := runT(t, "stats", "--json", "--data", keep); !strings.Contains(js, `"not_yet_saved": "`) || !strings.Contains(js, note) {
		t.Errorf("stats --json has no not_yet_saved:\n%s", js)
	}
	_, sessions, _ := runT(t, "sessions", "--data", keep)
	if !strings.Contains(sessions, "not yet") || !strings.Contains(sessions, "session sample: ") || !strings.Contains(sessions, note) {
		t.Errorf("sessions:\n%s", sessions)
	}
	// With one request, before which nothing was applied: the scheduler
	// waits, and stats says so.
	keep1 := filepath.Join(t.TempDir(), "log")
	first := true
	b, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, `"type":"model_request"`) {
			if !first {
				continue
			}
			first = false
		}
		lines = append(lines, l)
	}
	one := filepath.Join(t.TempDir(), "one.jsonl")
	if err := os.WriteFile(one, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runT(t, "analyze", "--keep", keep1, one); code != 0 {
		t.Fatal(errOut)
	}
	_, stats1, _ := runT(t, "stats", "--data", keep1)
	if !strings.HasPrefix(stats1, "Nothing saved yet: 2 prunes decided, not yet applied to any request (the scheduler waits") || strings.Contains(stats1, "Saved $") {
		t.Errorf("stats, one request and nothing applied:\n%s", stats1)
	}

	// With its requests, the same session says nothing of the kind.
	keep2 := filepath.Join(t.TempDir(), "log")
	if code, _, errOut := runT(t, "analyze", "--keep", keep2, sample); code != 0 {
		t.Fatal(errOut)
	}
	for _, args := range [][]string{{"stats", "--data", keep2}, {"sessions", "--data", keep2}} {
		if _, out, _ := runT(t, args...); strings.Contains(out, "not yet") {
			t.Errorf("%v on a priced session:\n%s", args, out)
		}
	}
}

// TestSessionsTitle: a session whose start names no title is listed by
// the first line of its first user message, as the inspector names it.
func TestSessionsTitle(t *testing.T) {
	t.Parallel()
	keep := filepath.Join(t.TempDir(), "log")
	in := sampleWithout(t, "", `,"title":"Default timeout for config.Load"`, "")
	if code, _, errOut := runT(t, "analyze", "--keep", keep, in); code != 0 {
		t.Fatal(errOut)
	}
	_, out, _ := runT(t, "sessions", "--data", keep)
	if !strings.Contains(out, "config.Load leaves Timeout at 0 when th…") {
		t.Errorf("sessions does not show the first user message as the title:\n%s", out)
	}
}

// TestHelpMatchesTheLab: help describes the lab by what it prints (its
// rows, R and the peers among them), not as "six-condition".
func TestHelpMatchesTheLab(t *testing.T) {
	_, help, _ := runT(t, "help")
	_, lab, _ := runT(t, "lab", "--help")
	for _, out := range []string{help, lab} {
		if strings.Contains(out, "six") {
			t.Errorf("help still counts six conditions:\n%s", out)
		}
	}
	for _, want := range []string{"D+L3", "R (the opt-in recoverable policy)", "DCP", "ROWS", `"holds" or "does not hold"`} {
		if !strings.Contains(lab, want) {
			t.Errorf("lab --help does not mention %q", want)
		}
	}
}

// TestSpanLine: a span reference's evidence reads as line ranges.
func TestSpanLine(t *testing.T) {
	got, ok := spanLine(events.Evidence{Kind: placeholder.SpanEvidenceKind, Item: "t3", Hash: "sha256:ab", Value: "10-57=3-50@130"})
	if want := "span: lines 10-57 are lines 3-50 of item t3 (renumbered from 130)"; !ok || got != want {
		t.Errorf("spanLine = %q, %v; want %q", got, ok, want)
	}
	if _, ok := spanLine(events.Evidence{Kind: "content_hash", Value: "10-57=3-50"}); ok {
		t.Error("spanLine read a content hash as a span")
	}
}

// TestItemsNamedForPeople: the tables that list items name each one's tool
// and source beside its id (analyze, decisions, pending), and analyze names
// the applying request by its number in the session.
func TestItemsNamedForPeople(t *testing.T) {
	t.Parallel()
	keep := filepath.Join(t.TempDir(), "log")
	_, report, _ := runT(t, "analyze", "--keep", keep, sample)
	if !regexp.MustCompile(`(?m)^  t1 +Read +PRUNE .* at request 6 of 8 .* config/config\.go$`).MatchString(report) {
		t.Errorf("analyze's prunes do not name tool, source and request number:\n%s", report)
	}
	_, dec, _ := runT(t, "decisions", "sample", "--data", keep)
	if !strings.HasPrefix(dec, "ITEM  TOOL  DECISION") || !regexp.MustCompile(`(?m)^t3 +Read +PRUNE .* config/config\.go$`).MatchString(dec) {
		t.Errorf("decisions:\n%s", dec)
	}
	if code, _, errOut := runT(t, "prune", "sample", "t2", "--data", keep); code != 0 {
		t.Fatal(errOut)
	}
	_, pend, _ := runT(t, "pending", "sample", "--data", keep)
	if !regexp.MustCompile(`(?m)^t2 +Bash +"go test \./config/" +PRUNE `).MatchString(pend) {
		t.Errorf("pending does not name t2's tool and command:\n%s", pend)
	}
}

// TestImportSaysWhatItSkipped: import, like analyze, reports the files of
// a directory whose format is not detected.
func TestImportSaysWhatItSkipped(t *testing.T) {
	t.Parallel()
	keep, _ := keptSample(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.jsonl"), []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, errOut := runT(t, "import", dir, "--data", keep)
	if !strings.Contains(errOut, "skipped 1 file(s)") || !strings.Contains(errOut, "notes.jsonl") {
		t.Errorf("import does not report the skipped file:\n%s", errOut)
	}
}
