package compare

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/prunesched/prunesched/lab"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// Candidate is a setting of the production policy the recommendation
// weighs: a policy file's YAML (empty for the shipped default).
type Candidate struct {
	Name string
	YAML string
}

// Candidates are the settings --recommend tries: the shipped default and
// one change at a time along the knobs users ask about (span references,
// the opt-in rungs, recent-turn protection, which copy stays), plus the
// most conservative (exact duplicates only).
func Candidates() []Candidate {
	return []Candidate{
		{"default", ""},
		{"no span references", "eligibility:\n  span_refs: false\n"},
		{"span references from 4 lines", "eligibility:\n  span_min_lines: 4\n"},
		{"span references from 16 lines", "eligibility:\n  span_min_lines: 16\n"},
		{"L3 on (completed-work residue)", "eligibility:\n  rungs: [L0, L1, L2, L3]\n"},
		{"L4 on (predicted irrelevant)", "eligibility:\n  l4: true\n"},
		{"L3 and L4 on", "eligibility:\n  rungs: [L0, L1, L2, L3]\n  l4: true\n"},
		{"no recent-turn protection", "eligibility:\n  protect_recent_turns: 0\n"},
		{"keep the newest copy", "eligibility:\n  keep_copy: last\n"},
		{"exact duplicates only", "eligibility:\n  rungs: [L0, L1]\n  errored_inputs: false\n  span_refs: false\n"},
	}
}

// Choice is one candidate's outcome over the sessions, scheduled.
type Choice struct {
	Name       string  `json:"name"`
	YAML       string  `json:"yaml"`
	TokensSent int     `json:"tokens_sent"`
	CostUSD    float64 `json:"cost_usd"`
	LaterUsed  int     `json:"later_used"`
}

// Recommendation is the best candidate within the risk bound and every
// candidate's outcome, best first.
type Recommendation struct {
	Note string `json:"note"`
	// Risk is the bound on later_used; None the sessions without pruning.
	Risk   int      `json:"risk"`
	None   Entry    `json:"none"`
	Best   *Choice  `json:"best"`
	Tried  []Choice `json:"tried"`
	Bounds string   `json:"bounds"`
}

// Recommend runs every candidate over the sessions under the scheduler and
// returns the cheapest whose later-used count is at most risk (fewer
// tokens sent, then the earlier candidate, on a tie); Best is nil when
// none is.
func Recommend(ctx context.Context, sessions []Input, blobs BlobGetter, tc projections.TokenCounter, risk int, progress func(done, total int)) (*Recommendation, error) {
	cands := Candidates()
	rows := make([]lab.Row, 0, len(cands))
	for _, c := range cands {
		p, err := policy.Parse([]byte(c.YAML))
		if err != nil {
			return nil, fmt.Errorf("candidate %q: %w", c.Name, err)
		}
		rows = append(rows, lab.PolicyRow(c.Name, "candidate", "", scheduler.StrategyScheduled, p))
	}
	rep, err := Run(ctx, rows, sessions, blobs, tc, progress)
	if err != nil {
		return nil, err
	}
	rec := &Recommendation{Note: Note, Risk: risk, None: rep.None,
		Bounds: fmt.Sprintf("later_used <= %d over %d sessions", risk, len(sessions))}
	for i, c := range cands {
		for _, e := range rep.Comparison {
			if e.Policy == c.Name && e.Timing == scheduler.StrategyScheduled {
				rec.Tried = append(rec.Tried, Choice{Name: c.Name, YAML: cands[i].YAML, TokensSent: e.TokensSent, CostUSD: e.CostUSD, LaterUsed: e.LaterUsed})
			}
		}
	}
	order := make([]int, len(rec.Tried))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		x, y := rec.Tried[order[a]], rec.Tried[order[b]]
		if x.CostUSD != y.CostUSD {
			return x.CostUSD < y.CostUSD
		}
		return x.TokensSent < y.TokensSent
	})
	sorted := make([]Choice, len(order))
	for i, k := range order {
		sorted[i] = rec.Tried[k]
	}
	rec.Tried = sorted
	for i := range rec.Tried {
		if rec.Tried[i].LaterUsed <= risk {
			c := rec.Tried[i]
			rec.Best = &c
			break
		}
	}
	return rec, nil
}

// WritePolicy writes the recommendation as a policy file for --policy,
// its numbers in comments.
func WritePolicy(w io.Writer, r *Recommendation) error {
	if r.Best == nil {
		_, err := fmt.Fprintf(w, "# no candidate kept %s; the safest is the shipped default with nothing changed\n", r.Bounds)
		return err
	}
	b := r.Best
	fmt.Fprintf(w, "# prunesched analyze --compare --recommend: %s\n", b.Name)
	fmt.Fprintf(w, "# the cheapest setting with %s (later_used is a proxy for a false prune, not ground truth)\n", r.Bounds)
	fmt.Fprintf(w, "# scheduled: %d tokens sent (%s), %.4f USD (%s); later_used %d\n",
		b.TokensSent, pct(b.TokensSent, r.None.TokensSent), b.CostUSD, pctF(b.CostUSD, r.None.CostUSD), b.LaterUsed)
	fmt.Fprintf(w, "# candidates tried (scheduled timing; none: %d tokens sent, %.4f USD):\n", r.None.TokensSent, r.None.CostUSD)
	for _, c := range r.Tried {
		fmt.Fprintf(w, "#   %-32s %12d tokens (%s)  %10.4f USD (%s)  later_used %d\n",
			c.Name, c.TokensSent, pct(c.TokensSent, r.None.TokensSent), c.CostUSD, pctF(c.CostUSD, r.None.CostUSD), c.LaterUsed)
	}
	if b.YAML == "" {
		_, err := fmt.Fprintf(w, "# the shipped default: no setting to change\nname: default\n")
		return err
	}
	_, err := io.WriteString(w, b.YAML)
	return err
}

func pct(x, base int) string {
	if base == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.2f%%", 100*float64(x-base)/float64(base))
}

func pctF(x, base float64) string {
	if base == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.2f%%", 100*(x-base)/base)
}
