package events

import (
	"context"
	"testing"
	"time"
)

var t0Ingest = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// contentCounter records the content addresses it was asked to count by.
type contentCounter struct {
	countLen
	hashes []string
}

func (c *contentCounter) CountContent(hash, s string) int {
	c.hashes = append(c.hashes, hash)
	return c.Count(s)
}

// TestPrepareCountsOutputsByContent: a counter that remembers by content
// address is asked for a tool output with the output's address, and for
// other text by Count; the stored count is the same either way.
func TestPrepareCountsOutputsByContent(t *testing.T) {
	out := "package config\n\nfunc Load() error { return nil }\n"
	ev := New("e1", "", "s", t0Ingest, &ToolResult{Item: "c1", CallID: "c1", Output: &out})
	cc := &contentCounter{}
	p, err := Prepare(context.Background(), ev, memBlobs{}, cc)
	if err != nil {
		t.Fatal(err)
	}
	ref := p.Data.(*ToolResult).OutputRef
	if len(cc.hashes) != 1 || cc.hashes[0] != HashBytes([]byte(out)) || ref.Hash != cc.hashes[0] {
		t.Fatalf("counted by %v, want the output's address %s", cc.hashes, ref.Hash)
	}
	if want := (countLen{}).Count(out); ref.Tokens != want {
		t.Fatalf("tokens %d, want %d", ref.Tokens, want)
	}
	msg := New("e2", "", "s", t0Ingest, &Message{Item: "m1", Role: RoleUser, Text: "hello there"})
	if _, err := Prepare(context.Background(), msg, memBlobs{}, cc); err != nil {
		t.Fatal(err)
	}
	if len(cc.hashes) != 1 {
		t.Fatalf("a message was counted by content address: %v", cc.hashes)
	}
}

// textsCounted records the texts a Prepare tokenized.
type textsCounted struct{ n int }

func (c *textsCounted) Count(s string) int { c.n += len(s); return len(s) }

// TestPrepareTextBytes: PrepareTextBytes is exactly the text Prepare hands
// the tokenizer, for every kind of event, counted or not.
func TestPrepareTextBytes(t *testing.T) {
	out, empty := "line one\nline two\n", ""
	for _, tc := range []struct {
		name string
		data Payload
	}{
		{"message", &Message{Item: "m1", Role: RoleUser, Text: "hello there"}},
		{"message counted", &Message{Item: "m1", Role: RoleUser, Text: "hello there", Tokens: 3}},
		{"empty message", &Message{Item: "m1", Role: RoleUser, Text: ""}},
		{"call", &ToolCall{Item: "c1.in", CallID: "c1", Tool: "Read", Input: []byte(`{"file_path":"/a"}`)}},
		{"call counted", &ToolCall{Item: "c1.in", CallID: "c1", Tool: "Read", Input: []byte(`{"file_path":"/a"}`), InputTokens: 5}},
		{"output", &ToolResult{Item: "c1", CallID: "c1", Output: &out}},
		{"empty output", &ToolResult{Item: "c1", CallID: "c1", Output: &empty}},
		{"stored output", &ToolResult{Item: "c1", CallID: "c1", OutputRef: &ContentRef{Hash: HashBytes([]byte(out)), Bytes: len(out), Tokens: 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := New("e1", "", "s", t0Ingest, tc.data)
			c := &textsCounted{}
			if _, err := Prepare(context.Background(), ev, memBlobs{}, c); err != nil {
				t.Fatal(err)
			}
			if got := PrepareTextBytes(ev); got != c.n {
				t.Fatalf("PrepareTextBytes = %d, Prepare tokenized %d bytes", got, c.n)
			}
		})
	}
}
