package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/prunesched/prunesched/events"
)

// t0 is the synthetic sessions' start: event time, never the wall clock.
var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// outputKeys is how many distinct tool outputs the workload uses: a
// session re-reads a working set of files, so later reads of an unchanged
// file are L0 duplicates, as in real sessions.
const outputKeys = 64

// workload builds synthetic agent sessions in their stored form (tool
// outputs by content address with their token counts, every text
// pre-counted), so the measurements time the log and the cores, not the
// tokenizer.
type workload struct {
	outputs [outputKeys][]byte
	hashes  [outputKeys]string
}

func newWorkload() *workload {
	w := &workload{}
	for k := range w.outputs {
		var b strings.Builder
		fmt.Fprintf(&b, "package f%d\n\n", k)
		for l := 0; l < 40; l++ {
			fmt.Fprintf(&b, "// line %d of file f%d.go: code the agent reads\n", l, k)
		}
		w.outputs[k] = []byte(b.String())
		w.hashes[k] = events.HashBytes(w.outputs[k])
	}
	return w
}

// putBlobs stores the workload's outputs once.
func (w *workload) putBlobs(ctx context.Context, put events.BlobPutter) error {
	for k := range w.outputs {
		if err := put.PutBlob(ctx, w.hashes[k], w.outputs[k]); err != nil {
			return fmt.Errorf("put workload output %d: %w", k, err)
		}
	}
	return nil
}

// session returns the facts of one session of about items items: a system
// prompt and a user message, then rounds of assistant text, a tool call and
// its output (Read of a working set of files, Grep, test runs, edits), a
// model request per round (20 s apart) and a user message every 10 rounds.
func (w *workload) session(tenant, session string, items int) []events.Event {
	evs := make([]events.Event, 0, items*4/3+8)
	at := t0
	n := 0
	add := func(p events.Payload) {
		n++
		at = at.Add(2 * time.Second)
		evs = append(evs, events.New(fmt.Sprintf("%s-e%06d", session, n), tenant, session, at, p))
	}
	add(&events.SessionStarted{Format: "native", Provider: "anthropic", Model: "claude-sonnet-4-5", CWD: "/repo"})
	add(&events.Message{Item: "sys", Role: events.RoleSystem, Text: "You are a coding agent working in /repo.", Tokens: 10})
	add(&events.Message{Item: "u0", Role: events.RoleUser, Text: "Refactor the config loader and make the tests pass.", Tokens: 12})
	nItems := 3
	for i := 0; nItems < items; i++ {
		if i > 0 && i%10 == 0 {
			add(&events.Message{Item: fmt.Sprintf("u%d", i), Role: events.RoleUser, Text: "Continue.", Tokens: 2})
			nItems++
		}
		add(&events.Message{Item: fmt.Sprintf("a%d", i), Role: events.RoleAssistant, Text: "Reading the next file to check how Load handles it.", Tokens: 12})
		call := fmt.Sprintf("toolu_%06d", i)
		tool, input, key := w.call(i)
		add(&events.ToolCall{Item: events.CallInputItem(call), CallID: call, Tool: tool, Input: input, InputTokens: 20})
		add(&events.ToolResult{Item: call, CallID: call, Tool: tool, OutputRef: &events.ContentRef{
			Hash: w.hashes[key], Bytes: len(w.outputs[key]), Tokens: len(w.outputs[key]) / 4,
		}})
		nItems += 3
		at = at.Add(20 * time.Second)
		add(&events.ModelRequest{Request: fmt.Sprintf("r%06d", i), Provider: "anthropic", Model: "claude-sonnet-4-5"})
	}
	return evs
}

// call picks round i's tool call and the output it returns.
func (w *workload) call(i int) (tool string, input json.RawMessage, key int) {
	f := i % 40
	switch i % 6 {
	case 0, 1, 2:
		return "Read", json.RawMessage(fmt.Sprintf(`{"file_path":"/repo/f%d.go"}`, f)), f
	case 3:
		return "Grep", json.RawMessage(fmt.Sprintf(`{"pattern":"Load%d","path":"/repo"}`, i%7)), 40 + i%7
	case 4:
		return "Bash", json.RawMessage(`{"command":"go test ./..."}`), 50 + i%5
	default:
		return "Edit", json.RawMessage(fmt.Sprintf(`{"file_path":"/repo/f%d.go","old_string":"a","new_string":"b"}`, f)), 60 + i%4
	}
}

// round returns one more round of facts for a session already holding
// round-1 rounds (ids continue after the given sequence number).
func (w *workload) round(tenant, session string, round, seq int, at time.Time) []events.Event {
	var evs []events.Event
	add := func(p events.Payload) {
		seq++
		at = at.Add(2 * time.Second)
		evs = append(evs, events.New(fmt.Sprintf("%s-x%06d", session, seq), tenant, session, at, p))
	}
	call := fmt.Sprintf("toolu_x%06d", round)
	tool, input, key := w.call(round)
	add(&events.Message{Item: fmt.Sprintf("ax%d", round), Role: events.RoleAssistant, Text: "Checking again.", Tokens: 4})
	add(&events.ToolCall{Item: events.CallInputItem(call), CallID: call, Tool: tool, Input: input, InputTokens: 20})
	add(&events.ToolResult{Item: call, CallID: call, Tool: tool, OutputRef: &events.ContentRef{
		Hash: w.hashes[key], Bytes: len(w.outputs[key]), Tokens: len(w.outputs[key]) / 4,
	}})
	return evs
}

// encoded returns the events' wire form (what the store publishes).
func encoded(evs []events.Event) ([][]byte, error) {
	out := make([][]byte, len(evs))
	for i, e := range evs {
		b, err := events.Encode(e)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", e.ID, err)
		}
		out[i] = b
	}
	return out, nil
}
