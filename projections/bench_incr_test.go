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

// benchGrower appends rounds of facts to a benchSession, as the render
// bench does between requests: an assistant text, a tool call and its
// output, a PRUNE mark on an older output, and every tenth round an
// application of the pending marks.
type benchGrower struct {
	s     *Session
	blobs *store.MemBlobs
	round int
	seq   int
	at    time.Time
	// pending are the marks not applied yet.
	pending []string
}

func (g *benchGrower) add(p events.Payload) string {
	g.seq++
	id := fmt.Sprintf("g%07d", g.seq)
	g.s.Observe(events.New(id, "", "bench", g.at.Add(time.Duration(g.seq)*time.Second), p))
	return id
}

func (g *benchGrower) step(b testing.TB) {
	i := g.round
	g.round++
	g.add(&events.Message{Item: fmt.Sprintf("ga%d", i), Role: events.RoleAssistant, Text: "Reading another file.", Tokens: 5})
	call := fmt.Sprintf("toolg_%05d", i)
	input, _ := json.Marshal(map[string]string{"file_path": fmt.Sprintf("src/g%d.go", i%50)})
	g.add(&events.ToolCall{Item: events.CallInputItem(call), CallID: call, Tool: "Read", Input: input, InputTokens: 10})
	out := []byte(fmt.Sprintf("package g%d\n%s", i, strings.Repeat("// another line of code\n", 80)))
	h := events.HashBytes(out)
	if err := g.blobs.PutBlob(context.Background(), h, out); err != nil {
		b.Fatal(err)
	}
	g.add(&events.ToolResult{Item: call, CallID: call, Tool: "Read", OutputRef: &events.ContentRef{Hash: h, Bytes: len(out), Tokens: 500}})
	// The new output duplicates an older one: a pending PRUNE on the older
	// copy (as eligibility marks it), applied every tenth round.
	old := fmt.Sprintf("toolu_%04d", (i*7)%300+1)
	g.pending = append(g.pending, g.add(&events.Mark{Item: old, Decision: events.Prune, Rung: events.L0, Reason: events.ReasonDuplicateOutput,
		Part: "output", Cause: "g1", PolicyVersion: "pv1", Recoverability: &events.Recoverability{Log: "g1", Survivor: call}}))
	if i%10 == 9 {
		g.add(&events.Application{Request: fmt.Sprintf("gr%d", i), Marks: g.pending, Items: g.pending, Trigger: events.TriggerNextRequest, PolicyVersion: "pv1"})
		g.pending = nil
	}
}

// benchmarkRenderAfterAppend mimics the render bench: between two timed
// Bundle+RenderAnthropic calls one round of facts is appended (untimed).
// The session is rebuilt every 50 requests so it stays near n items.
func benchmarkRenderAfterAppend(b *testing.B, n int, snapshot bool) {
	ctx := context.Background()
	var g *benchGrower
	fresh := func() {
		s, blobs := benchSession(b, n)
		g = &benchGrower{s: s, blobs: blobs, at: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
		if _, err := RenderAnthropic(ctx, s.Bundle(), blobs, nil); err != nil {
			b.Fatal(err)
		}
	}
	fresh()
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		b.StopTimer()
		if k++; k%50 == 0 {
			fresh()
		}
		g.step(b)
		b.StartTimer()
		var err error
		if snapshot {
			_, err = g.s.Snapshot().RenderAnthropic(ctx, g.blobs, nil)
		} else {
			_, err = RenderAnthropic(ctx, g.s.Bundle(), g.blobs, nil)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// Bundle + RenderAnthropic, as before Snapshot.
func BenchmarkRenderAfterAppend2000(b *testing.B)  { benchmarkRenderAfterAppend(b, 2000, false) }
func BenchmarkRenderAfterAppend20000(b *testing.B) { benchmarkRenderAfterAppend(b, 20000, false) }

// Snapshot().RenderAnthropic: the render-at-request path.
func BenchmarkSnapshotRenderAfterAppend2000(b *testing.B) {
	benchmarkRenderAfterAppend(b, 2000, true)
}
func BenchmarkSnapshotRenderAfterAppend20000(b *testing.B) {
	benchmarkRenderAfterAppend(b, 20000, true)
}
