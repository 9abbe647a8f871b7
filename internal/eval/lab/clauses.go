package lab

import (
	"fmt"
	"strings"
)

// Meaningful is the threshold (percent) below which a benefit counts as no
// meaningful benefit in the falsification clauses.
const Meaningful = 5.0

func (r *Results) row(name string) *ConditionResult {
	for i := range r.Conditions {
		if r.Conditions[i].Name == name {
			return &r.Conditions[i]
		}
	}
	return nil
}

func (c *ConditionResult) run(provider, strategy string) EconRun {
	for _, e := range c.Economics.Runs {
		if e.Provider == provider && e.Strategy == strategy {
			return e
		}
	}
	return EconRun{}
}

// clauses checks the spec's falsification clauses against the results.
// Each states plainly whether it holds on these fixtures, and why.
func clauses(r *Results) []Clause {
	var out []Clause
	a, b, d, sh, f := r.row(CondA), r.row(CondB), r.row(CondD), r.row(CondL3), r.row(CondF)
	if a == nil || b == nil || d == nil || sh == nil || f == nil {
		return nil
	}
	bs, bi := b.run("anthropic", StrategyScheduled), b.run("anthropic", StrategyImmediate)
	out = append(out, Clause{
		ID:        "dedup_no_occupancy_benefit",
		Statement: fmt.Sprintf("exact deduplication (B) yields less than %.0f%% occupancy benefit", Meaningful),
		Holds:     b.Reduction.OccupancyReduction < Meaningful,
		Evidence: fmt.Sprintf("B removes %.1f%% of prompt tokens summed over requests (net %.1f%% of raw tokens at the end)",
			b.Reduction.OccupancyReduction, b.Reduction.NetPercentOfRaw),
	}, Clause{
		ID:        "dedup_no_cost_benefit",
		Statement: fmt.Sprintf("exact deduplication (B) yields less than %.0f%% cost benefit", Meaningful),
		Holds:     -bs.CostChange < Meaningful && -bi.CostChange < Meaningful,
		Evidence:  fmt.Sprintf("B changes Anthropic prompt cost by %+.1f%% scheduled and %+.1f%% immediate", bs.CostChange, bi.CostChange),
	})
	var harm []string
	for _, name := range []string{CondB, CondC, CondD, CondL3} {
		c := r.row(name)
		if c.Preservation.FalsePrunes > 0 || c.Behaviour.ProbePassRate < a.Behaviour.ProbePassRate {
			harm = append(harm, fmt.Sprintf("%s: %d false prunes, probe pass %.3f vs A %.3f", name, c.Preservation.FalsePrunes, c.Behaviour.ProbePassRate, a.Behaviour.ProbePassRate))
		}
	}
	ev := "B, C, D and D+L3 pruned no needed or trap item and passed as many probes as A"
	if len(harm) > 0 {
		ev = strings.Join(harm, "; ")
	}
	out = append(out, Clause{
		ID:        "redundant_proves_necessary",
		Statement: "observations the production rungs call redundant prove behaviourally necessary",
		Holds:     len(harm) > 0, Evidence: ev,
	})
	for _, st := range []string{StrategyImmediate, StrategyScheduled} {
		var worse []string
		for _, name := range []string{CondB, CondC, CondD, CondL3, CondF} {
			c := r.row(name)
			if e := c.run("anthropic", st); e.CostChange > 0 {
				worse = append(worse, fmt.Sprintf("%s %+.1f%%", name, e.CostChange))
			}
		}
		ev := "no production row or F costs more than A under " + st + " application (Anthropic prices)"
		if len(worse) > 0 {
			ev = "cost against A under " + st + " application (Anthropic): " + strings.Join(worse, ", ")
		}
		out = append(out, Clause{
			ID:        "cache_cost_exceeds_benefit_" + st,
			Statement: "cache-invalidation costs exceed pruning benefits under " + st + " application",
			Holds:     len(worse) > 0, Evidence: ev,
		})
	}
	out = append(out, Clause{
		ID:        "deterministic_covers_too_little",
		Statement: fmt.Sprintf("deterministic classes (D, the shipped default, and D+L3) cover too little to matter: less than %.0f%% occupancy benefit", Meaningful),
		Holds:     sh.Reduction.OccupancyReduction < Meaningful,
		Evidence: fmt.Sprintf("occupancy benefit D %.1f%%, D+L3 %.1f%%, oracle F %.1f%%; recall against F: D %.2f, D+L3 %.2f",
			d.Reduction.OccupancyReduction, sh.Reduction.OccupancyReduction, f.Reduction.OccupancyReduction, d.Preservation.Recall, sh.Preservation.Recall),
	})
	l3 := f.Reduction.ByReason["L3 COMPLETED_RESIDUE"].Tokens
	out = append(out, Clause{
		ID:        "semantic_judgement_routinely_necessary",
		Statement: "most of the removable material needs judgement beyond the mechanical rungs (L0-L2, errored inputs)",
		Holds:     f.Reduction.TokensRemoved > 0 && 2*l3 > f.Reduction.TokensRemoved,
		Evidence: fmt.Sprintf("of the oracle's %d removed tokens, %d (%.0f%%) rest on completed-work residue (L3), which needs the agent to record the consequence; the fixtures label nothing safe that needs semantic judgement, so they cannot test this clause beyond that share",
			f.Reduction.TokensRemoved, l3, 100*float64(l3)/float64(max(1, f.Reduction.TokensRemoved))),
	})
	return out
}
