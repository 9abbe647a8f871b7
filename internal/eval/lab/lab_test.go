package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/eval/lab/fixtures"
	"github.com/prunesched/prunesched/policy"
)

// small is a fixture-sized run shared by the tests: 2 sessions of about a
// hundred tool calls each.
var small = Config{Seed: 3, Sessions: 2, MinCalls: 25, MaxCalls: 50}

var (
	runOnce sync.Once
	runRes  *Results
	runErr  error
)

func smallRun(t *testing.T) *Results {
	t.Helper()
	runOnce.Do(func() { runRes, runErr = Run(context.Background(), small) })
	if runErr != nil {
		t.Fatal(runErr)
	}
	return runRes
}

func TestRows(t *testing.T) {
	r := smallRun(t)
	var names []string
	for _, c := range r.Conditions {
		names = append(names, c.Name)
	}
	want := "A B C D D+L3 D-span R G E F DCP clear_tool_uses masking"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("rows %q, want %q", got, want)
	}
	if a := r.row(CondA); a.Behaviour.ProbePassRate != 1 || a.Preservation.Prunes != 0 || a.Reduction.TokensRemoved != 0 {
		t.Errorf("A: pass %.3f prunes %d removed %d: raw history must hold every probe's evidence and prune nothing", a.Behaviour.ProbePassRate, a.Preservation.Prunes, a.Reduction.TokensRemoved)
	}
	if len(r.Falsification) != 7 {
		t.Errorf("%d falsification clauses", len(r.Falsification))
	}
}

// B, C and D run the production cores and must never false-prune.
func TestProductionConditionsNeverFalsePrune(t *testing.T) {
	r := smallRun(t)
	for _, name := range []string{CondB, CondC, CondD} {
		c := r.row(name)
		if c.Preservation.FalsePrunes != 0 || c.Behaviour.ProbePassRate != 1 {
			t.Errorf("%s: %d false prunes %v, pass rate %.3f", name, c.Preservation.FalsePrunes, c.Preservation.FalsePruneExamples, c.Behaviour.ProbePassRate)
		}
		if c.Preservation.SafePrunes == 0 {
			t.Errorf("%s pruned nothing safe: the experiment cannot show a benefit", name)
		}
	}
	// Known finding, kept visible rather than hidden: D+L3 (the opt-in L3
	// rung; it is off by default because of this) prunes a constraint that lives only inside a tool output of a
	// verified, completed subtask whose recorded consequence does not
	// mention it. L3 trusts "consequence recorded elsewhere" to cover every
	// unique fact of the work; the fixture's trap shows it does not.
	if sh := r.row(CondL3); sh.Preservation.FalsePrunes > 0 {
		t.Logf("KNOWN FINDING: D+L3 false prunes %d: %v", sh.Preservation.FalsePrunes, sh.Preservation.FalsePruneExamples)
		for _, ex := range sh.Preservation.FalsePruneExamples {
			if !strings.Contains(ex, "constraint_in_completed_subtask") {
				t.Errorf("D+L3 false prune outside the known L3 trap: %s", ex)
			}
		}
	}
}

// E must be able to show harm: it prunes traps.
func TestAggressiveHarms(t *testing.T) {
	e := smallRun(t).row(CondE)
	if e.Preservation.FalsePrunes == 0 || e.Preservation.TrapsPruned == 0 || e.Behaviour.ProbePassRate >= 1 {
		t.Fatalf("E: false %d traps %d pass %.3f: the aggressive condition shows no harm", e.Preservation.FalsePrunes, e.Preservation.TrapsPruned, e.Behaviour.ProbePassRate)
	}
}

func TestOracle(t *testing.T) {
	f := smallRun(t).row(CondF)
	p := f.Preservation
	if p.Precision != 1 || p.Recall != 1 || p.FalsePrunes != 0 || p.UnprovenPrunes != 0 || f.Behaviour.ProbePassRate != 1 {
		t.Fatalf("F: precision %.3f recall %.3f false %d unproven %d pass %.3f", p.Precision, p.Recall, p.FalsePrunes, p.UnprovenPrunes, f.Behaviour.ProbePassRate)
	}
}

// The production run (worker order, Decide before Observe) makes the same
// applications as a scheduler.Simulate-style replay of its marks.
func TestProductionRunMatchesReplay(t *testing.T) {
	t.Parallel()
	fx, err := fixtures.Generate(fixtures.Config{Seed: small.Seed, Sessions: 1, MinCalls: small.MinCalls, MaxCalls: small.MaxCalls}, tokens.New())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range mustConditions(t) {
		if c.pol == nil {
			continue
		}
		r, err := evaluate(context.Background(), c, fx, fx.Sessions[0], tokens.New())
		if err != nil {
			t.Fatal(err)
		}
		if !r.prodSame {
			t.Errorf("%s: production applications differ from the replay's", c.name)
		}
	}
}

