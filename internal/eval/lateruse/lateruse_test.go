package lateruse_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/eval/lab/peers"
	"github.com/prunesched/prunesched/internal/eval/lateruse"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/scheduler"
)

// session builds a session's facts: each step is a tool output (Read of
// a path), an assistant message or a model request.
type session struct {
	facts []events.Event
	n     int
}

func (s *session) add(p events.Payload) {
	s.n++
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s.facts = append(s.facts, events.New(fmt.Sprintf("e%d", s.n), "t", "s1", t0.Add(time.Duration(s.n)*time.Second), p))
}

func (s *session) read(id, path, out string) {
	s.add(&events.ToolCall{Item: events.CallInputItem(id), CallID: id, Tool: "Read", Input: []byte(`{"file_path":"` + path + `"}`), InputTokens: 10})
	o := out
	s.add(&events.ToolResult{Item: id, CallID: id, Tool: "Read", Output: &o})
}

func (s *session) say(text string) {
	s.add(&events.Message{Item: fmt.Sprintf("m%d", s.n), Role: events.RoleAssistant, Text: text, Tokens: 10})
}

func (s *session) req() { s.add(&events.ModelRequest{Request: fmt.Sprintf("r%d", s.n)}) }

// TestEvaluate: masking with a window of 1 removes every output but the
// newest at each request; which removals count as later-used.
func TestEvaluate(t *testing.T) {
	cases := []struct {
		name  string
		build func(s *session)
		want  map[string]string // removed item -> term that made it later-used ("" not later-used)
	}{
		{"a term only the removed output held, used after", func(s *session) {
			s.req()
			s.read("c1", "a.go", "func computeBudget() int { return 1 }")
			s.req()
			s.read("c2", "b.go", "package b")
			s.req() // c1 is masked here
			s.say("I will call computeBudget next.")
			s.req()
		}, map[string]string{"c1": "computeBudget"}},
		{"the term is still in context elsewhere", func(s *session) {
			s.req()
			s.read("c1", "a.go", "func computeBudget() int { return 1 }")
			s.say("computeBudget looks fine.") // the agent's message stays
			s.req()
			s.read("c2", "b.go", "package b")
			s.req()
			s.say("I will call computeBudget next.")
			s.req()
		}, map[string]string{"c1": ""}},
		{"used only before the removal", func(s *session) {
			s.req()
			s.read("c1", "a.go", "func computeBudget() int { return 1 }")
			s.req()
			s.read("c2", "b.go", "package b")
			s.req()
		}, map[string]string{"c1": ""}},
		{"plain words are not terms", func(s *session) {
			s.req()
			s.read("c1", "a.go", "the budget is computed here")
			s.req()
			s.read("c2", "b.go", "package b")
			s.req()
			s.say("the budget is computed here")
			s.req()
		}, map[string]string{"c1": ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &session{}
			s.add(&events.SessionStarted{Format: "native", Provider: "anthropic", Model: "claude-sonnet-4-5"})
			tc.build(s)
			marks := peers.Masking(s.facts, 1)
			apps := scheduler.Simulate(policy.Default(), append(append([]events.Event{}, s.facts...), marks...), scheduler.StrategyImmediate).ApplicationEvents
			rs, err := lateruse.Evaluate(context.Background(), s.facts, marks, apps, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, r := range rs {
				if r.LaterUsed {
					got[r.Item] = r.Term
				} else if _, ok := got[r.Item]; !ok {
					got[r.Item] = ""
				}
			}
			for item, term := range tc.want {
				g, ok := got[item]
				if !ok {
					t.Fatalf("%s was not removed (removals %+v)", item, rs)
				}
				if g != term {
					t.Errorf("%s: later-used term %q, want %q", item, g, term)
				}
			}
		})
	}
}
