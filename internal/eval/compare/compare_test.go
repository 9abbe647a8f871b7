package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/eval/lab"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/scheduler"
)

// realInputs imports the two smallest shared Claude Code traces.
func realInputs(t *testing.T) ([]Input, *store.MemBlobs) {
	t.Helper()
	var files []string
	for _, f := range []string{"entirecli-64-267478c135-0.jsonl", "entirecli-60-1ac0eb4d69-0.jsonl"} {
		files = append(files, filepath.Join("../../../../shared/traces/claude-code", f))
	}
	var ss []importers.Session
	for _, f := range files {
		x, err := importers.Import(f, "auto")
		if err != nil {
			t.Skipf("shared traces not available: %v", err)
		}
		ss = append(ss, x...)
	}
	blobs := store.NewMemBlobs()
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
	rows, err := lab.Rows(5)
	if err != nil {
		t.Fatal(err)
	}
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
		// One recovery per later-used item; a recovery only adds cost.
		if e.Recoveries != e.LaterUsed || e.CostWithRecoveries < e.CostUSD ||
			(e.Recoveries == 0) != (e.CostWithRecoveries == e.CostUSD) {
			t.Errorf("%s %s: later_used %d, recoveries %d, cost %.6f, with recoveries %.6f",
				e.Policy, e.Timing, e.LaterUsed, e.Recoveries, e.CostUSD, e.CostWithRecoveries)
		}
	}
	if rep.None.CostWithRecoveries != rep.None.CostUSD || rep.Requests == 0 {
		t.Errorf("none %+v, %d requests", rep.None, rep.Requests)
	}
	if m := rep.Comparison[len(rep.Comparison)-1]; m.Recoveries == 0 {
		t.Errorf("masking-5 needs no recovery on real sessions: %+v", m)
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
	if err := WriteText(&txt, rep); err != nil || !strings.Contains(txt.String(), "later-used (proxy)") ||
		!strings.Contains(txt.String(), "cost w/ recoveries") || !strings.Contains(txt.String(), "(60 output tokens)") {
		t.Errorf("text report: %v\n%s", err, txt.String())
	}
	var svg strings.Builder
	if err := WriteSVG(&svg, rep); err != nil || !strings.Contains(svg.String(), "masking-5") ||
		!strings.Contains(svg.String(), "ring = cost with recoveries") || !strings.Contains(svg.String(), `fill="none"`) {
		t.Errorf("svg: %v", err)
	}
}

// TestRows: R, the opt-in recoverable policy, runs right after the
// production rows, with the recoverable policy on.
func TestRows(t *testing.T) {
	rows, err := Rows(5)
	if err != nil {
		t.Fatal(err)
	}
	labRows, err := lab.Rows(5)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rows {
		names = append(names, r.Name)
	}
	got := strings.Join(names, ",")
	if !strings.Contains(got, lab.CondNoSpan+","+RowRecoverable+",") || strings.Count(","+got+",", ","+RowRecoverable+",") != 1 || len(rows) != len(labRows) {
		t.Fatalf("rows %s", got)
	}
	for _, r := range rows {
		_, on := r.Policy.Eligibility.RecoverableOn()
		if on != (r.Name == RowRecoverable) {
			t.Errorf("%s: recoverable %v", r.Name, on)
		}
	}
}

