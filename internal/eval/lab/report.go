package lab

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/prunesched/prunesched/scheduler"
)

// WriteTable prints the results as readable tables, one per metric group,
// then the falsification clauses.
func WriteTable(w io.Writer, r *Results) error {
	fx := r.Fixture
	fmt.Fprintf(w, "Context Lab  seed %d: %d sessions, %d tool calls, %d model requests, %d idle gaps > 5m, %d items, %d probes, %d raw tokens (%s)\n",
		r.Seed, fx.Sessions, fx.ToolCalls, fx.Requests, fx.IdleGaps, fx.Items, fx.Probes, fx.RawTokens, r.Tokenizer)
	fmt.Fprintf(w, "Ground truth: %s; safe items worth removing by rung %s (%d tokens)\n", mapStr(fx.ItemsByClass), mapStr(fx.SafeByRung), fx.SafeTokens)
	fmt.Fprintf(w, "Note: %s.\n", r.Note)

	fmt.Fprintf(w, "\nROWS (every table below has one line per row; kind: condition = the experiment's baseline A to oracle F, opt-in / opt-out = a variant of the shipped default D, agent = the model asks for removals, peer = another tool's rule)\n")
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	for _, c := range r.Conditions {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Kind, c.Description)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nREDUCTION (final bundle under the row's own timing; stored tokens; occupancy = prompt tokens summed over every request, vs A)\n")
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "row\ttiming\tremoved\tplaceholder\tnet\tnet % raw\toccupancy -%\titems\tmarked tok\tmodel tok\t")
	for _, c := range r.Conditions {
		x := c.Reduction
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.1f\t%.1f\t%d\t%d\t%d\t\n", c.Name, c.Timing, x.TokensRemoved, x.PlaceholderTokens, x.NetTokensRemoved, x.NetPercentOfRaw, x.OccupancyReduction, x.ItemsRemoved, x.TokensMarked, x.ModelTokens)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nPRESERVATION (against the hidden labels; a false prune removes a needed or trap item; unproven = labelled keep; false after recovery = false prunes one context_recover cannot undo)\n")
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "row\tprunes\tsafe\tfalse\tfalse after recovery\tfalse rate\ttraps\tunproven\tprecision\trecall\tcritical intact\trecover refs ok\t")
	for _, c := range r.Conditions {
		p := c.Preservation
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.3f\t%d\t%d\t%.3f\t%.3f\t%d/%d\t%d/%d\t\n", c.Name, p.Prunes, p.SafePrunes, p.FalsePrunes, p.FalsePrunesUnrecoverable, p.FalsePruneRate, p.TrapsPruned, p.UnprovenPrunes, p.Precision, p.Recall, p.CriticalIntact, p.CriticalItems, p.RecoverableOK, p.RecoverableRefs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nBEHAVIOUR (probe evidence present verbatim in the bundle rendered at the probe's request: evidence presence, not model success)\n")
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "row\tpass rate\tpassed\trecoverable via placeholder\tlost\tpass (immediate)\tpass (scheduled)\tanswered with recovery\trate\trecoveries\textra requests\trecovery tokens\trecovery $\tcost with recoveries\t")
	for _, c := range r.Conditions {
		b := c.Behaviour
		fmt.Fprintf(tw, "%s\t%.3f\t%d/%d\t%d\t%d\t%s\t%s\t%d/%d\t%.3f\t%d\t%d\t%d\t%.2f\t$%.2f (%+.1f%%)\t\n", c.Name, b.ProbePassRate, b.Passed, b.Probes, b.RecoveredViaPlaceholder, b.Lost, rate(b.ByStrategy, StrategyImmediate), rate(b.ByStrategy, StrategyScheduled),
			b.AnsweredWithRecovery, b.Probes, b.AnswerRateWithRecovery, b.Recoveries, b.RecoveryRequests, b.RecoveryTokens, b.RecoveryCost, c.Economics.CostWithRecoveries, c.Economics.CostWithRecoveriesChange)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "(a probe whose evidence was removed is answered after one recovery when the row's placeholder names the item: context_recover #N appends it byte for byte; each item is fetched once, at the first probe that needs it, and stays; priced by the scheduler's cache model, Anthropic prices, row's own timing, %d output tokens per recovery call)\n", scheduler.RecoveryAnswerTokens)

	if err := writeAgentRequests(w, r); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nLATER-USE SIGNAL (a proxy for a false prune on real sessions, validated here against the labels: positive = a removed item labelled needed or trap)\n")
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "row\tremoved\tlater-used\tfalse prunes found\tflagged safe\tflagged keep\tfalse prunes missed\tprecision\trecall\t")
	for _, c := range r.Conditions {
		if c.Timing == StrategyNone {
			continue
		}
		l := c.LaterUse
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.3f\t%.3f\t\n", c.Name, l.Removed, l.LaterUsed, l.TruePositives, l.FalsePositives, l.Undetermined, l.FalseNegatives, l.Precision, l.Recall)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nECONOMICS (prompt cost in USD over all sessions, production cache model; change vs A; FD = mean first divergence, radius = cached tokens invalidated)\n")
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "row\tprovider\tstrategy\tcost\tchange %\tcache read\tcache write\tuncached\tapplications\tmean FD\tradius\t")
	for _, c := range r.Conditions {
		for _, e := range c.Economics.Runs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%+.1f\t%d\t%d\t%d\t%d\t%.0f\t%d\t\n", c.Name, e.Provider, e.Strategy, e.Cost, e.CostChange, e.CacheRead, e.CacheWrite, e.Uncached, e.Applications, e.MeanFirstDivergence, e.MutationRadius)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nSCHEDULED TRIGGERS (Anthropic, scheduled: what each timing rule released; break = scheduler's priced cache break, saving = its expected saving, USD)\n")
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "row	trigger	applications	tokens removed	radius	break	saving	")
	for _, c := range r.Conditions {
		e, ok := c.runOK("anthropic", StrategyScheduled)
		if !ok {
			continue
		}
		keys := make([]string, 0, len(e.ByTrigger))
		for k := range e.ByTrigger {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t := e.ByTrigger[k]
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.2f\t%.2f\t\n", c.Name, k, t.Applications, t.TokensRemoved, t.MutationRadius, t.CacheCost, t.ExpectedSaving)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nFALSIFICATION (the claims the design rests on, each checked on these fixtures: \"holds\" or \"does not hold\", and why; results.json records each as the clause that would falsify it)\n")
	for _, cl := range r.Falsification {
		claim, holds := Claim(cl)
		verdict := "does not hold"
		if holds {
			verdict = "holds"
		}
		fmt.Fprintf(w, "- %s: %s, because %s.\n", claim, verdict, cl.Evidence)
	}
	return nil
}

