package analyze

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/prunesched/prunesched/events"
)

// WriteReport writes analyze's readable report: first what pruning saved
// over all sessions (the headline), then per session its items, tokens,
// decisions, savings and prunes by rung, and the prunes (every decision
// with all) as a table.
func WriteReport(w io.Writer, rep *Report, all bool) {
	sv := NewSavings()
	for _, s := range rep.Sessions {
		sv.AddEconomics(s.Economics)
	}
	fmt.Fprintf(w, "%s\n\n", sv.Headline())
	fmt.Fprintf(w, "tokenizer: %s\npolicy:    %s\n", rep.Tokenizer, rep.PolicyVersion)
	for _, s := range rep.Sessions {
		fmt.Fprintf(w, "\n%s  (%s, session %s)\n", s.Source, s.Format, s.Session)
		fmt.Fprintf(w, "  items %d, tool calls %d, model requests %d\n", s.Items, s.ToolCalls, s.Requests)
		t := s.Tokens
		fmt.Fprintf(w, "  tokens: raw %d, rendered %d, removed %d, placeholder %d (net %d, %s of raw)\n",
			t.Raw, t.Rendered, t.Removed, t.Placeholder, t.Removed-t.Placeholder, pctInt(t.Removed-t.Placeholder, t.Raw))
		if t.HostCompacted > 0 || t.HostPruned > 0 {
			fmt.Fprintf(w, "  removed by the host itself: compacted %d, cleared %d\n", t.HostCompacted, t.HostPruned)
		}
		fmt.Fprintf(w, "  decisions:")
		for _, d := range events.Decisions {
			fmt.Fprintf(w, " %s %d", d, s.DecisionCounts[d])
		}
		fmt.Fprintf(w, " (abstention %.1f%%); applied %d marks in %d applications, pending %d\n", 100*s.AbstentionRate, s.Applied, len(s.Applications), s.Pending)
		if e := s.Economics; e != nil {
			one := NewSavings()
			one.AddEconomics(e)
			if e.Unpriced {
				fmt.Fprintf(w, "  saved: %s tokens (%.1f%%), unpriced model %s\n", Thousands(one.SavedTokens("scheduled")), one.PctTokens("scheduled"), e.Model)
			} else {
				fmt.Fprintf(w, "  saved: %s (%.1f%%) and %s tokens (%.1f%%); immediate: %s and %s tokens\n",
					USD(one.SavedUSD("scheduled")), one.PctUSD("scheduled"), Thousands(one.SavedTokens("scheduled")), one.PctTokens("scheduled"),
					USD(one.SavedUSD("immediate")), Thousands(one.SavedTokens("immediate")))
			}
		}
		if len(s.PrunesByRung) > 0 {
			rungs := make([]string, 0, len(s.PrunesByRung))
			for r := range s.PrunesByRung {
				rungs = append(rungs, r)
			}
			sort.Strings(rungs)
			fmt.Fprintf(w, "  prunes by rung:")
			for _, r := range rungs {
				fmt.Fprintf(w, " %s %d (%d tok)", r, s.PrunesByRung[r], s.TokensByRung[r])
			}
			fmt.Fprintln(w)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		n := 0
		for _, d := range s.Decisions {
			if !all && d.Decision != events.Prune {
				continue
			}
			if n == 0 {
				fmt.Fprintln(tw, "  ITEM\tDECISION\tRUNG\tREASON\tAPPLIED\tTOKENS")
			}
			n++
			applied := "-"
			switch {
			case d.Applied:
				applied = "at " + d.AppliedAt
			case d.Pending:
				applied = "pending"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\n", d.Item, d.Decision, dash(string(d.Rung)), d.Reason, applied, d.TokensEstimated)
		}
		tw.Flush()
	}
}

// pctInt is a as a percentage of b, one decimal ("0%" when b is 0).
func pctInt(a, b int) string {
	if b == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
