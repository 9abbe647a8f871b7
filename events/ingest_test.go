package events

import (
	"context"
	"crypto/sha256"
	"strings"
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

// stringBlobs is a StringBlobPutter that fails if asked to put bytes.
type stringBlobs struct {
	t    *testing.T
	puts map[string]string
}

func (b *stringBlobs) PutBlob(context.Context, string, []byte) error {
	b.t.Fatal("PutBlob called: the output was copied to bytes")
	return nil
}

func (b *stringBlobs) PutBlobString(_ context.Context, h string, s string) error {
	b.puts[h] = s
	return nil
}

// TestPrepareStreamsOutputAsString: a store that takes strings gets the
// output as it is (never a copy as bytes), under the same content address
// as HashBytes gives.
func TestPrepareStreamsOutputAsString(t *testing.T) {
	out := strings.Repeat("line of output\n", 10000)
	ev := New("e1", "", "s", t0Ingest, &ToolResult{Item: "c1", CallID: "c1", Output: &out})
	bl := &stringBlobs{t: t, puts: map[string]string{}}
	p, err := Prepare(context.Background(), ev, bl, countLen{})
	if err != nil {
		t.Fatal(err)
	}
	ref := p.Data.(*ToolResult).OutputRef
	if ref.Hash != HashBytes([]byte(out)) || bl.puts[ref.Hash] != out || ref.Bytes != len(out) {
		t.Fatalf("stored %+v, puts %d", ref, len(bl.puts))
	}
}

// TestHashString: HashString, and HashSum of a sha256 hash fed the same
// bytes, are HashBytes of the string's bytes, short and long (past the
// 64 KiB it was once hashed through).
func TestHashString(t *testing.T) {
	const long = 64 << 10
	for _, s := range []string{"", "x", strings.Repeat("ab\xff", long/3+7), strings.Repeat("z", 3*long)} {
		if got, want := HashString(s), HashBytes([]byte(s)); got != want {
			t.Fatalf("%d bytes: HashString %s, HashBytes %s", len(s), got, want)
		}
		h := sha256.New()
		h.Write([]byte(s))
		if got, want := HashSum(h), HashBytes([]byte(s)); got != want {
			t.Fatalf("%d bytes: HashSum %s, HashBytes %s", len(s), got, want)
		}
	}
}