// claims phrase each falsification clause (by ID) as the positive claim
// it would falsify: the claim holds when the clause does not.
var claims = map[string]string{
	"dedup_no_occupancy_benefit":             "exact deduplication (B) saves at least %.0f%% of tokens sent (summed over requests)",
	"dedup_no_cost_benefit":                  "exact deduplication (B) saves at least %.0f%% of the prompt cost (USD)",
	"redundant_proves_necessary":             "the production rungs (B, C, D, D+L3) remove only what the agent does not need again (no false prune, and every probe A passes)",
	"cache_cost_exceeds_benefit_immediate":   "under immediate application, pruning saves more than its cache breaks cost (every production row and F cost at most what A costs)",
	"cache_cost_exceeds_benefit_scheduled":   "under scheduled application, pruning saves more than its cache breaks cost (every production row and F cost at most what A costs)",
	"deterministic_covers_too_little":        "the deterministic rungs (D, the shipped default, and D+L3) save at least %.0f%% of tokens sent (summed over requests)",
	"semantic_judgement_routinely_necessary": "most of the removable material is within reach of the mechanical rungs (L0-L2, errored inputs), without judgement",
}

// Claim is the positive claim a falsification clause tests, and whether it
// holds on the results (the clause's Holds inverted). A clause without a
// phrasing here is its own statement, holding when the clause does.
func Claim(cl Clause) (string, bool) {
	c, ok := claims[cl.ID]
	if !ok {
		return cl.Statement, cl.Holds
	}
	if strings.Contains(c, "%") {
		c = fmt.Sprintf(c, Meaningful)
	}
	return c, !cl.Holds
}

