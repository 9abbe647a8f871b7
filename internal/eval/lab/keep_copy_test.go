package lab

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/eval/lab/fixtures"
	"github.com/prunesched/prunesched/policy"
)

// TestNewcomerPrunedAtItsFirstRequest runs the production cores (as the
// pipeline does) over a session that reads one unchanged file twice with a
// warm cache: under the default policy (keep_copy first) the second copy is
// pruned at the very request that would first have sent it, trigger
// never_sent, breaking no cached prefix; under keep_copy last the first copy
// waits (recent turns, then the warm cache).
func TestNewcomerPrunedAtItsFirstRequest(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var facts []events.Event
	add := func(p events.Payload) {
		facts = append(facts, events.New(fmt.Sprintf("e%d", len(facts)+1), "t", "s1", t0.Add(time.Duration(len(facts))*10*time.Second), p))
	}
	out := strings.Repeat("package a\n\nfunc A() int { return 1 }\n", 200)
	read := func(id string) {
		add(&events.ToolCall{Item: events.CallInputItem(id), CallID: id, Tool: "Read", Input: []byte(`{"file_path":"a.go"}`)})
		add(&events.ToolResult{Item: id, CallID: id, Tool: "Read", Output: &out})
	}
	usage := func(req string) *events.ModelRequest {
		return &events.ModelRequest{Request: req, Provider: "anthropic", Model: "claude-sonnet-4-5"}
	}
	add(&events.SessionStarted{Format: "native", Provider: "anthropic", Model: "claude-sonnet-4-5"})
	add(&events.Message{Item: "sys", Role: events.RoleSystem, Text: strings.Repeat("You are careful. ", 400)})
	add(&events.Message{Item: "u1", Role: events.RoleUser, Text: "Look at a.go twice."})
	add(usage("r1"))
	read("c1")
	add(usage("r2"))
	read("c2")
	add(usage("r3")) // the first request that would send c2
	add(usage("r4"))
	for _, ev := range facts {
		if err := ev.Validate(); err != nil {
			t.Fatalf("fixture %s: %v", ev.ID, err)
		}
	}

	marks, apps := runProduction(policy.Default(), facts, nil)
	var app *events.Application
	for _, a := range apps {
		if x := a.Data.(*events.Application); x.Request == "r3" {
			app = x
		}
	}
	if app == nil {
		t.Fatalf("no application at r3 (applications %d, marks %d)", len(apps), len(marks))
	}
	if app.Trigger != events.TriggerNeverSent || strings.Join(app.Items, ",") != "c2" || app.MutationRadius != 0 || app.CacheCost != 0 {
		t.Fatalf("application at r3: trigger %s items %v radius %d cost %g; want never_sent [c2] 0 0", app.Trigger, app.Items, app.MutationRadius, app.CacheCost)
	}

	p := policy.Default()
	p.Eligibility.KeepCopy = "last"
	_, apps = runProduction(p, facts, nil)
	for _, a := range apps {
		if x := a.Data.(*events.Application); x.Request == "r3" {
			t.Fatalf("keep_copy last applied at r3: %+v", x)
		}
	}
}

// TestCopyRoles: a run of interchangeable copies is scored by what was
// pruned, whichever copy the policy kept.
func TestCopyRoles(t *testing.T) {
	safe := func(id, surv string, from int) fixtures.Label {
		return fixtures.Label{Item: id, Class: fixtures.Safe, Rung: fixtures.RungL0, Survivor: surv, SafeFrom: from, Tokens: 100}
	}
	needed := fixtures.Label{Item: "c3", Class: fixtures.Needed, Probes: []string{"p1"}, Tokens: 100}
	labels := map[string]fixtures.Label{"c1": safe("c1", "c2", 2), "c2": safe("c2", "c3", 3), "c3": needed}
	cases := []struct {
		name   string
		pruned []string
		want   map[string]fixtures.Class // items whose class is checked
	}{
		{"newest kept: as labelled", []string{"c1", "c2"}, map[string]fixtures.Class{"c1": fixtures.Safe, "c2": fixtures.Safe, "c3": fixtures.Needed}},
		{"earliest kept: it carries the run's label", []string{"c2", "c3"}, map[string]fixtures.Class{"c1": fixtures.Needed, "c2": fixtures.Safe, "c3": fixtures.Safe}},
		{"middle kept", []string{"c1", "c3"}, map[string]fixtures.Class{"c1": fixtures.Safe, "c2": fixtures.Needed, "c3": fixtures.Safe}},
		{"all pruned: the last is a false prune", []string{"c1", "c2", "c3"}, map[string]fixtures.Class{"c3": fixtures.Needed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pruned := map[string]bool{}
			for _, id := range tc.pruned {
				pruned[id] = true
			}
			got := copyRoles(labels, pruned)
			for id, c := range tc.want {
				if got[id].Class != c || got[id].Item != id {
					t.Errorf("%s: %+v, want class %s", id, got[id], c)
				}
			}
			if labels["c3"].Class != fixtures.Needed {
				t.Fatal("copyRoles changed its input")
			}
		})
	}
}
