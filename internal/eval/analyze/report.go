package analyze

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/projections"
)

// WriteReport writes analyze's readable report: first what pruning saved
// over all sessions (the headline), then per session its items, tokens,
// decisions, savings and prunes by rung, and the prunes (every decision
// with all) as a table naming each item's tool and source. Every token
// figure carries its unit words (projections.UnitContextNow,
// UnitTokensSent, UnitPromptCost).
func WriteReport(w io.Writer, rep *Report, all bool) {
	if len(rep.Sessions) == 0 {
		// Nothing to add up: say why, rather than "Saved $0.00 over 0
		// sessions".
		if n := len(rep.Failed); n > 0 {
			fmt.Fprintf(w, "Nothing analysed: %s failed (the errors are on stderr).\n", allFiles(n, rep.Files))
		} else {
			fmt.Fprintln(w, "Nothing analysed: the files hold no session.")
		}
		return
	}
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
		fmt.Fprintf(w, "  %s: raw %s tokens, rendered %s; removed %s, placeholders %s, net %s (%s of raw)\n", projections.UnitContextNow,
			thousands(t.Raw), thousands(t.Rendered), thousands(t.Removed), thousands(t.Placeholder), thousands(t.Removed-t.Placeholder), pctInt(t.Removed-t.Placeholder, t.Raw))
		if t.HostCompacted > 0 || t.HostPruned > 0 {
			fmt.Fprintf(w, "  removed by the host itself, %s: compacted %s tokens, cleared %s\n", projections.UnitContextNow, thousands(t.HostCompacted), thousands(t.HostPruned))
		}
		fmt.Fprintf(w, "  decisions:")
		for _, d := range events.Decisions {
			fmt.Fprintf(w, " %s %d", d, s.DecisionCounts[d])
		}
		fmt.Fprintf(w, " (abstention %.1f%%); applied %d marks in %d applications, pending %d\n", 100*s.AbstentionRate, s.Applied, len(s.Applications), s.Pending)
		if e := s.Economics; e != nil {
			one := NewSavings()
			one.AddEconomics(e)
			if note := projections.NotYetSaved(s.DecisionCounts[events.Prune], s.Applied, s.Requests); note != "" {
				fmt.Fprintf(w, "  saved: nothing yet; %s\n", note)
			} else if e.Unpriced {
				fmt.Fprintf(w, "  saved, %s: %s (%.1f%%); %s: unpriced model %s\n", projections.UnitTokensSent, thousands(one.SavedTokens("scheduled")), one.PctTokens("scheduled"), projections.UnitPromptCost, e.Model)
			} else {
				fmt.Fprintf(w, "  saved, %s: %s (%.1f%%); immediate: %s\n", projections.UnitPromptCost,
					USD(one.SavedUSD("scheduled")), one.PctUSD("scheduled"), USD(one.SavedUSD("immediate")))
				fmt.Fprintf(w, "  saved, %s: %s (%.1f%%); immediate: %s\n", projections.UnitTokensSent,
					thousands(one.SavedTokens("scheduled")), one.PctTokens("scheduled"), thousands(one.SavedTokens("immediate")))
			}
		}
		if len(s.PrunesByRung) > 0 {
			rungs := make([]string, 0, len(s.PrunesByRung))
			for r := range s.PrunesByRung {
				rungs = append(rungs, r)
			}
			sort.Strings(rungs)
			fmt.Fprintf(w, "  prunes by rung (tokens %s, estimated):", projections.UnitContextNow)
			for _, r := range rungs {
				fmt.Fprintf(w, " %s %d (%s)", r, s.PrunesByRung[r], thousands(s.TokensByRung[r]))
			}
			fmt.Fprintln(w)
		}
		// APPLIED names the request by its number in the session, not
		// by the provider's id.
		reqNo := map[string]int{}
		for _, a := range s.Applications {
			if a.Request >= 0 && a.RequestID != "" {
				reqNo[a.RequestID] = a.Request + 1
			}
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		n := 0
		for _, d := range s.Decisions {
			if !all && d.Decision != events.Prune {
				continue
			}
			if n == 0 {
				fmt.Fprintln(tw, "  ITEM\tTOOL\tDECISION\tRUNG\tREASON\tAPPLIED\tTOKENS "+strings.ToUpper(projections.UnitContextNow)+"\tSOURCE")
			}
			n++
			applied := "-"
			switch {
			case d.Applied && reqNo[d.AppliedAt] > 0:
				applied = fmt.Sprintf("at request %d of %d", reqNo[d.AppliedAt], s.Requests)
			case d.Applied:
				applied = "at " + d.AppliedAt
			case d.Pending:
				applied = "pending"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Item, dash(d.Tool), d.Decision, dash(string(d.Rung)), d.Reason, applied, thousands(d.TokensEstimated), dash(d.Source))
		}
		tw.Flush()
	}
}

// allFiles is "all 3 files" or "2 of 3 files".
func allFiles(failed, total int) string {
	if failed >= total {
		if total == 1 {
			return "the one file"
		}
		return fmt.Sprintf("all %d files", total)
	}
	return fmt.Sprintf("%d of %d files", failed, total)
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
