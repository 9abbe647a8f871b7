package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/prunesched/prunesched/internal/eval/analyze"
	"github.com/prunesched/prunesched/internal/eval/compare"
	"github.com/prunesched/prunesched/internal/importers"
)

func runAnalyze(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "analyze", "[flags] FILE|DIR... | --discover", `
One shot, offline: start a temporary embedded log, import the files, run the
whole pipeline (eligibility, scheduler, projections: the same workers serve
runs) and report: first what pruning saved (prompt cost (USD) and tokens
sent (summed over requests), scheduled and immediate, against no pruning),
then per session: items, tool calls, tokens in context now (raw, rendered,
removed, placeholders, net), decisions by kind and rung, and the prunes
with each item's tool and source. The glossary in docs/cli.md defines the units.

A directory is read recursively: files ending in .jsonl, .json, .traj or .md
whose format is detected. --discover reads the transcripts Claude Code
(~/.claude/projects/*/*.jsonl) and Codex (~/.codex/sessions/**/rollout-*.jsonl)
keep under your home (see docs/cli.md; OpenCode's database needs
'opencode export' first). A file that fails is reported with file:line and
the others still run; the exit status is 1 if any failed (--strict stops at
the first).

--compare runs every policy row of the Context Lab (the production settings
and the peers: DCP, clear_tool_uses, observation masking) over the files and
reports, per row, timing and session, tokens sent, cost, what it removed and
how many removed items the agent later used (a distinctive term of the item
appearing again in its own messages or tool inputs: a proxy for a false
prune, not ground truth), and the cost when each of those is fetched back
by a recovery (one extra request; docs/cli.md). --compare --recommend
prints the policy file with the lowest cost with recoveries whose
later-used count is at most --risk (and recoveries per 100 requests at most
--recovery-budget, if given):
  prunesched analyze --compare --recommend ~/.claude/projects > mine.yaml
  prunesched serve --policy mine.yaml`)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	format := fs.String("format", "auto", "input format: auto, "+strings.Join(importers.Formats(), ", "))
	bundles := fs.String("bundles", "", "also write each session's final bundle to DIR as ID.anthropic.json, ID.openai.json and ID.txt")
	keep := fs.String("keep", "", "keep the log in DIR (then 'prunesched item --data DIR SESSION ITEM' recovers originals); default: a temporary directory")
	policyPath := fs.String("policy", "", "policy file (YAML); empty = defaults")
	discover := fs.Bool("discover", false, "analyze the Claude Code and Codex transcripts found under your home directory")
	strict := fs.Bool("strict", false, "stop at the first file that fails")
	progressFlag := fs.Bool("progress", false, "per-file progress with an ETA on stderr (default: only when stderr is a terminal)")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	all := fs.Bool("all-decisions", false, "list every decision in the readable report (default: prunes only)")
	summary := fs.Bool("summary", false, "print Markdown tables over all sessions (decisions by rung, economics, calibration) instead of the per-session report")
	cmp := fs.Bool("compare", false, "run every lab row (B, C, D, D-span, D+L3, E, DCP, clear_tool_uses, masking-N; and your --policy) over the files under immediate and scheduled timing and report tokens sent, cost, what each removed and the later-used count (a proxy for a false prune, not ground truth)")
	maskWindow := fs.Int("mask-window", 0, "with --compare: the observations masking-N keeps (0: the lab's default)")
	recommend := fs.Bool("recommend", false, "with --compare: print the policy file (YAML, for --policy) with the best saving whose later-used count is at most --risk on these files")
	risk := fs.Int("risk", 0, "with --recommend: the later-used items allowed")
	budget := fs.Float64("recovery-budget", 0, "with --recommend: the recoveries allowed per 100 model requests over all the files (default: no budget beyond --risk)")
	svgPath := fs.String("svg", "", "with --compare: also write the chart of tokens saved against later-used items to FILE (SVG)")
	prevalence := fs.Bool("prevalence", false, "report the prevalence of each prunable shape (per format and in total) with what the policy decided on it, and the agreement with the hosts' own pruning, instead of the per-session report (with --json: as JSON)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 && !*discover {
		return usagef("no files given (or --discover)")
	}
	hasBudget := fs.Changed("recovery-budget")
	if !*cmp && (*recommend || *svgPath != "" || *maskWindow != 0 || *risk != 0 || hasBudget) {
		return usagef("--recommend, --risk, --recovery-budget, --mask-window and --svg go with --compare")
	}
	if hasBudget && !*recommend {
		return usagef("--recovery-budget goes with --recommend")
	}
	if *maskWindow < 0 || *risk < 0 {
		return usagef("--mask-window and --risk must not be negative")
	}
	if hasBudget && !(*budget >= 0 && !math.IsInf(*budget, 1)) {
		return usagef("--recovery-budget must be a number of recoveries per 100 model requests, at least 0 (got %v)", *budget)
	}
	pol, err := loadPolicy(*policyPath)
	if err != nil {
		return err
	}
	showProgress := !*quiet && (*progressFlag || isTerminal(e.stderr))
	files, err := inputFiles(e, fs.Args(), *discover)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no transcripts found")
	}
	cfg := analyze.Config{Files: files, Format: *format, Policy: pol, DataDir: *keep, BundlesDir: *bundles, Strict: *strict}
	if showProgress {
		cfg.Progress = e.stderr
	}
	var failed []analyze.FileError
	if *cmp {
		opt := analyze.CompareOptions{MaskWindow: *maskWindow, Recommend: *recommend, Risk: *risk}
		if hasBudget {
			opt.RecoveryBudget = budget
		}
		if *policyPath != "" {
			opt.PolicyName = "policy " + filepath.Base(*policyPath)
		}
		res, err := analyze.RunCompare(ctx, cfg, opt)
		if err != nil {
			return err
		}
		if err := writeCompare(e, res, *asJSON, *svgPath); err != nil {
			return err
		}
		return batchResult(e, len(files), res.Failed)
	}
	if *prevalence {
		prev, rep, err := analyze.RunPrevalenceReport(ctx, cfg)
		if err != nil {
			return err
		}
		failed = rep.Failed
		if *asJSON {
			if err := printJSON(e.stdout, prev); err != nil {
				return err
			}
		} else {
			analyze.WritePrevalence(e.stdout, prev)
		}
		return batchResult(e, len(files), failed)
	}
	rep, err := analyze.Run(ctx, cfg)
	if err != nil {
		return err
	}
	switch {
	case *asJSON:
		if err := printJSON(e.stdout, rep); err != nil {
			return err
		}
	case *summary:
		analyze.WriteSummary(e.stdout, rep)
	default:
		analyze.WriteReport(e.stdout, rep, *all)
	}
	return batchResult(e, len(files), rep.Failed)
}

