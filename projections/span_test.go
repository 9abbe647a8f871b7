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
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/placeholder"
)

// numberedLines renders lines from..to of a file as Claude Code's Read does.
func numberedLines(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%6d→\tfunc handler%d(w http.ResponseWriter) { serve(w, %d) }\n", i, i, i)
	}
	return b.String()
}

// spanSession is a session where c2 (lines 20-49 of a.go, then two new
// lines) repeats lines 20-49 of c1 (the whole file, lines 1-60), with an
// applied span reference on c2.
func spanSession(t *testing.T) ([]events.Event, *store.MemBlobs) {
	t.Helper()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var evs []events.Event
	add := func(p events.Payload) {
		at = at.Add(time.Second)
		evs = append(evs, events.New(fmt.Sprintf("e%d", len(evs)+1), "", "span", at, p))
	}
	read := func(id, args, out string) {
		add(&events.ToolCall{Item: events.CallInputItem(id), CallID: id, Tool: "Read", Input: json.RawMessage(args)})
		add(&events.ToolResult{Item: id, CallID: id, Tool: "Read", Output: &out})
	}
	add(&events.SessionStarted{Format: "test", CWD: "/w", Provider: "anthropic", Model: "m"})
	read("c1", `{"file_path":"/w/a.go"}`, numberedLines(1, 60))
	second := numberedLines(20, 49) + "    50→\t// new\n    51→\t}\n"
	read("c2", `{"file_path":"/w/a.go","offset":20,"limit":32}`, second)
	lines := strings.Split(second, "\n")
	ev := events.Evidence{Kind: placeholder.SpanEvidenceKind, Item: "c1", Hash: placeholder.RunHash(lines[0:30]), Value: "1-30=20-49"}
	add(&events.Mark{Item: "c2", Decision: events.Prune, Rung: events.L1, Reason: events.ReasonSpanReference, Part: "output",
		Evidence: []events.Evidence{ev}, Recoverability: &events.Recoverability{Log: evs[4].ID, Survivor: "c1"},
		TokensEstimated: 200, Cause: evs[4].ID, CauseIndex: 4, PolicyVersion: "p", By: "eligibility"})
	add(&events.ModelRequest{Request: "r1"})
	add(&events.Application{Request: "r1", Marks: []string{evs[5].ID}, Items: []string{"c2"}, Trigger: events.TriggerNeverSent, PolicyVersion: "p"})
	blobs := store.NewMemBlobs()
	tc := &wordCounter{}
	for i, e := range evs {
		p, err := events.Prepare(context.Background(), e, blobs, tc)
		testutil.NoError(t, err)
		testutil.NoError(t, p.Validate())
		evs[i] = p
	}
	return evs, blobs
}

// TestSpanRender renders a span reference (golden) and its fallback: once
// the earlier read is pruned, the read renders whole and is not pruned.
func TestSpanRender(t *testing.T) {
	ctx := context.Background()
	evs, blobs := spanSession(t)
	s := NewSession("", "span")
	for _, e := range evs {
		s.Observe(e)
	}
	txt, err := RenderText(ctx, s.Bundle(), blobs, nil)
	testutil.NoError(t, err)
	goldenCompare(t, "span.txt", txt)
	an, err := RenderAnthropic(ctx, s.Bundle(), blobs, nil)
	testutil.NoError(t, err)
	goldenCompare(t, "span.anthropic.json", an)
	want := "[prunesched: lines 1-30 = #1 lines 20-49, sha256:"
	testutil.True(t, strings.Contains(string(txt), want), "no reference line %q in\n%s", want, txt)
	testutil.True(t, strings.Contains(string(txt), "    50→\t// new"), "new lines not verbatim")

	// The earlier read is pruned: the reference no longer applies.
	at := evs[len(evs)-1].Time
	prune := events.New("x1", "", "span", at.Add(time.Second), &events.Mark{Item: "c1", Decision: events.Prune, Reason: events.ReasonManualPrune,
		Part: "output", Recoverability: &events.Recoverability{Log: evs[2].ID}, TokensEstimated: 10, Cause: "x0", PolicyVersion: "p", By: "ann"})
	s.Observe(prune)
	s.Observe(events.New("x2", "", "span", at.Add(2*time.Second), &events.Application{Request: "r2", Marks: []string{"x1"}, Items: []string{"c1"}, Trigger: events.TriggerManual, PolicyVersion: "p"}))
	txt2, err := RenderText(ctx, s.Bundle(), blobs, nil)
	testutil.NoError(t, err)
	testutil.True(t, !strings.Contains(string(txt2), "lines 1-30 = #1"), "reference still applied after #1 was pruned:\n%s", txt2)
	testutil.True(t, strings.Contains(string(txt2), numberedLines(20, 49)), "c2 not rendered whole:\n%s", txt2)
	for _, bi := range s.Bundle().Items {
		if bi.ID == "c2" {
			testutil.True(t, !bi.Pruned && len(bi.Spans) == 0, "c2 still pruned: %+v", bi.Item)
		}
	}
}

// TestApplySpansWhole checks that a span whose hash does not match leaves
// the text whole.
func TestApplySpansWhole(t *testing.T) {
	text := numberedLines(1, 10)
	_, err := placeholder.ApplySpans(text, []placeholder.Span{{From: 1, To: 5, Item: "#0", SrcFrom: 1, SrcTo: 5, Hash: "sha256:00"}})
	testutil.True(t, err != nil, "a wrong hash was applied")
}

// TestRenderSpansRule: RenderSpans says whether the spans applied, and
// gives the output whole when they do not (none, a wrong hash, past the
// end).
func TestRenderSpansRule(t *testing.T) {
	text := numberedLines(1, 10)
	lines := strings.Split(text, "\n")
	good := placeholder.Span{From: 2, To: 4, Item: "#0", SrcFrom: 2, SrcTo: 4, Hash: placeholder.RunHash(lines[1:4])}
	r, ok := (&BundleItem{Spans: []placeholder.Span{good}}).RenderSpans(text)
	want, err := placeholder.ApplySpans(text, []placeholder.Span{good})
	testutil.NoError(t, err)
	testutil.True(t, ok && r == want, "applied: %v %q", ok, r)
	bad, past := good, good
	bad.Hash = "sha256:00"
	past.To, past.SrcTo = 99, 99
	for _, spans := range [][]placeholder.Span{nil, {bad}, {past}} {
		r, ok := (&BundleItem{Spans: spans}).RenderSpans(text)
		testutil.True(t, !ok && r == text, "%+v applied: %q", spans, r)
	}
}
