package lab

import (
	"embed"
	"fmt"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/eval/lab/fixtures"
	"github.com/prunesched/prunesched/internal/eval/lab/peers"
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
	CondG       = "G"
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
	// script, when set, is the scripted agent that rewrites the session's
	// facts before the row runs (condition G adds its removal requests);
	// probes and labels follow the new fact indices.
	script func(s *fixtures.Session) (*fixtures.Session, error)
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

// policyFiles holds the opt-in policies the lab runs from policy files
// (lab/policies/*.yaml, the format `prunesched serve --policy` reads).
//
//go:embed policies
var policyFiles embed.FS

// PolicyFile returns the policy file lab/policies/file as the lab runs
// it (e.g. "recoverable.yaml", row R's: the policy of
// examples/recoverable.yaml).
func PolicyFile(file string) ([]byte, error) {
	b, err := policyFiles.ReadFile("policies/" + file)
	if err != nil {
		return nil, fmt.Errorf("lab policy file %s: %w", file, err)
	}
	return b, nil
}

// policyFileRow is a row whose marks are the production cores' under the
// policy file lab/policies/file (defaults filled in as for any policy
// file), with scheduled timing and kind opt-in.
func policyFileRow(name, file, desc string) (condition, error) {
	b, err := PolicyFile(file)
	if err != nil {
		return condition{}, fmt.Errorf("lab row %s: %w", name, err)
	}
	p, err := policy.Parse(b)
	if err != nil {
		return condition{}, fmt.Errorf("lab row %s: policy file %s: %w", name, file, err)
	}
	return condition{name: name, kind: "opt-in", primary: StrategyScheduled, pol: &p, desc: desc}, nil
}

// optInPolicyFiles are the rows run from policy files, in report order,
// after D-span. Adding one is one line:
//
//	{"D+recoverable", "recoverable.yaml", "D + the opt-in recoverable policy (...)"},
func optInPolicyFiles() [][3]string {
	return [][3]string{
		// name, file under lab/policies, legend
		{"R", "recoverable.yaml", "D + the opt-in recoverable policy: cold tool outputs (old, no distinctive term used since) removed at cache-safe points, recoverable by handle, not proven redundant"},
	}
}

// conditions lists the rows in report order.
func conditions() ([]condition, error) {
	out := fixedConditions()
	var files []condition
	for _, f := range optInPolicyFiles() {
		c, err := policyFileRow(f[0], f[1], f[2])
		if err != nil {
			return nil, err
		}
		files = append(files, c)
	}
	for i, c := range out {
		if c.name == CondNoSpan {
			return append(out[:i+1:i+1], append(files, out[i+1:]...)...), nil
		}
	}
	return append(out, files...), nil
}

// fixedConditions are the rows defined here, in report order.
func fixedConditions() []condition {
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
		{name: CondG, kind: "agent", primary: StrategyScheduled, pol: prod([]string{"L0", "L1", "L2"}, true, true), script: withAgentRequests,
			desc: "D + agent-requested removals: the agent asks to remove every output of a subtask it closed (judged with every protection, applied by the scheduler)"},
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