// writeCompare prints analyze --compare's result: JSON, the policy file
// of a recommendation, or the comparison's tables (and its chart to svg).
func writeCompare(e *env, res *analyze.CompareResult, asJSON bool, svg string) error {
	if svg != "" && res.Report != nil {
		var b bytes.Buffer
		if err := compare.WriteSVG(&b, res.Report); err != nil {
			return err
		}
		if err := os.WriteFile(svg, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write chart: %w", err)
		}
	}
	switch {
	case asJSON:
		return printJSON(e.stdout, res)
	case res.Recommendation != nil:
		return compare.WritePolicy(e.stdout, res.Recommendation)
	default:
		return compare.WriteText(e.stdout, res.Report)
	}
}

// inputFiles expands the command line's files and directories (and, with
// discover, the agents' transcript directories) into trace files.
func inputFiles(e *env, args []string, discover bool) ([]string, error) {
	files, skipped, err := importers.Expand(args)
	if err != nil {
		return nil, err
	}
	// Skipped files are said whatever the progress setting: a directory
	// that yields fewer sessions than expected should say why.
	if len(skipped) > 0 {
		fmt.Fprintf(e.stderr, "skipped %d file(s) in the directories whose format is not detected (first: %s)\n", len(skipped), skipped[0])
	}
	if discover {
		home, err := os.UserHomeDir()
		if h := e.getenv("HOME"); h != "" {
			home, err = h, nil
		}
		if err != nil {
			return nil, fmt.Errorf("--discover: %w", err)
		}
		for _, f := range importers.Discover(home, e.getenv) {
			fmt.Fprintf(e.stderr, "discover: %s: %d transcript(s) in %s\n", f.Agent, len(f.Files), f.Where)
			if f.Note != "" {
				fmt.Fprintf(e.stderr, "discover: %s: %s\n", f.Agent, f.Note)
			}
			files = append(files, f.Files...)
		}
	}
	return files, nil
}

// batchResult prints the batch's failures (each names file:line) and their
// count on stderr; any failure makes the command exit 1.
func batchResult(e *env, total int, failed []analyze.FileError) error {
	if len(failed) == 0 {
		return nil
	}
	fmt.Fprintf(e.stderr, "\n%d of %d file(s) failed:\n", len(failed), total)
	for _, f := range failed {
		fmt.Fprintf(e.stderr, "  %s\n", f.Error)
	}
	if len(failed) >= total {
		return fmt.Errorf("all %d file(s) failed: nothing analysed", total)
	}
	return fmt.Errorf("%d of %d file(s) failed (the others were analysed; --strict stops at the first)", len(failed), total)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