// writeAgentRequests prints the agent's removal requests and their
// verdicts, for the rows where the agent asked (condition G).
func writeAgentRequests(w io.Writer, r *Results) error {
	var rows []ConditionResult
	for _, c := range r.Conditions {
		if c.AgentRequests != nil {
			rows = append(rows, c)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nAGENT REQUESTS (the agent's removal requests, judged by eligibility with every protection; refused by the protection in force)\n")
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "row\tasked\taccepted\trefused\trefused by\t")
	for _, c := range rows {
		a := c.AgentRequests
		refused := 0
		for _, n := range a.Refused {
			refused += n
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t\n", c.Name, a.Asked, a.Accepted, refused, mapStr(a.Refused))
	}
	return tw.Flush()
}

func rate(m map[string]float64, k string) string {
	v, ok := m[k]
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

func mapStr(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// WriteCSV writes one line per row with the headline metric of every group
// and the cost of every provider and strategy.
func WriteCSV(w io.Writer, r *Results) error {
	cw := csv.NewWriter(w)
	head := []string{"name", "kind", "timing", "tokens_removed", "placeholder_tokens", "net_tokens_removed", "net_percent_of_raw", "occupancy_reduction_percent",
		"items_removed", "model_tokens", "prunes", "safe_prunes", "false_prunes", "false_prune_rate", "traps_pruned", "unproven_prunes", "precision", "recall",
		"critical_items", "critical_intact", "probes", "probe_pass_rate", "recovered_via_placeholder", "lost", "cost", "cost_change_percent",
		"false_prunes_unrecoverable", "answered_with_recovery", "answer_rate_with_recovery", "recoveries", "recovery_requests", "recovery_tokens", "recovery_cost",
		"cost_with_recoveries", "cost_with_recoveries_change_percent", "agent_requests", "agent_requests_accepted"}
	for _, p := range providers {
		for _, st := range []string{StrategyNone, StrategyImmediate, StrategyScheduled} {
			head = append(head, p+"_"+st+"_cost", p+"_"+st+"_mutation_radius")
		}
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	i := strconv.Itoa
	for _, c := range r.Conditions {
		x, p, b := c.Reduction, c.Preservation, c.Behaviour
		row := []string{c.Name, c.Kind, c.Timing, i(x.TokensRemoved), i(x.PlaceholderTokens), i(x.NetTokensRemoved), f(x.NetPercentOfRaw), f(x.OccupancyReduction),
			i(x.ItemsRemoved), i(x.ModelTokens), i(p.Prunes), i(p.SafePrunes), i(p.FalsePrunes), f(p.FalsePruneRate), i(p.TrapsPruned), i(p.UnprovenPrunes), f(p.Precision), f(p.Recall),
			i(p.CriticalItems), i(p.CriticalIntact), i(b.Probes), f(b.ProbePassRate), i(b.RecoveredViaPlaceholder), i(b.Lost), f(c.Economics.Cost), f(c.Economics.CostChange),
			i(p.FalsePrunesUnrecoverable), i(b.AnsweredWithRecovery), f(b.AnswerRateWithRecovery), i(b.Recoveries), i(b.RecoveryRequests), i(b.RecoveryTokens), f(b.RecoveryCost),
			f(c.Economics.CostWithRecoveries), f(c.Economics.CostWithRecoveriesChange)}
		if a := c.AgentRequests; a != nil {
			row = append(row, i(a.Asked), i(a.Accepted))
		} else {
			row = append(row, "0", "0")
		}
		for _, pr := range providers {
			for _, st := range []string{StrategyNone, StrategyImmediate, StrategyScheduled} {
				e, ok := c.runOK(pr, st)
				if !ok {
					row = append(row, "", "")
					continue
				}
				row = append(row, f(e.Cost), i(e.MutationRadius))
			}
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func (c *ConditionResult) runOK(provider, strategy string) (EconRun, bool) {
	for _, e := range c.Economics.Runs {
		if e.Provider == provider && e.Strategy == strategy {
			return e, true
		}
	}
	return EconRun{}, false
}
