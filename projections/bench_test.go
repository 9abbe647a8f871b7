package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
)

// benchSession builds a session of n items: a system prompt, a user
// message, then rounds of assistant text + tool call + tool output (about
// 2 KB each, by content address), with every fifth output's duplicate
// pruned by an applied L0 mark.
func benchSession(b testing.TB, n int) (*Session, *store.MemBlobs) {
	ctx := context.Background()
	blobs := store.NewMemBlobs()
	s := NewSession("", "bench")
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	seq := 0
	add := func(p events.Payload) string {
		seq++
		id := fmt.Sprintf("e%05d", seq)
		s.Observe(events.New(id, "", "bench", at.Add(time.Duration(seq)*time.Second), p))
		return id
	}
	add(&events.SessionStarted{Format: "native", Model: "claude-sonnet-4-5"})
	add(&events.Message{Item: "sys", Role: events.RoleSystem, Text: "You are a coding agent.", Tokens: 6})
	add(&events.Message{Item: "u", Role: events.RoleUser, Text: "Refactor the loader.", Tokens: 5})
	var marks []string
	for i := 0; len(s.items) < n; i++ {
		add(&events.Message{Item: fmt.Sprintf("a%d", i), Role: events.RoleAssistant, Text: "Reading the next file.", Tokens: 5})
		call := fmt.Sprintf("toolu_%04d", i)
		input, _ := json.Marshal(map[string]string{"file_path": fmt.Sprintf("src/f%d.go", i%50)})
		add(&events.ToolCall{Item: events.CallInputItem(call), CallID: call, Tool: "Read", Input: input, InputTokens: 10})
		out := []byte(fmt.Sprintf("package f%d\n%s", i%50, strings.Repeat("// line of code in the file\n", 70)))
		h := events.HashBytes(out)
		if err := blobs.PutBlob(ctx, h, out); err != nil {
			b.Fatal(err)
		}
		add(&events.ToolResult{Item: call, CallID: call, Tool: "Read", OutputRef: &events.ContentRef{Hash: h, Bytes: len(out), Tokens: 500}})
		if i%5 == 0 {
			marks = append(marks, add(&events.Mark{Item: call, Decision: events.Prune, Rung: events.L0,
				Reason: events.ReasonDuplicateOutput, Part: "output", Cause: "e1", PolicyVersion: "pv1",
				Recoverability: &events.Recoverability{Log: "e1", Survivor: "toolu_9999"}}))
		}
	}
	add(&events.Application{Request: "r1", Marks: marks, Items: marks, Trigger: events.TriggerNextRequest, PolicyVersion: "pv1"})
	return s, blobs
}

func BenchmarkRenderAnthropic(b *testing.B) {
	s, blobs := benchSession(b, 2000)
	ctx := context.Background()
	bundle := s.Bundle()
	out, err := RenderAnthropic(ctx, bundle, blobs, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RenderAnthropic(ctx, bundle, blobs, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBundleAndRenderAnthropic(b *testing.B) {
	s, blobs := benchSession(b, 2000)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RenderAnthropic(ctx, s.Bundle(), blobs, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderOpenAI(b *testing.B) {
	s, blobs := benchSession(b, 2000)
	ctx := context.Background()
	bundle := s.Bundle()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RenderOpenAI(ctx, bundle, blobs, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStats(b *testing.B) {
	s, _ := benchSession(b, 2000)
	ctx := context.Background()
	tc := &wordCounter{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Stats(ctx, nil, tc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBundle measures the snapshot alone (what the proxy uses).
func BenchmarkBundle(b *testing.B) {
	s, _ := benchSession(b, 2000)
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Bundle()
	}
}
