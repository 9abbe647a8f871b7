package lab

import (
	"math"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/eval/lab/fixtures"
)

// TestAgentScript: G's agent asks, right after each SubtaskClosed and at
// its time, for the removal of every tool output seen while the subtask
// was open, one request per output; the probes and labels move with the
// added facts (a probe still points at its own request), and the session
// given is not changed.
func TestAgentScript(t *testing.T) {
	fx, err := fixtures.Generate(fixtures.Config{Seed: small.Seed, Sessions: 1, MinCalls: small.MinCalls, MaxCalls: small.MaxCalls}, tokens.New())
	if err != nil {
		t.Fatal(err)
	}
	s := fx.Sessions[0]
	before := len(s.Events)
	g, err := withAgentRequests(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Events) != before {
		t.Fatal("the script changed the session it was given")
	}
	// Expected requests: the outputs between each open and close.
	var want []string
	open := map[string][]string{}
	for _, ev := range s.Events {
		switch p := ev.Data.(type) {
		case *events.SubtaskOpened:
			open[p.Subtask] = []string{}
		case *events.ToolResult:
			for k := range open {
				open[k] = append(open[k], p.Item)
			}
		case *events.SubtaskClosed:
			want = append(want, open[p.Subtask]...)
			delete(open, p.Subtask)
		}
	}
	if len(want) == 0 {
		t.Fatal("fixture session has no closed subtask with outputs")
	}
	var got []string
	for i, ev := range g.Events {
		p, ok := ev.Data.(*events.PruneRequest)
		if !ok {
			continue
		}
		got = append(got, p.Item)
		if p.By != events.ByAgent || p.Reason != AgentRequestReason {
			t.Errorf("%s: by %q reason %q", ev.ID, p.By, p.Reason)
		}
		prev := g.Events[i-1]
		if _, isClose := prev.Data.(*events.SubtaskClosed); !isClose {
			if _, isReq := prev.Data.(*events.PruneRequest); !isReq {
				t.Errorf("%s follows %s, not the close or another request", ev.ID, prev.Type)
			}
		}
		if !ev.Time.Equal(prev.Time) {
			t.Errorf("%s at %s, not at the close's time %s", ev.ID, ev.Time, prev.Time)
		}
	}
	if len(got) != len(want) || len(g.Events) != before+len(want) {
		t.Fatalf("requests %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("request %d on %s, want %s", i, got[i], want[i])
		}
	}
	for i, p := range g.Probes {
		if g.Events[p.Fact].ID != s.Events[s.Probes[i].Fact].ID {
			t.Errorf("probe %s moved to %s, want its request %s", p.ID, g.Events[p.Fact].ID, s.Events[s.Probes[i].Fact].ID)
		}
	}
	for id, l := range g.Labels {
		if o := s.Labels[id]; o.SafeFrom > 0 && g.Events[l.SafeFrom].ID != s.Events[o.SafeFrom].ID {
			t.Errorf("label %s: safe from %s, want %s", id, g.Events[l.SafeFrom].ID, s.Events[o.SafeFrom].ID)
		}
	}
}

// TestAgentRow: G runs the agent's requests through the production cores:
// every request gets a verdict (accepted or refused by a protection), the
// accepted ones remove more than D, and what G removes beyond D's rules is
// the agent's to answer for.
func TestAgentRow(t *testing.T) {
	t.Parallel()
	r := smallRun(t)
	g, d := r.row(CondG), r.row(CondD)
	a := g.AgentRequests
	if a == nil || a.Asked == 0 {
		t.Fatal("G: the agent asked nothing")
	}
	refused := 0
	for reason, n := range a.Refused {
		if reason == "NO_VERDICT" {
			t.Errorf("G: %d requests without a verdict", n)
		}
		refused += n
	}
	if a.Accepted+refused != a.Asked || a.Accepted == 0 {
		t.Errorf("G: asked %d, accepted %d, refused %d", a.Asked, a.Accepted, refused)
	}
	if g.Preservation.Prunes <= d.Preservation.Prunes {
		t.Errorf("G prunes %d, D %d: accepted requests removed nothing more", g.Preservation.Prunes, d.Preservation.Prunes)
	}
	for _, c := range r.Conditions {
		if c.AgentRequests != nil && c.Name != CondG {
			t.Errorf("%s: agent requests %+v in a row without an agent", c.Name, c.AgentRequests)
		}
	}
}

// TestRecoveryColumns: with recovery, a probe whose holder our placeholder
// names is answered; each item is fetched once and priced; peers (whose
// own placeholders name no original) recover nothing; precision is not
// changed by recovery.
func TestRecoveryColumns(t *testing.T) {
	r := smallRun(t)
	for _, c := range r.Conditions {
		b, p, e := c.Behaviour, c.Preservation, c.Economics
		if b.AnsweredWithRecovery != b.Passed+b.RecoveredViaPlaceholder {
			t.Errorf("%s: answered with recovery %d, want passed %d + recoverable %d", c.Name, b.AnsweredWithRecovery, b.Passed, b.RecoveredViaPlaceholder)
		}
		if b.Recoveries > b.RecoveredViaPlaceholder || (b.RecoveredViaPlaceholder > 0) != (b.Recoveries > 0) {
			t.Errorf("%s: %d recoveries for %d recoverable probes", c.Name, b.Recoveries, b.RecoveredViaPlaceholder)
		}
		if (b.Recoveries > 0) != (b.RecoveryCost > 0 && b.RecoveryTokens > 0 && b.RecoveryRequests > 0) {
			t.Errorf("%s: %d recoveries cost %.4f, %d tokens, %d requests", c.Name, b.Recoveries, b.RecoveryCost, b.RecoveryTokens, b.RecoveryRequests)
		}
		if math.Abs(e.CostWithRecoveries-(e.Cost+b.RecoveryCost)) > 1e-5 {
			t.Errorf("%s: cost with recoveries %.6f, want %.6f + %.6f", c.Name, e.CostWithRecoveries, e.Cost, b.RecoveryCost)
		}
		if p.FalsePrunesUnrecoverable > p.FalsePrunes {
			t.Errorf("%s: %d unrecoverable of %d false prunes", c.Name, p.FalsePrunesUnrecoverable, p.FalsePrunes)
		}
		if c.Kind == "peer" && (b.RecoveredViaPlaceholder != 0 || p.FalsePrunesUnrecoverable != p.FalsePrunes) {
			t.Errorf("%s: a peer recovered %d probes, %d of %d false prunes unrecoverable", c.Name, b.RecoveredViaPlaceholder, p.FalsePrunesUnrecoverable, p.FalsePrunes)
		}
		if c.Kind != "peer" && p.FalsePrunesUnrecoverable != 0 {
			t.Errorf("%s: %d false prunes our placeholder cannot recover", c.Name, p.FalsePrunesUnrecoverable)
		}
	}
	if e := r.row(CondE).Behaviour; e.Recoveries == 0 || e.AnswerRateWithRecovery <= e.ProbePassRate {
		t.Errorf("E: %d recoveries, answered %.3f with recovery against %.3f without", e.Recoveries, e.AnswerRateWithRecovery, e.ProbePassRate)
	}
}
