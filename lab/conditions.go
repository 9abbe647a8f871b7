package lab

import (
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/lab/fixtures"
	"github.com/prunesched/prunesched/lab/peers"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/scheduler"
)

// Condition and peer names, as reported.
const (
	CondA       = "A"
	CondB       = "B"
	CondC       = "C"
	CondD       = "D"
	CondL3      = "D+L3"
	CondNoSpan  = "D-span"
	CondE       = "E"
	CondF       = "F"
	PeerDCP     = "DCP"
	PeerClear   = "clear_tool_uses"
	PeerMasking = "masking"
)

// Strategies.
const (
	StrategyNone      = scheduler.StrategyNone
	StrategyImmediate = scheduler.StrategyImmediate
	StrategyScheduled = scheduler.StrategyScheduled
)

// condition is one row of the experiment.
type condition struct {
	name, desc string
	kind       string // "condition", "opt-in" or "peer"
	// primary is the strategy the row's own timing uses: scheduled for the
	// production policies, immediate for the peers, E and F.
	primary string
	// pol is set for rows that run the production cores.
	pol *policy.Policy
	// marks produces a non-production row's marks.
	marks func(s *fixtures.Session) []events.Event
	// foreignPlaceholder is true for peers: their documented placeholders
	// ("[Output removed to save context ...]", "[cleared]") do not name the
	// original, so evidence behind them does not count as recoverable even
	// though the lab renders them with prunesched's placeholder.
	foreignPlaceholder bool
}

// prod is the production policy with the given rungs, errored-input
// pruning and span references on or off.
func prod(rungs []string, errored, spans bool) *policy.Policy {
	p := policy.Default()
	p.Eligibility.Rungs = rungs
	if !errored {
		f := false
		p.Eligibility.ErroredInputs = &f
	}
	if !spans {
		f := false
		p.Eligibility.SpanRefs = &f
	}
	p.SetDefaults()
	return &p
}

// conditions lists the rows in report order.
func conditions() []condition {
	return []condition{
		{name: CondA, kind: "condition", primary: StrategyNone, desc: "raw history: no pruning"},
		{name: CondB, kind: "condition", primary: StrategyScheduled, pol: prod([]string{"L0", "L1"}, false, false),
			desc: "exact duplicates only (production L0/L1 under version controls)"},
		{name: CondC, kind: "condition", primary: StrategyScheduled, pol: prod([]string{"L0", "L1"}, true, false),
			desc: "B + errored-input pruning with residues (production)"},
		{name: CondD, kind: "condition", primary: StrategyScheduled, pol: prod([]string{"L0", "L1", "L2"}, true, true),
			desc: "C + superseded observations, L2, + span references, L1 span (the shipped default)"},
		{name: CondL3, kind: "opt-in", primary: StrategyScheduled, pol: prod([]string{"L0", "L1", "L2", "L3"}, true, true),
			desc: "D + completed-work residue, L3 (production; opt-in: off by default since this lab found its false prunes)"},
		{name: CondNoSpan, kind: "opt-out", primary: StrategyScheduled, pol: prod([]string{"L0", "L1", "L2"}, true, false),
			desc: "D without span references (eligibility.span_refs: false)"},
		{name: CondE, kind: "condition", primary: StrategyImmediate, desc: "aggressive heuristic pruning (deletes, never summarises)",
			marks: func(s *fixtures.Session) []events.Event { return peers.Aggressive(s.Events, peers.DefaultAggressive()) }},
		{name: CondF, kind: "condition", primary: StrategyImmediate, desc: "oracle: exactly the items the fixture labels safe",
			marks: func(s *fixtures.Session) []events.Event { return peers.Oracle(s) }},
		{name: PeerDCP, kind: "peer", foreignPlaceholder: true, primary: StrategyImmediate, desc: "DCP: dedup tool+args keep newest; errored inputs after 4 requests",
			marks: func(s *fixtures.Session) []events.Event { return peers.DCP(s.Events, peers.DefaultDCP()) }},
		{name: PeerClear, kind: "peer", foreignPlaceholder: true, primary: StrategyImmediate, desc: "Anthropic clear_tool_uses defaults: over 100k tokens keep the 3 most recent tool uses",
			marks: func(s *fixtures.Session) []events.Event {
				return peers.ClearToolUses(s.Events, peers.DefaultClearToolUses())
			}},
		{name: PeerMasking, kind: "peer", foreignPlaceholder: true, primary: StrategyImmediate, desc: "observation masking: keep the last 10 observations",
			marks: func(s *fixtures.Session) []events.Event { return peers.Masking(s.Events, peers.DefaultMaskWindow) }},
	}
}
