package eligibility

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/policy"
)

// mixedSession is session(n) with person and subtask facts sprinkled in
// at random (a fixed seed): pins, unpins, restores, prune requests,
// subtasks closed with and without consequences, and host compactions.
func mixedSession(n int, seed uint64) []events.Event {
	base := session(n)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var items []string
	var out []events.Event
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	k := 0
	add := func(p events.Payload) {
		k++
		at = at.Add(time.Second)
		out = append(out, events.New(fmt.Sprintf("x%d", k), "", "s1", at, p))
	}
	open := []string{}
	for _, e := range base {
		k++
		at = at.Add(time.Second)
		e.ID, e.Time = fmt.Sprintf("x%d", k), at
		out = append(out, e)
		switch p := e.Data.(type) {
		case *events.Message:
			items = append(items, p.Item)
		case *events.ToolCall:
			items = append(items, p.Item)
		case *events.ToolResult:
			items = append(items, p.Item)
		}
		if len(items) == 0 {
			continue
		}
		pick := func() string {
			if r.IntN(4) == 0 {
				return items[r.IntN(len(items))]
			}
			return items[len(items)-1-r.IntN(min(len(items), 30))]
		}
		switch x := r.IntN(200); {
		case x < 4:
			add(&events.Pin{Item: pick(), By: "ann"})
		case x < 7:
			add(&events.Unpin{Item: pick()})
		case x < 10:
			add(&events.Restore{Item: pick(), By: "bob"})
		case x < 13:
			add(&events.PruneRequest{Item: pick(), By: "cy", Reason: "noise"})
		case x < 15:
			add(&events.Pin{Item: fmt.Sprintf("future%d", k)}) // pending pin
		case x < 18:
			id := fmt.Sprintf("st%d", k)
			open = append(open, id)
			add(&events.SubtaskOpened{Subtask: id, Title: "t"})
		case x < 21 && len(open) > 0:
			id := open[len(open)-1]
			open = open[:len(open)-1]
			sc := &events.SubtaskClosed{Subtask: id}
			switch r.IntN(3) {
			case 0:
				sc.VerifiedBy = &events.Verification{Kind: "test_run", Item: pick()}
				sc.Consequence = []string{pick()}
			case 1:
				sc.VerifiedBy = &events.Verification{Kind: "check"}
				sc.Consequence = []string{pick(), fmt.Sprintf("later%d", k)}
			}
			add(sc)
		case x == 21 && r.IntN(10) == 0:
			add(&events.HostCompaction{Host: "claude-code"})
		}
	}
	return out
}

// TestFastJudgeEqualsReference runs sessions through a core that builds a
// mark only when an item's decision changes and through one that builds it
// at every judgement (building a mark must change no decision), under
// several policies: both must emit the same marks, byte for byte, and end
// with the same decisions.
//
// Under -race the sessions are a third as long (every pattern of session
// and mixedSession still occurs several times); .ci/run's stage "full
// input sets, without -race" runs them at full length.
func TestFastJudgeEqualsReference(t *testing.T) {
	n := 6000
	if testutil.Race {
		n = 2000
	}
	pols := map[string]string{
		"default":    "",
		"l4":         "eligibility:\n  l4: true\n",
		"keep-first": "eligibility:\n  keep_copy: first\n  protect_recent_turns: 0\n",
		"all-rungs":  "eligibility:\n  rungs: [L0, L1, L2, L3]\n  l4: true\n  protected_tools: [Grep]\n  protected_files: [\"f1*.go\"]\n",
		"no-errored": "eligibility:\n  errored_inputs: false\n  min_prune_tokens: 500\n",
	}
	sessions := map[string][]events.Event{
		"synthetic": session(n),
		"mixed-1":   mixedSession(n, 1),
		"mixed-2":   mixedSession(n, 2),
	}
	for pn, y := range pols {
		p, err := policy.Parse([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		for sn, evs := range sessions {
			t.Run(pn+"/"+sn, func(t *testing.T) {
				t.Parallel()
				fast, ref := New(p, "t", "s1"), New(p, "t", "s1")
				ref.alwaysBuild = true
				marks := 0
				for _, e := range evs {
					got := fast.Observe(e)
					sameMarks(t, e.ID, got, ref.Observe(e))
					marks += len(got)
				}
				if marks == 0 {
					t.Fatal("no marks")
				}
				g, _ := json.Marshal(fast.Decisions())
				w, _ := json.Marshal(ref.Decisions())
				if string(g) != string(w) {
					t.Fatal("final decisions differ")
				}
			})
		}
	}
}

// TestProtectedReasonIsFirstProtection: a blocked proposal's mark lists its
// protections (protections) with the decision's reason (firstProtection)
// first, for every set of protections.
func TestProtectedReasonIsFirstProtection(t *testing.T) {
	c := New(policy.Default(), "", "s")
	surv := &item{id: "o0"}
	it := &item{id: "o1", kind: kInput, call: &call{tool: "Edit", rule: "CLAUDE.md", protFile: "*.go",
		fail: &callFailure{explains: "the input explains the failure"}}}
	cand := &verdict{decision: events.Prune, survivor: surv}
	for m := protSet(1); m < protSet(1)<<len(protReasons); m++ {
		prot, ev := c.protections(it, cand, m, nil)
		if len(prot) != bits.OnesCount16(uint16(m)) || len(ev) != len(prot) {
			t.Fatalf("mask %b: %d reasons, %d evidence", m, len(prot), len(ev))
		}
		if prot[0] != firstProtection(m) {
			t.Fatalf("mask %b: first %s, key %s", m, prot[0], firstProtection(m))
		}
	}
}
