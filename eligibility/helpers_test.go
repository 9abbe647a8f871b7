package eligibility

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

// sess builds a session fact by fact and feeds a core as it goes.
type sess struct {
	t    *testing.T
	core *Core
	// ref is a second core on the same facts that builds every mark at
	// every judgement (the slow path); feed checks that both emit the same
	// marks, byte for byte.
	ref   *Core
	n     int
	calls int
	marks []events.Event
	at    time.Time
}

func newSess(t *testing.T, yaml string) *sess {
	t.Helper()
	p, err := policy.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	ref := New(p, "", "s1")
	ref.alwaysBuild = true
	return &sess{t: t, core: New(p, "", "s1"), ref: ref, at: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
}

func (s *sess) feed(p events.Payload) []events.Event {
	s.t.Helper()
	s.n++
	s.at = s.at.Add(time.Second)
	ev := events.New(fmt.Sprintf("e%d", s.n), "", "s1", s.at, p)
	if err := ev.Validate(); err != nil {
		s.t.Fatalf("fixture event %s invalid: %v", ev.ID, err)
	}
	out := s.core.Observe(ev)
	if s.ref != nil {
		sameMarks(s.t, ev.ID, out, s.ref.Observe(ev))
	}
	for _, m := range out {
		if err := m.Validate(); err != nil {
			s.t.Fatalf("mark invalid: %v (%+v)", err, m.Data)
		}
	}
	s.marks = append(s.marks, out...)
	return out
}

func (s *sess) user(id, text string) {
	s.feed(&events.Message{Item: id, Role: events.RoleUser, Text: text})
}
func (s *sess) assistant(id, text string) {
	s.feed(&events.Message{Item: id, Role: events.RoleAssistant, Text: text})
}
func (s *sess) req() { s.feed(&events.ModelRequest{Request: fmt.Sprintf("r%d", s.n)}) }
func (s *sess) reqs(n int) {
	for i := 0; i < n; i++ {
		s.req()
	}
}

// body makes an output of about tokens tokens whose content is tag.
func body(tag string, tokens int) string {
	if tokens*4 <= len(tag) {
		return tag
	}
	return tag + strings.Repeat(".", tokens*4-len(tag))
}

// tool records a call and its successful result; returns the output item id.
// Output content is body(out, 400): distinct out strings mean distinct bytes.
func (s *sess) tool(name string, args any, out string) string {
	return s.toolR(name, args, &events.ToolResult{Output: strPtr(body(out, 400))})
}

func (s *sess) toolR(name string, args any, res *events.ToolResult) string {
	s.t.Helper()
	s.calls++
	id := fmt.Sprintf("c%d", s.calls)
	raw, err := json.Marshal(args)
	if err != nil {
		s.t.Fatal(err)
	}
	s.feed(&events.ToolCall{Item: events.CallInputItem(id), CallID: id, Tool: name, Input: raw})
	res.Item, res.CallID, res.Tool = id, id, name
	s.feed(res)
	return id
}

// fail records a failed call with a large input.
func (s *sess) fail(name string, args any, errMsg string) string {
	return s.toolR(name, args, &events.ToolResult{IsError: true, Error: &events.ToolError{Type: "tool_error", Message: errMsg}, Output: strPtr(errMsg)})
}

func strPtr(s string) *string { return &s }

// decision returns the latest mark of item, or a zero mark.
func (s *sess) decision(item string) events.Mark {
	m, _ := s.core.Decision(item)
	return m
}

func (s *sess) want(item string, d events.Decision, r events.Reason) events.Mark {
	s.t.Helper()
	m, ok := s.core.Decision(item)
	if !ok {
		if d == "" {
			return m
		}
		s.t.Fatalf("%s: no decision, want %s %s", item, d, r)
	}
	if m.Decision != d || m.Reason != r {
		s.t.Fatalf("%s: got %s %s %s (evidence %+v), want %s %s", item, m.Decision, m.Rung, m.Reason, m.Evidence, d, r)
	}
	return m
}

func (s *sess) wantNone(item string) {
	s.t.Helper()
	if m, ok := s.core.Decision(item); ok {
		s.t.Fatalf("%s: got %s %s %s, want no decision", item, m.Decision, m.Rung, m.Reason)
	}
}

// notPruned fails if any listed item's latest decision is PRUNE.
func (s *sess) notPruned(items ...string) {
	s.t.Helper()
	for _, it := range items {
		if m, ok := s.core.Decision(it); ok && m.Decision == events.Prune {
			s.t.Fatalf("%s pruned: %s %s %+v", it, m.Rung, m.Reason, m.Evidence)
		}
	}
}

func read(p string) map[string]any   { return map[string]any{"file_path": p} }
func bash(cmd string) map[string]any { return map[string]any{"command": cmd} }
func edit(p string) map[string]any {
	return map[string]any{"file_path": p, "old_string": "a", "new_string": "b"}
}

// sameMarks fails unless two cores emitted the same marks, byte for byte.
func sameMarks(t testing.TB, cause string, got, want []events.Event) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(g) != string(w) {
		t.Fatalf("after %s the fast path emitted\n%s\nthe reference\n%s", cause, g, w)
	}
}