func TestDeterministic(t *testing.T) {
	t.Parallel()
	a := smallRun(t)
	cfg := small
	cfg.Workers = 1
	b, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Fatal("same seed, different results.json")
	}
}

func TestWriters(t *testing.T) {
	r := smallRun(t)
	var tab, csvb, s1, s2 bytes.Buffer
	for _, f := range []struct {
		w   *bytes.Buffer
		run func() error
	}{
		{&tab, func() error { return WriteTable(&tab, r) }},
		{&csvb, func() error { return WriteCSV(&csvb, r) }},
		{&s1, func() error { return WriteSavedVsFalseSVG(&s1, r) }},
		{&s2, func() error { return WriteCostSVG(&s2, r) }},
	} {
		if err := f.run(); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"ROWS", "REDUCTION", "PRESERVATION", "BEHAVIOUR", "answered with recovery", "false after recovery", "AGENT REQUESTS", "ECONOMICS", "FALSIFICATION", "evidence presence, not model success"} {
		if !strings.Contains(tab.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
	if n := strings.Count(csvb.String(), "\n"); n != len(r.Conditions)+1 {
		t.Errorf("csv has %d lines, want header + %d rows", n, len(r.Conditions))
	}
	for _, s := range []string{s1.String(), s2.String()} {
		if !strings.HasPrefix(s, "<svg") || !strings.HasSuffix(s, "</svg>\n") {
			t.Errorf("not an svg document: %.60q", s)
		}
	}
}

// mustConditions returns the lab's rows, failing the test when a policy
// file does not parse.
func mustConditions(t *testing.T) []condition {
	t.Helper()
	conds, err := conditions()
	if err != nil {
		t.Fatal(err)
	}
	return conds
}

// TestRecoverableRowIsTheExample: row R runs the policy of
// examples/recoverable.yaml (the file the README and docs/cli.md point
// users to), so the numbers they quote for R are that file's.
func TestRecoverableRowIsTheExample(t *testing.T) {
	ex, err := policy.Load("../../../examples/recoverable.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := policyFileRow("R", "recoverable.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.pol.Version() != ex.Version() {
		t.Errorf("lab/policies/recoverable.yaml is version %s, examples/recoverable.yaml %s", c.pol.Version(), ex.Version())
	}
}

// TestTableExplainsItself: the text defines every row it prints, and each
// falsification line is a positive claim with "holds" or "does not hold"
// and its reason, never the falsifier's "less than" phrasing.
func TestTableExplainsItself(t *testing.T) {
	r := smallRun(t)
	var tab bytes.Buffer
	if err := WriteTable(&tab, r); err != nil {
		t.Fatal(err)
	}
	out := tab.String()
	rows, _, _ := strings.Cut(strings.SplitN(out, "\nROWS", 2)[1], "\n\n")
	for _, c := range r.Conditions {
		if !strings.Contains(rows, "\n"+c.Name+" ") || c.Description == "" {
			t.Errorf("ROWS does not define row %q:\n%s", c.Name, rows)
		}
	}
	_, fals, ok := strings.Cut(out, "\nFALSIFICATION")
	if !ok || len(r.Falsification) == 0 {
		t.Fatal("no falsification section")
	}
	lines := strings.Split(strings.TrimSpace(fals), "\n")[1:]
	if len(lines) != len(r.Falsification) {
		t.Fatalf("%d falsification lines for %d clauses:\n%s", len(lines), len(r.Falsification), fals)
	}
	for i, l := range lines {
		cl := r.Falsification[i]
		if _, ok := claims[cl.ID]; !ok {
			t.Errorf("clause %s has no positive claim", cl.ID)
		}
		claim, holds := Claim(cl)
		verdict := map[bool]string{true: ": holds, because ", false: ": does not hold, because "}[holds]
		if !strings.HasPrefix(l, "- "+claim+verdict) {
			t.Errorf("line %q: want %q then %q", l, claim, verdict)
		}
		if holds == cl.Holds {
			t.Errorf("clause %s: the claim must hold exactly when the falsifier does not", cl.ID)
		}
		if strings.Contains(claim, "less than") || strings.Contains(claim, "prove behaviourally necessary") {
			t.Errorf("claim phrased as its falsifier: %q", claim)
		}
	}
}
