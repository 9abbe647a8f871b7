package analyze

import (
	"fmt"
	"io"
)

// WritePrevalence prints the prevalence report as Markdown tables: per
// format and in total, each shape's count, tokens and share of the group's
// tokens with what the policy decided on its items; then the agreement with
// the hosts' own pruning, per file and in total.
func WritePrevalence(w io.Writer, p *PrevalenceReport) {
	fmt.Fprintf(w, "### Prevalence of prunable shapes (policy %s, tokenizer %s)\n\n", p.PolicyVersion, p.Tokenizer)
	fmt.Fprintf(w, "| group | sessions | items | tokens | tool outputs | tool output tokens | in any shape | policy prunes outside shapes |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, g := range append(append([]PrevalenceGroup{}, p.Formats...), p.Total) {
		label := g.Name
		if g.Name == "all" {
			label = "**all**"
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d (%.1f%%) | %d (%.1f%%) | %d (%d tok) |\n", label, g.Sessions, g.Items, g.Tokens,
			g.ToolOutputs, g.ToolOutputTokens, 100*g.ToolOutputShare, g.ShapeTokens, 100*g.ShapeShare, g.PrunesOutside, g.PrunesOutsideTokens)
	}
	for _, g := range append(append([]PrevalenceGroup{}, p.Formats...), p.Total) {
		fmt.Fprintf(w, "\n#### %s: %d session(s), %d tokens, tool outputs %.1f%%\n\n", g.Name, g.Sessions, g.Tokens, 100*g.ToolOutputShare)
		fmt.Fprintf(w, "| shape | count | tokens | share | PRUNE | DEFER | ABSTAIN | KEEP | no mark | of which host-pruned |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		hp, hpTok := 0, 0
		for _, s := range g.Shapes {
			hp, hpTok = hp+s.HostPruned, hpTok+s.HostPrunedTokens
		}
		rows := append(append([]ShapeStats{}, g.Shapes...), ShapeStats{Shape: "**any shape**", Count: countAll(g.Shapes), Tokens: g.ShapeTokens, Share: g.ShapeShare, Policy: g.Policy, HostPruned: hp, HostPrunedTokens: hpTok})
		for _, s := range rows {
			if s.Count == 0 && s.Shape != "**any shape**" {
				fmt.Fprintf(w, "| %s | 0 | 0 | 0.0%% | | | | | | |\n", s.Shape)
				continue
			}
			q := s.Policy
			fmt.Fprintf(w, "| %s | %d | %d | %.1f%% | %s | %s | %s | %s | %s | %s |\n", s.Shape, s.Count, s.Tokens, 100*s.Share,
				cell(q.Prune, q.PruneTokens), cell(q.Defer, q.DeferTokens), cell(q.Abstain, q.AbstainTokens), cell(q.Keep, q.KeepTokens), cell(q.None, q.NoneTokens),
				cell(s.HostPruned, s.HostPrunedTokens))
		}
	}
	fmt.Fprintf(w, "\n### Agreement with the hosts' own pruning (tool outputs the host removed itself vs our PRUNE decisions)\n\n")
	if len(p.Host) == 0 {
		fmt.Fprintf(w, "No session has outputs the host pruned itself.\n")
		return
	}
	fmt.Fprintf(w, "| file | host-pruned | both removed | only the host | only ours |\n|---|---:|---:|---:|---:|\n")
	for _, h := range append(append([]HostAgreement{}, p.Host...), p.HostTotal) {
		label := h.Name
		if label == "all" {
			label = "**all**"
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s |\n", label, h.HostPruned, cell(h.Both, h.BothTokens), cell(h.OnlyHost, h.OnlyHostTokens), cell(h.OnlyOurs, h.OnlyOursTokens))
	}
}

func cell(n, tok int) string {
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%d tok)", n, tok)
}

func countAll(ss []ShapeStats) int {
	n := 0
	for _, s := range ss {
		n += s.Count
	}
	return n
}
