package analyze

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// WriteSummary prints three Markdown tables over every session of the
// report: decisions by kind and rung with the tokens each rung frees and
// the abstention rate; the economics of the four strategies (none,
// immediate, scheduled, hindsight) with their cost/token ratios; and the cache model's calibration against the
// provider's reported cache tokens. The tables of docs/results.md come from it.
func WriteSummary(w io.Writer, rep *Report) {
	rungs := []string{"L0", "L1", "L2", "L3", "L4", "errored", "manual"}
	fmt.Fprintf(w, "### Decisions (policy %s, tokenizer %s)\n\n", rep.PolicyVersion, rep.Tokenizer)
	fmt.Fprintf(w, "| session | items | tool calls | raw tokens | KEEP | PRUNE | DEFER | ABSTAIN | abstention |")
	for _, r := range rungs {
		fmt.Fprintf(w, " %s prunes (tokens) |", r)
	}
	fmt.Fprintf(w, " removed net, in context now | applied / pending |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|%s---:|---:|\n", strings.Repeat("---:|", len(rungs)))
	var tot SessionReport
	tot.DecisionCounts, tot.PrunesByRung, tot.TokensByRung = map[events.Decision]int{}, map[string]int{}, map[string]int{}
	for _, s := range rep.Sessions {
		writeDecisionRow(w, name(s), s, rungs)
		tot.Items += s.Items
		tot.ToolCalls += s.ToolCalls
		tot.Tokens.Raw += s.Tokens.Raw
		tot.Tokens.Removed += s.Tokens.Removed
		tot.Tokens.Placeholder += s.Tokens.Placeholder
		tot.Applied += s.Applied
		tot.Pending += s.Pending
		addCounts(tot.DecisionCounts, s.DecisionCounts)
		addCounts(tot.PrunesByRung, s.PrunesByRung)
		addCounts(tot.TokensByRung, s.TokensByRung)
	}
	if n := sumDecisions(tot.DecisionCounts); n > 0 {
		tot.AbstentionRate = float64(tot.DecisionCounts[events.Abstain]) / float64(n)
	}
	writeDecisionRow(w, "**all**", tot, rungs)

	fmt.Fprintf(w, "\n### Economics (%s, %s, cost reduction / token reduction)\n\n", projections.UnitPromptCost, projections.UnitTokensSent)
	fmt.Fprintf(w, "| session | provider | cost none | cost immediate | cost scheduled | cost hindsight | tokens none | tokens immediate | tokens scheduled | tokens hindsight | ratio immediate | ratio scheduled | ratio hindsight | applications (marks applied) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var c [4]float64
	var t [4]int
	const sn, si, ss, sh = scheduler.StrategyNone, scheduler.StrategyImmediate, scheduler.StrategyScheduled, scheduler.StrategyHindsight
	unpriced := 0
	for _, s := range rep.Sessions {
		e := s.Economics
		if e == nil {
			continue
		}
		if e.Unpriced {
			// Never at another provider's rates: no cost, no ratio, and
			// out of the priced total.
			unpriced++
			fmt.Fprintf(w, "| %s | %s | unpriced | unpriced | unpriced | unpriced | %d | %d | %d | %d | - | - | - | %d (%d) |\n", name(s), unpricedLabel(e),
				e.TokensSent[sn], e.TokensSent[si], e.TokensSent[ss], e.TokensSent[sh], len(s.Applications), s.Applied)
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %.4f | %.4f | %.4f | %.4f | %d | %d | %d | %d | %.2f | %.2f | %.2f | %d (%d) |\n", name(s), e.Provider, e.None, e.Immediate, e.Scheduled, e.Hindsight,
			e.TokensSent[sn], e.TokensSent[si], e.TokensSent[ss], e.TokensSent[sh],
			e.Ratio[si], e.Ratio[ss], e.Ratio[sh], len(s.Applications), s.Applied)
		for i, v := range [4]float64{e.None, e.Immediate, e.Scheduled, e.Hindsight} {
			c[i] += v
		}
		for i, st := range [4]string{sn, si, ss, sh} {
			t[i] += e.TokensSent[st]
		}
	}
	label := "**all**"
	if unpriced > 0 {
		label = fmt.Sprintf("**all priced** (%d unpriced left out)", unpriced)
	}
	fmt.Fprintf(w, "| %s | | %.4f | %.4f | %.4f | %.4f | %d | %d | %d | %d | %.2f | %.2f | %.2f | |\n", label, c[0], c[1], c[2], c[3], t[0], t[1], t[2], t[3],
		ratioOf(c[0], c[1], t[0], t[1]), ratioOf(c[0], c[2], t[0], t[2]), ratioOf(c[0], c[3], t[0], t[3]))

	fmt.Fprintf(w, "\n### Cache model calibration (unpruned replay vs the provider's reported cache tokens)\n\n")
	fmt.Fprintf(w, "| session | requests reported | reported cache read | predicted | error | reported cache write | predicted | error | hidden head |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range rep.Sessions {
		cal := s.Calibration
		if cal == nil {
			continue
		}
		fmt.Fprintf(w, "| %s | %d/%d | %d | %d | %+.1f%% | %d | %d | %+.1f%% | %d |\n", name(s), cal.Reported, cal.Requests,
			cal.ReportedRead, cal.PredictedRead, 100*cal.ReadError, cal.ReportedWrite, cal.PredictedWrite, 100*cal.WriteError, cal.HiddenPrefix)
	}
}

// unpricedLabel names an unpriced session's provider and model.
func unpricedLabel(e *Economics) string {
	p, m := e.Provider, e.Model
	if p == "" {
		p = "?"
	}
	if m == "" {
		m = "?"
	}
	return fmt.Sprintf("%s %s (unpriced)", p, m)
}

func writeDecisionRow(w io.Writer, label string, s SessionReport, rungs []string) {
	fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %d | %.1f%% |", label, s.Items, s.ToolCalls, s.Tokens.Raw,
		s.DecisionCounts[events.Keep], s.DecisionCounts[events.Prune], s.DecisionCounts[events.Defer], s.DecisionCounts[events.Abstain], 100*s.AbstentionRate)
	for _, r := range rungs {
		fmt.Fprintf(w, " %d (%d) |", s.PrunesByRung[r], s.TokensByRung[r])
	}
	net := s.Tokens.Removed - s.Tokens.Placeholder
	share := 0.0
	if s.Tokens.Raw > 0 {
		share = 100 * float64(net) / float64(s.Tokens.Raw)
	}
	fmt.Fprintf(w, " %d (%.1f%%) | %d / %d |\n", net, share, s.Applied, s.Pending)
}

func sumDecisions(m map[events.Decision]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func ratioOf(baseCost, cost float64, baseTok, tok int) float64 {
	if baseTok == 0 || baseCost == 0 || tok >= baseTok {
		return 0
	}
	return ((baseCost - cost) / baseCost) / (float64(baseTok-tok) / float64(baseTok))
}

func name(s SessionReport) string { return filepath.Base(s.Source) }

// addCounts adds every count of src to dst.
func addCounts[K comparable, V int | float64](dst, src map[K]V) {
	for k, v := range src {
		dst[k] += v
	}
}
