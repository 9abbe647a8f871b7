package compare

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/eval/lab"
	"github.com/prunesched/prunesched/policy"
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
// the opt-in rungs, recent-turn protection, which copy stays, the opt-in
// recoverable policy as examples/recoverable.yaml ships it: row R of
// analyze --compare), plus the most conservative (exact duplicates only).
// It fails only if the lab's recoverable policy file is missing.
func Candidates() ([]Candidate, error) {
	rec, err := lab.PolicyFile("recoverable.yaml")
	if err != nil {
		return nil, fmt.Errorf("recommend candidates: %w", err)
	}
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
		{"recoverable (opt-in)", string(rec)},
	}, nil
}

// Choice is one candidate's outcome over the sessions, scheduled.
type Choice struct {
	Name       string  `json:"name"`
	YAML       string  `json:"yaml"`
	TokensSent int     `json:"tokens_sent"`
	CostUSD    float64 `json:"cost_usd"`
	LaterUsed  int     `json:"later_used"`
	// Recoveries and CostWithRecoveries are as in Entry.
	Recoveries         int     `json:"recoveries"`
	CostWithRecoveries float64 `json:"cost_with_recoveries"`
}

// Limits bound what Recommend may choose.
type Limits struct {
	// Risk is the later-used items allowed over all sessions.
	Risk int
	// RecoveryBudget, when set, is the recoveries allowed per 100 model
	// requests over all sessions (at least 0).
	RecoveryBudget *float64
}

// check refuses limits no candidate could be measured against.
func (l Limits) check() error {
	if l.Risk < 0 {
		return fmt.Errorf("risk %d: must not be negative", l.Risk)
	}
	if b := l.RecoveryBudget; b != nil && !(*b >= 0 && !math.IsInf(*b, 1)) {
		return fmt.Errorf("recovery budget %v: must be a number of recoveries per 100 requests, at least 0", *b)
	}
	return nil
}

// within reports whether c keeps to l over requests model requests.
func (l Limits) within(c Choice, requests int) bool {
	if c.LaterUsed > l.Risk {
		return false
	}
	return l.RecoveryBudget == nil || 100*float64(c.Recoveries) <= *l.RecoveryBudget*float64(requests)
}

// describe says the limits in words, over sessions and requests.
func (l Limits) describe(sessions, requests int) string {
	s := fmt.Sprintf("later_used <= %d", l.Risk)
	if l.RecoveryBudget != nil {
		s += fmt.Sprintf(" and recoveries <= %s per 100 requests", trimNum(*l.RecoveryBudget))
	}
	return s + fmt.Sprintf(" over %d sessions (%d requests)", sessions, requests)
}

// Recommendation is the best candidate within the limits and every
// candidate's outcome, best first.
type Recommendation struct {
	Note string `json:"note"`
	// Risk is the bound on later_used, RecoveryBudget the recoveries
	// allowed per 100 requests (absent: no budget); Requests the model
	// requests of the sessions; None the sessions without pruning.
	Risk           int      `json:"risk"`
	RecoveryBudget *float64 `json:"recovery_budget,omitempty"`
	Requests       int      `json:"requests"`
	None           Entry    `json:"none"`
	Best           *Choice  `json:"best"`
	Tried          []Choice `json:"tried"`
	Bounds         string   `json:"bounds"`
}

// Recommend runs every candidate over the sessions under the scheduler and
// returns the cheapest, cost with recoveries (fewer tokens sent, then the
// earlier candidate, on a tie), within lim: at most lim.Risk later-used
// items and, with a budget, at most that many recoveries per 100 model
// requests. Best is nil when no candidate is within.
func Recommend(ctx context.Context, sessions []Input, blobs BlobGetter, tc events.TokenCounter, lim Limits, progress func(done, total int)) (*Recommendation, error) {
	if err := lim.check(); err != nil {
		return nil, fmt.Errorf("recommend: %w", err)
	}
	cands, err := Candidates()
	if err != nil {
		return nil, err
	}
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
	rec := &Recommendation{Note: Note, Risk: lim.Risk, RecoveryBudget: lim.RecoveryBudget, Requests: rep.Requests, None: rep.None,
		Bounds: lim.describe(len(sessions), rep.Requests)}
	var tried []Choice
	for i, c := range cands {
		for _, e := range rep.Comparison {
			if e.Policy == c.Name && e.Timing == scheduler.StrategyScheduled {
				tried = append(tried, Choice{Name: c.Name, YAML: cands[i].YAML, TokensSent: e.TokensSent, CostUSD: e.CostUSD,
					LaterUsed: e.LaterUsed, Recoveries: e.Recoveries, CostWithRecoveries: e.CostWithRecoveries})
			}
		}
	}
	rec.Tried, rec.Best = choose(tried, lim, rep.Requests)
	return rec, nil
}

// choose orders tried best first (cost with recoveries, then tokens
// sent, then their order in tried) and returns it with the first within
// lim over requests model requests (a copy), nil if none is.
func choose(tried []Choice, lim Limits, requests int) ([]Choice, *Choice) {
	sorted := append([]Choice(nil), tried...)
	sort.SliceStable(sorted, func(a, b int) bool {
		x, y := sorted[a], sorted[b]
		if x.CostWithRecoveries != y.CostWithRecoveries {
			return x.CostWithRecoveries < y.CostWithRecoveries
		}
		return x.TokensSent < y.TokensSent
	})
	for _, c := range sorted {
		if lim.within(c, requests) {
			return sorted, &c
		}
	}
	return sorted, nil
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
	fmt.Fprintf(w, "# scheduled: %d tokens sent (%s), %.4f USD (%s); later_used %d; %d recoveries, %.4f USD with them (%s)\n",
		b.TokensSent, pct(b.TokensSent, r.None.TokensSent), b.CostUSD, pctF(b.CostUSD, r.None.CostUSD), b.LaterUsed,
		b.Recoveries, b.CostWithRecoveries, pctF(b.CostWithRecoveries, r.None.CostUSD))
	fmt.Fprintf(w, "# a recovery: the model fetches a removed item it uses again (one extra request, a %d-token call; see docs/cli.md)\n", RecoveryAnswerTokens)
	fmt.Fprintf(w, "# candidates tried (scheduled timing; none: %d tokens sent, %.4f USD; %d requests), cheapest with recoveries first:\n",
		r.None.TokensSent, r.None.CostUSD, r.Requests)
	for _, c := range r.Tried {
		fmt.Fprintf(w, "#   %-32s %12d tokens (%s)  %10.4f USD (%s)  later_used %d  recoveries %d  %10.4f USD with them (%s)\n",
			c.Name, c.TokensSent, pct(c.TokensSent, r.None.TokensSent), c.CostUSD, pctF(c.CostUSD, r.None.CostUSD), c.LaterUsed,
			c.Recoveries, c.CostWithRecoveries, pctF(c.CostWithRecoveries, r.None.CostUSD))
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

// trimNum prints a budget without trailing zeros.
func trimNum(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func pctF(x, base float64) string {
	if base == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.2f%%", 100*(x-base)/base)
}
