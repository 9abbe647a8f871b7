package peers

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
)

// tiny builds a hand-made session in stored form (token counts given).
type tiny struct {
	evs   []events.Event
	calls int
	at    time.Time
}

func (s *tiny) add(p events.Payload) {
	s.at = s.at.Add(time.Second)
	s.evs = append(s.evs, events.New(fmt.Sprintf("e%d", len(s.evs)), "", "t1", s.at, p))
}

func (s *tiny) req() { s.add(&events.ModelRequest{Request: fmt.Sprintf("r%d", len(s.evs))}) }

// call adds a request, a call and its result; it returns the call id.
func (s *tiny) call(tool, args string, out string, tokens int, failed bool) string {
	s.req()
	s.calls++
	id := fmt.Sprintf("c%d", s.calls)
	s.add(&events.ToolCall{Item: events.CallInputItem(id), CallID: id, Tool: tool, Input: json.RawMessage(args), InputTokens: 300})
	r := &events.ToolResult{Item: id, CallID: id, Tool: tool, OutputRef: &events.ContentRef{Hash: events.HashBytes([]byte(out)), Bytes: len(out), Tokens: tokens}}
	if failed {
		r.IsError = true
		r.Error = &events.ToolError{Type: "tool_error", Message: "boom"}
	}
	s.add(r)
	return id
}

func newTiny() *tiny { return &tiny{at: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)} }

// pruned returns the items marked PRUNE, sorted, with the request count
// before which each was decided ("item@n": n requests dispatched before
// the cause).
func pruned(t *testing.T, facts, marks []events.Event) []string {
	t.Helper()
	var out []string
	for _, m := range marks {
		if err := m.Validate(); err != nil {
			t.Fatalf("mark invalid: %v", err)
		}
		mk := m.Data.(*events.Mark)
		if mk.Decision != events.Prune {
			t.Fatalf("peer mark %s is %s", mk.Item, mk.Decision)
		}
		out = append(out, mk.Item)
	}
	sort.Strings(out)
	return out
}

func TestPeers(t *testing.T) {
	cases := []struct {
		name  string
		build func(s *tiny)
		run   func(facts []events.Event) []events.Event
		want  string
	}{
		{"DCP dedup keeps the newest", func(s *tiny) {
			s.call("Read", `{"file_path":"a.go"}`, "A1", 500, false)
			s.call("Read", `{"file_path":"b.go"}`, "B", 500, false)
			s.call("Read", `{"file_path":"a.go"}`, "A2 (changed: DCP does not look)", 500, false)
			s.req()
		}, func(f []events.Event) []events.Event { return DCP(f, DefaultDCP()) }, "c1"},
		{"DCP dedup ignores key order, not values", func(s *tiny) {
			s.call("Grep", `{"pattern":"x","path":"src"}`, "1", 500, false)
			s.call("Grep", `{"path":"src","pattern":"x"}`, "2", 500, false)
			s.call("Grep", `{"path":"src","pattern":"y"}`, "3", 500, false)
			s.req()
		}, func(f []events.Event) []events.Event { return DCP(f, DefaultDCP()) }, "c1"},
		{"DCP protected tools are not deduplicated", func(s *tiny) {
			s.call("todowrite", `{"todos":[]}`, "ok", 500, false)
			s.call("todowrite", `{"todos":[]}`, "ok", 500, false)
			s.req()
		}, func(f []events.Event) []events.Event { return DCP(f, DefaultDCP()) }, ""},
		{"DCP purges an errored input after 4 requests", func(s *tiny) {
			s.call("Write", `{"file_path":"a.go","content":"big"}`, "boom", 5, true)
			s.req()
			s.req()
			s.req()
			s.req() // 4 requests after the failure: the purge is decided at the next one
			s.req()
		}, func(f []events.Event) []events.Event { return DCP(f, DefaultDCP()) }, "c1/input"},
		{"DCP waits for the 4th request", func(s *tiny) {
			s.call("Write", `{"file_path":"a.go","content":"big"}`, "boom", 5, true)
			s.req()
			s.req()
			s.req()
		}, func(f []events.Event) []events.Event { return DCP(f, DefaultDCP()) }, ""},
		{"clear_tool_uses below the trigger does nothing", func(s *tiny) {
			for i := 0; i < 6; i++ {
				s.call("Read", fmt.Sprintf(`{"file_path":"%d.go"}`, i), fmt.Sprint(i), 10000, false)
			}
			s.req()
		}, func(f []events.Event) []events.Event { return ClearToolUses(f, DefaultClearToolUses()) }, ""},
		{"clear_tool_uses over 100k keeps the 3 most recent tool uses", func(s *tiny) {
			for i := 0; i < 8; i++ {
				s.call("Read", fmt.Sprintf(`{"file_path":"%d.go"}`, i), fmt.Sprint(i), 20000, false)
			}
			s.req()
		}, func(f []events.Event) []events.Event { return ClearToolUses(f, DefaultClearToolUses()) }, "c1 c2 c3 c4 c5"},
		{"masking keeps the last 10 observations", func(s *tiny) {
			for i := 0; i < 12; i++ {
				s.call("Read", fmt.Sprintf(`{"file_path":"%d.go"}`, i), fmt.Sprint(i), 100, false)
			}
			s.req()
		}, func(f []events.Event) []events.Event { return Masking(f, DefaultMaskWindow) }, "c1 c2"},
		{"E removes a closed subtask's outputs and old failed calls", func(s *tiny) {
			s.add(&events.SubtaskOpened{Subtask: "st"})
			s.call("Read", `{"file_path":"a.go"}`, "A", 500, false)
			s.add(&events.SubtaskClosed{Subtask: "st", VerifiedBy: &events.Verification{Kind: "agent"}})
			s.call("Write", `{"file_path":"b.go","content":"x"}`, "boom", 50, true)
			for i := 0; i < 5; i++ {
				s.req()
			}
		}, func(f []events.Event) []events.Event { return Aggressive(f, DefaultAggressive()) }, "c1 c2 c2/input"},
		{"E removes old outputs that are not the latest of their kind", func(s *tiny) {
			s.call("Bash", `{"command":"go test ./..."}`, "FAIL", 500, false)
			s.call("Bash", `{"command":"go test ./...","timeout":60000}`, "ok", 500, false)
			s.call("Read", `{"file_path":"rules.md"}`, "rules", 500, false)
			for i := 0; i < 21; i++ {
				s.req()
			}
		}, func(f []events.Event) []events.Event { return Aggressive(f, DefaultAggressive()) }, "c1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newTiny()
			tc.build(s)
			got := strings.Join(pruned(t, s.evs, tc.run(s.evs)), " ")
			if got != tc.want {
				t.Fatalf("pruned %q, want %q", got, tc.want)
			}
		})
	}
}

// A removal is decided at a request and caused by the fact just before it,
// so the scheduler applies it at that request.
func TestCauseIsTheFactBeforeTheRequest(t *testing.T) {
	s := newTiny()
	for i := 0; i < 11; i++ {
		s.call("Read", fmt.Sprintf(`{"file_path":"%d.go"}`, i), fmt.Sprint(i), 100, false)
	}
	s.req()
	marks := Masking(s.evs, DefaultMaskWindow)
	if len(marks) != 1 {
		t.Fatalf("%d marks", len(marks))
	}
	m := marks[0].Data.(*events.Mark)
	if _, ok := s.evs[m.CauseIndex+1].Data.(*events.ModelRequest); !ok {
		t.Fatalf("cause %d is not right before a request", m.CauseIndex)
	}
}
