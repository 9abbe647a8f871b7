package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/prunesched/prunesched/analyze"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/importers"
)

func runAnalyze(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "analyze", "[flags] FILE...", `
One shot, offline: start a temporary embedded log, import the files, run the
whole pipeline (eligibility, scheduler, projections: the same workers serve
runs) and report per session: items, tool calls, tokens raw / rendered /
removed / placeholder, and decisions by kind and rung.`)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	format := fs.String("format", "auto", "input format: auto, "+strings.Join(importers.Formats(), ", "))
	bundles := fs.String("bundles", "", "also write each session's final bundle to DIR as ID.anthropic.json, ID.openai.json and ID.txt")
	keep := fs.String("keep", "", "keep the log in DIR (then 'prunesched item --data DIR SESSION ITEM' recovers originals); default: a temporary directory")
	policyPath := fs.String("policy", "", "policy file (YAML); empty = defaults")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	all := fs.Bool("all-decisions", false, "list every decision in the readable report (default: prunes only)")
	summary := fs.Bool("summary", false, "print Markdown tables over all sessions (decisions by rung, economics, calibration) instead of the per-session report")
	prevalence := fs.Bool("prevalence", false, "report the prevalence of each prunable shape (per format and in total) with what the policy decided on it, and the agreement with the hosts' own pruning, instead of the per-session report (with --json: as JSON)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usagef("no files given")
	}
	pol, err := loadPolicy(*policyPath)
	if err != nil {
		return err
	}
	cfg := analyze.Config{Files: fs.Args(), Format: *format, Policy: pol, DataDir: *keep, BundlesDir: *bundles}
	if !*quiet {
		cfg.Progress = e.stderr
	}
	if *prevalence {
		prev, err := analyze.RunPrevalence(ctx, cfg)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(e.stdout, prev)
		}
		analyze.WritePrevalence(e.stdout, prev)
		return nil
	}
	rep, err := analyze.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.stdout, rep)
	}
	if *summary {
		analyze.WriteSummary(e.stdout, rep)
		return nil
	}
	printReport(e.stdout, rep, *all)
	return nil
}

func printReport(w io.Writer, rep *analyze.Report, all bool) {
	fmt.Fprintf(w, "tokenizer: %s\npolicy:    %s\n", rep.Tokenizer, rep.PolicyVersion)
	for _, s := range rep.Sessions {
		fmt.Fprintf(w, "\n%s  (%s, session %s)\n", s.Source, s.Format, s.Session)
		fmt.Fprintf(w, "  items %d, tool calls %d, model requests %d\n", s.Items, s.ToolCalls, s.Requests)
		t := s.Tokens
		fmt.Fprintf(w, "  tokens: raw %d, rendered %d, removed %d, placeholder %d (net %d, %s of raw)\n",
			t.Raw, t.Rendered, t.Removed, t.Placeholder, t.Removed-t.Placeholder, pct(t.Removed-t.Placeholder, t.Raw))
		if t.HostCompacted > 0 || t.HostPruned > 0 {
			fmt.Fprintf(w, "  removed by the host itself: compacted %d, cleared %d\n", t.HostCompacted, t.HostPruned)
		}
		fmt.Fprintf(w, "  decisions:")
		for _, d := range events.Decisions {
			fmt.Fprintf(w, " %s %d", d, s.DecisionCounts[d])
		}
		fmt.Fprintf(w, " (abstention %.1f%%); applied %d, pending %d\n", 100*s.AbstentionRate, s.Applied, s.Pending)
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
		tw := newTable(w)
		n := 0
		for _, d := range s.Decisions {
			if !all && d.Decision != events.Prune {
				continue
			}
			if n == 0 {
				fmt.Fprintln(tw, "  ITEM\tDECISION\tRUNG\tREASON\tAPPLIED\tTOKENS")
			}
			n++
			applied := "pending"
			if d.Applied {
				applied = "at " + d.AppliedAt
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\n", d.Item, d.Decision, orDash(string(d.Rung)), d.Reason, applied, d.TokensEstimated)
		}
		tw.Flush()
	}
}

func pct(a, b int) string {
	if b == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
