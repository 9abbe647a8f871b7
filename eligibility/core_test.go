package eligibility

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

func TestManualControl(t *testing.T) {
	s := newSess(t, lastCopy)
	s.tool("Read", read("a.go"), "A")
	s.tool("Read", read("a.go"), "A")
	s.want("c1", events.Prune, events.ReasonDuplicateOutput)

	s.feed(&events.Pin{Item: "c1", By: "ana"})
	m := s.want("c1", events.Keep, events.ReasonPinned)
	if len(m.Protection) != 1 || m.Protection[0] != events.ReasonPinned {
		t.Fatalf("protection %v", m.Protection)
	}
	s.feed(&events.Unpin{Item: "c1"})
	s.want("c1", events.Prune, events.ReasonDuplicateOutput)

	s.user("u1", "hello")
	s.feed(&events.PruneRequest{Item: "u1", By: "ana", Reason: "noise"})
	m = s.want("u1", events.Prune, events.ReasonManualPrune)
	if m.Rung != events.RungNone || m.By != "ana" || m.Recoverability == nil {
		t.Fatalf("%+v", m)
	}
	s.feed(&events.Pin{Item: "u1"})
	m = s.want("u1", events.Keep, events.ReasonPinned)
	if len(m.Evidence) < 2 || m.Evidence[1].Kind != "manual_request" {
		t.Fatalf("pinned refusal evidence %+v", m.Evidence)
	}
	s.feed(&events.Unpin{Item: "u1"})
	s.want("u1", events.Prune, events.ReasonManualPrune)

	// Restore: KEEP RESTORED, and no automatic prune on old evidence.
	s.feed(&events.Restore{Item: "c1", By: "ana"})
	s.want("c1", events.Keep, events.ReasonRestored)
	s.req()
	s.want("c1", events.Keep, events.ReasonRestored)
	s.feed(&events.Restore{Item: "u1"})
	s.want("u1", events.Keep, events.ReasonRestored)
}

func TestRestoreThenNewEvidence(t *testing.T) {
	s := newSess(t, lastCopy)
	s.tool("Read", read("a.go"), "A")
	s.tool("Read", read("a.go"), "A")
	s.feed(&events.Restore{Item: "c2"}) // the survivor, for the test
	s.tool("Read", read("a.go"), "A")
	s.want("c2", events.Prune, events.ReasonDuplicateOutput)
}

func TestPinBeforeItem(t *testing.T) {
	s := newSess(t, noRecent)
	s.feed(&events.Pin{Item: "c1"})
	s.tool("Read", read("a.go"), "A")
	s.tool("Read", read("a.go"), "A")
	s.want("c1", events.Keep, events.ReasonPinned)
}

func TestHostCompaction(t *testing.T) {
	s := newSess(t, noRecent)
	s.tool("Read", read("a.go"), "A")
	s.feed(&events.HostCompaction{Host: "claude-code"})
	out := s.feed(&events.Message{Item: "sum", Role: events.RoleUser, Text: "summary"})
	s.tool("Read", read("a.go"), "A")
	if len(out) != 0 {
		t.Fatalf("marks after compaction: %v", out)
	}
	s.wantNone("c1")
	s.wantNone("c2")
	s.feed(&events.PruneRequest{Item: "c1"})
	s.wantNone("c1")
}

func TestMarksOnlyOnChange(t *testing.T) {
	s := newSess(t, noRecent)
	s.user("u1", "go")
	s.assistant("a1", "ok")
	s.tool("Read", read("a.go"), "A")
	s.req()
	s.tool("Read", read("b.go"), "B")
	if len(s.marks) != 0 {
		t.Fatalf("unexpected marks %v", s.marks)
	}
	s.tool("Read", read("a.go"), "A")
	if len(s.marks) != 2 {
		t.Fatalf("want PRUNE + SURVIVING_COPY, got %d marks", len(s.marks))
	}
	ids := map[string]bool{}
	for _, e := range s.marks {
		ids[e.ID] = true
	}
	if len(ids) != 2 {
		t.Fatal("mark ids collide")
	}
}

// session builds a mixed session for replay and benchmarks.
func session(n int) []events.Event {
	s := newSess(&testing.T{}, "")
	var evs []events.Event
	feed := func(p events.Payload) {
		s.n++
		s.at = s.at.Add(1e9)
		evs = append(evs, events.New(idf(s.n), "", "s1", s.at, p))
	}
	call := 0
	tool := func(name string, args string, out string, isErr bool) {
		call++
		id := idf(call)
		feed(&events.ToolCall{Item: id + "/input", CallID: id, Tool: name, Input: json.RawMessage(args), InputTokens: 300})
		r := &events.ToolResult{Item: id, CallID: id, Tool: name, OutputRef: &events.ContentRef{Hash: events.HashBytes([]byte(out)), Bytes: 4000, Tokens: 1000}}
		if isErr {
			r.IsError, r.Error = true, &events.ToolError{Type: "tool_error", Message: "failed " + out}
		}
		feed(r)
	}
	feed(&events.SessionStarted{Format: "native", CWD: "/repo"})
	feed(&events.Message{Item: "sys", Role: events.RoleSystem, Text: "system", Tokens: 100})
	for i := 0; len(evs) < n; i++ {
		f := i % 40
		feed(&events.Message{Item: "u" + idf(i), Role: events.RoleUser, Text: "do it", Tokens: 5})
		feed(&events.ModelRequest{Request: "r" + idf(i)})
		switch i % 7 {
		case 0:
			tool("Read", `{"file_path":"/repo/f`+idf(f)+`.go"}`, "content"+idf(f), false)
		case 1:
			tool("Grep", `{"pattern":"x`+idf(i%5)+`"}`, "hits"+idf(i%5), false)
		case 2:
			tool("Edit", `{"file_path":"f`+idf(f)+`.go","old_string":"a","new_string":"b"}`, "ok", false)
		case 3:
			tool("Bash", `{"command":"go test ./..."}`, "ok"+idf(i%3), false)
		case 4:
			tool("Write", `{"file_path":"w`+idf(f)+`.go","content":"x"}`, "denied", true)
		case 5:
			tool("Bash", `{"command":"sed -n '1,20p' f`+idf(f)+`.go"}`, "part"+idf(f), false)
		case 6:
			tool("Read", `{"file_path":"f`+idf(f)+`.go","offset":1,"limit":50}`, "part"+idf(f), false)
		}
		feed(&events.Message{Item: "a" + idf(i), Role: events.RoleAssistant, Text: "done", Tokens: 5})
	}
	return evs
}

func idf(i int) string { return string(rune('a'+i%26)) + itoa(i) }

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func run(evs []events.Event) []byte {
	c := New(policy.Default(), "t", "s1")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, e := range evs {
		for _, m := range c.Observe(e) {
			_ = enc.Encode(m)
		}
	}
	return buf.Bytes()
}

func TestReplayIsByteIdentical(t *testing.T) {
	evs := session(5000)
	a, b := run(evs), run(evs)
	if len(a) == 0 {
		t.Fatal("no marks")
	}
	if !bytes.Equal(a, b) {
		t.Fatal("replay differs")
	}
	// Every mark is valid and decoded strictly.
	dec := json.NewDecoder(bytes.NewReader(a))
	n := 0
	counts := map[string]int{}
	for dec.More() {
		var e events.Event
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("mark %d: %v", n, err)
		}
		m := e.Data.(*events.Mark)
		counts[string(m.Decision)+" "+string(m.Reason)]++
		n++
	}
	t.Logf("%d marks: %v", n, counts)
}
