package eligibility

import (
	"testing"

	"github.com/prunesched/prunesched/events"
)

// A rung the policy disables (eligibility.rungs, eligibility.errored_inputs)
// proposes nothing; the enabled rungs decide as before.
func TestRungToggles(t *testing.T) {
	run := func(s *sess) {
		s.tool("Read", read("a.go"), "A1")                                                     // c1
		s.tool("Read", read("a.go"), "A1")                                                     // c2: L0 copy of c1
		s.tool("Read", map[string]any{"file_path": "b.go", "offset": 1, "limit": 5}, "B-part") // c3
		s.tool("Read", read("b.go"), "B-whole")                                                // c4: covers c3 (L2)
		s.fail("Write", bigWrite("c.go", "X"), "permission denied")                            // c5
		s.tool("Write", bigWrite("c.go", "Y"), "ok")                                           // c6
		s.reqs(5)
	}
	cases := []struct {
		name   string
		policy string
		wants  []want
	}{
		{"default: all", "", []want{
			{"c2", events.Prune, events.ReasonDuplicateOutput},
			{"c3", events.Prune, events.ReasonSuperseded},
			{"c5/input", events.Prune, events.ReasonErroredInput},
		}},
		{"B: L0 L1 only", "eligibility:\n  rungs: [L0, L1]\n  errored_inputs: false\n", []want{
			{"c2", events.Prune, events.ReasonDuplicateOutput},
			{"c3", "", ""},
			{"c5/input", "", ""},
		}},
		{"C: B plus errored", "eligibility:\n  rungs: [L0, L1]\n", []want{
			{"c2", events.Prune, events.ReasonDuplicateOutput},
			{"c3", "", ""},
			{"c5/input", events.Prune, events.ReasonErroredInput},
		}},
		{"D: C plus L2", "eligibility:\n  rungs: [L0, L1, L2]\n", []want{
			{"c2", events.Prune, events.ReasonDuplicateOutput},
			{"c3", events.Prune, events.ReasonSuperseded},
			{"c5/input", events.Prune, events.ReasonErroredInput},
		}},
		{"L0 off", "eligibility:\n  rungs: [L2]\n  errored_inputs: false\n", []want{
			{"c2", "", ""},
			{"c3", events.Prune, events.ReasonSuperseded},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSess(t, tc.policy)
			run(s)
			check(t, s, tc.wants)
		})
	}
}
