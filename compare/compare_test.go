package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/importers"
	"github.com/prunesched/prunesched/lab"
	"github.com/prunesched/prunesched/lab/fixtures"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/scheduler"
)

// realInputs imports the two smallest shared Claude Code traces.
func realInputs(t *testing.T) ([]Input, *fixtures.Blobs) {
	t.Helper()
	var files []string
	for _, f := range []string{"entirecli-64-267478c135-0.jsonl", "entirecli-60-1ac0eb4d69-0.jsonl"} {
		files = append(files, filepath.Join("../../shared/traces/claude-code", f))
	}
	var ss []importers.Session
	for _, f := range files {
		x, err := importers.Import(f, "auto")
		if err != nil {
			t.Skipf("shared traces not available: %v", err)
		}
		ss = append(ss, x...)
	}
	blobs := fixtures.NewBlobs()
	in, err := Prepare(context.Background(), ss, blobs, tokens.New())
	if err != nil {
		t.Fatal(err)
	}
	return in, blobs
}

// TestCompareRealTraces runs every row over real sessions: every row under
// both timings, per session and in total, totals equal to the sums, the
// production rows never sending more than no pruning, the same JSON twice.
func TestCompareRealTraces(t *testing.T) {
	in, blobs := realInputs(t)
	ctx := context.Background()
	tc := tokens.New()
	rows := lab.Rows(5)
	rep, err := Run(ctx, rows, in, blobs, tc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Comparison) != 2*len(rows) {
		t.Fatalf("%d total entries, want %d", len(rep.Comparison), 2*len(rows))
	}
	if rep.Comparison[len(rep.Comparison)-1].Policy != "masking-5" {
		t.Errorf("last row %q, want masking-5", rep.Comparison[len(rep.Comparison)-1].Policy)
	}
	if rep.None.TokensSent <= 0 || rep.None.CostUSD <= 0 {
		t.Fatalf("baseline %+v", rep.None)
	}
	for i, e := range rep.Comparison {
		sum := 0
		for _, s := range rep.Sessions {
			sum += s.Comparison[i].TokensSent
			if s.Comparison[i].LaterUsed < 0 {
				t.Errorf("%s: later-used %d", e.Policy, s.Comparison[i].LaterUsed)
			}
		}
		if sum != e.TokensSent {
			t.Errorf("%s %s: total %d, sessions sum to %d", e.Policy, e.Timing, e.TokensSent, sum)
		}
		// The production rows prune only what saves tokens net of the
		// placeholder; a peer's placeholder may outweigh a small item.
		if rows[i/2].Kind != "peer" && (e.TokensSent > rep.None.TokensSent || e.TokensRemoved < 0) {
			t.Errorf("%s %s: sent %d (none %d), removed %d", e.Policy, e.Timing, e.TokensSent, rep.None.TokensSent, e.TokensRemoved)
		}
		if e.Timing != scheduler.StrategyImmediate && e.Timing != scheduler.StrategyScheduled {
			t.Errorf("timing %q", e.Timing)
		}
	}
	// Masking removes by age: on real sessions it removes something.
	if m := rep.Comparison[len(rep.Comparison)-1]; m.ItemsRemoved == 0 {
		t.Errorf("masking-5 removed nothing: %+v", m)
	}
	again, err := Run(ctx, rows, in, blobs, tc, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(rep)
	b, _ := json.Marshal(again)
	if !bytes.Equal(a, b) {
		t.Error("two runs over the same sessions differ")
	}
	var txt strings.Builder
	if err := WriteText(&txt, rep); err != nil || !strings.Contains(txt.String(), "later-used (proxy)") {
		t.Errorf("text report: %v\n%s", err, txt.String())
	}
	var svg strings.Builder
	if err := WriteSVG(&svg, rep); err != nil || !strings.Contains(svg.String(), "masking-5") {
		t.Errorf("svg: %v", err)
	}
}

// TestRecommend: the recommendation is a policy file --policy accepts, and
// it is the cheapest candidate within the bound.
func TestRecommend(t *testing.T) {
	in, blobs := realInputs(t)
	rec, err := Recommend(context.Background(), in, blobs, tokens.New(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Best == nil {
		t.Fatal("no candidate within later_used <= 0")
	}
	for _, c := range rec.Tried {
		if c.LaterUsed <= 0 && c.CostUSD < rec.Best.CostUSD {
			t.Errorf("%s costs %.4f < the recommended %s %.4f", c.Name, c.CostUSD, rec.Best.Name, rec.Best.CostUSD)
		}
	}
	var b strings.Builder
	if err := WritePolicy(&b, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := policy.Parse([]byte(b.String())); err != nil {
		t.Errorf("recommended policy does not parse: %v\n%s", err, b.String())
	}
	t.Logf("\n%s", b.String())
}
