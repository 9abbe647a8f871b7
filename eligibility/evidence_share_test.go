package eligibility

import (
	"testing"

	"github.com/prunesched/prunesched/events"
)

// TestRunVerdictSharesEqualEvidence: a run's next PRUNE with the same
// evidence shares the previous one's array, one with other evidence gets
// its own, and neither is written through by a mark appending to it.
func TestRunVerdictSharesEqualEvidence(t *testing.T) {
	var run copyRun
	core := &Core{}
	ev := func(item string) []events.Evidence {
		return []events.Evidence{{Kind: "content_hash", Item: item, Hash: "h"}, {Kind: "keep_copy", Item: item, Value: "first"}}
	}
	v := verdict{decision: events.Prune, rung: events.L0, reason: events.ReasonDuplicateOutput}
	a := core.runVerdict(&run, v, ev("i1")...)
	b := core.runVerdict(&run, v, ev("i1")...)
	if &a.evidence[0] != &b.evidence[0] {
		t.Fatal("equal evidence not shared")
	}
	c := core.runVerdict(&run, v, ev("i2")...)
	if &c.evidence[0] == &b.evidence[0] || c.evidence[0].Item != "i2" || b.evidence[0].Item != "i1" {
		t.Fatalf("other evidence shared or overwritten: %+v %+v", b.evidence, c.evidence)
	}
	// A mark holding the shared evidence and appending to it (the agent's
	// answer) copies it.
	m := sharedEvidence(c.evidence)
	m = append(m, events.Evidence{Kind: "agent_request"})
	m[0].Item = "changed"
	if len(c.evidence) != 2 || c.evidence[0].Item != "i2" {
		t.Fatalf("the verdict's evidence was written through: %+v", c.evidence)
	}
}