// TestRecommend: the recommendation is a policy file --policy accepts, and
// it is the cheapest candidate within the bound.
func TestRecommend(t *testing.T) {
	in, blobs := realInputs(t)
	rec, err := Recommend(context.Background(), in, blobs, tokens.New(), Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Best == nil {
		t.Fatal("no candidate within later_used <= 0")
	}
	for _, c := range rec.Tried {
		if c.LaterUsed <= 0 && c.CostWithRecoveries < rec.Best.CostWithRecoveries {
			t.Errorf("%s costs %.4f < the recommended %s %.4f", c.Name, c.CostWithRecoveries, rec.Best.Name, rec.Best.CostWithRecoveries)
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
	// The opt-in recoverable policy is weighed with the others, and the
	// recovery budget and the risk bound every pick on these sessions.
	var recoverable *Choice
	for i, c := range rec.Tried {
		if c.Name == "recoverable (opt-in)" {
			recoverable = &rec.Tried[i]
		}
	}
	if recoverable == nil || recoverable.LaterUsed == 0 && recoverable.CostWithRecoveries == rec.None.CostUSD {
		t.Fatalf("the recoverable policy was not tried: %+v", rec.Tried)
	}
	zero := 0.0
	for _, lim := range []Limits{{Risk: 1000}, {Risk: 1000, RecoveryBudget: &zero}, {Risk: recoverable.LaterUsed}, {Risk: max(0, recoverable.LaterUsed-1)}} {
		_, best := choose(rec.Tried, lim, rec.Requests)
		if best == nil {
			t.Fatalf("limits %+v: no pick", lim)
		}
		if !lim.within(*best, rec.Requests) || best.LaterUsed > lim.Risk {
			t.Errorf("limits %+v: picked %s with later_used %d, %d recoveries", lim, best.Name, best.LaterUsed, best.Recoveries)
		}
		if lim.RecoveryBudget != nil && best.Recoveries > 0 {
			t.Errorf("budget 0: picked %s with %d recoveries", best.Name, best.Recoveries)
		}
		for _, c := range rec.Tried {
			if lim.within(c, rec.Requests) && c.CostWithRecoveries < best.CostWithRecoveries {
				t.Errorf("limits %+v: %s costs %.4f with recoveries, less than the pick %s %.4f", lim, c.Name, c.CostWithRecoveries, best.Name, best.CostWithRecoveries)
			}
		}
	}
}

// TestChoose: the recommendation is the cheapest with recoveries within
// the risk and the recovery budget, whatever it costs without them.
func TestChoose(t *testing.T) {
	budget := func(v float64) *float64 { return &v }
	// 200 requests: a budget of 1 per 100 allows 2 recoveries.
	tried := []Choice{
		{Name: "default", TokensSent: 900, CostUSD: 9.0, CostWithRecoveries: 9.0},
		{Name: "cheap but needed", TokensSent: 500, CostUSD: 7.0, LaterUsed: 3, Recoveries: 3, CostWithRecoveries: 9.5},
		{Name: "some risk", TokensSent: 700, CostUSD: 8.0, LaterUsed: 2, Recoveries: 2, CostWithRecoveries: 8.5},
		{Name: "tie, fewer tokens", TokensSent: 800, CostUSD: 9.0, CostWithRecoveries: 9.0},
	}
	for _, tc := range []struct {
		name  string
		lim   Limits
		best  string
		order string
	}{
		{"risk 0: only the safe ones; a tie goes to fewer tokens", Limits{}, "tie, fewer tokens", "some risk,tie, fewer tokens,default,cheap but needed"},
		{"risk 2: the cheapest with recoveries", Limits{Risk: 2}, "some risk", ""},
		{"risk 5: cheaper without recoveries is not cheaper with them", Limits{Risk: 5}, "some risk", ""},
		{"a budget of 1 per 100 requests allows 2", Limits{Risk: 5, RecoveryBudget: budget(1)}, "some risk", ""},
		{"a budget below 1 per 100 excludes it", Limits{Risk: 5, RecoveryBudget: budget(0.5)}, "tie, fewer tokens", ""},
		{"a budget of 0 allows no recovery", Limits{Risk: 5, RecoveryBudget: budget(0)}, "tie, fewer tokens", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sorted, best := choose(tried, tc.lim, 200)
			got := ""
			if best != nil {
				got = best.Name
			}
			if got != tc.best {
				t.Errorf("best %q, want %q", got, tc.best)
			}
			if tc.order != "" {
				var names []string
				for _, c := range sorted {
					names = append(names, c.Name)
				}
				if o := strings.Join(names, ","); o != tc.order {
					t.Errorf("order %s, want %s", o, tc.order)
				}
			}
		})
	}
	if _, best := choose(tried[1:3], Limits{}, 200); best != nil {
		t.Errorf("nothing within later_used <= 0, got %s", best.Name)
	}
	if tried[0].Name != "default" {
		t.Error("choose reordered its argument")
	}
	for _, lim := range []Limits{{Risk: -1}, {RecoveryBudget: budget(-1)}, {RecoveryBudget: budget(math.NaN())}, {RecoveryBudget: budget(math.Inf(1))}} {
		if _, err := Recommend(context.Background(), nil, nil, nil, lim, nil); err == nil {
			t.Errorf("limits %+v accepted", lim)
		}
	}
}
