package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
)

type harness struct {
	st  *store.Store
	p   *Pipeline
	tc  *tokens.Counter
	ctx context.Context
}

func setup(t *testing.T) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	tc := tokens.New()
	st, _, _ := startStore(t, ctx, store.Config{Tokens: tc})
	p := New(st, policy.Default(), slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	runPipeline(t, ctx, p)
	return &harness{st: st, p: p, tc: tc, ctx: ctx}
}

func loadSample(t *testing.T) []events.Event {
	t.Helper()
	f, err := os.Open("../examples/sample-session.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := events.DecodeJSONL(f, "sample-session.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// snapshot renders every view of a session projection.
func snapshot(t *testing.T, ctx context.Context, s *projections.Session, blobs projections.BlobGetter, tc events.TokenCounter) [][]byte {
	t.Helper()
	b := s.Bundle()
	var out [][]byte
	for _, r := range []func(context.Context, projections.Bundle, projections.BlobGetter, events.TokenCounter) ([]byte, error){
		projections.RenderAnthropic, projections.RenderOpenAI, projections.RenderText,
	} {
		x, err := r(ctx, b, blobs, tc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, x)
	}
	d, err := json.Marshal(s.Decisions())
	if err != nil {
		t.Fatal(err)
	}
	return append(out, d)
}

// TestRebuildIsByteIdentical discards projection state and replays the log:
// the bundles and decisions must come out byte for byte the same, and the
// eligibility core fed the same facts must reproduce the marks in the log.
func TestRebuildIsByteIdentical(t *testing.T) {
	t.Parallel()
	h := setup(t)
	if _, err := h.st.Append(h.ctx, loadSample(t)); err != nil {
		t.Fatal(err)
	}
	if err := h.p.WaitIdle(h.ctx); err != nil {
		t.Fatal(err)
	}
	var live [][]byte
	if !h.p.Projection.View("default", "sample", func(s *projections.Session) { live = snapshot(t, h.ctx, s, h.st, h.tc) }) {
		t.Fatal("session not projected")
	}

	// Rebuild a projection from the log alone.
	fresh := projections.NewSession("default", "sample")
	logged, err := h.st.ReadSession(h.ctx, "default", "sample")
	if err != nil {
		t.Fatal(err)
	}
	var facts, marks []events.Event
	for _, e := range logged {
		fresh.Observe(e)
		switch {
		case e.IsFact():
			facts = append(facts, e)
		case e.Type == events.TypeMark:
			marks = append(marks, e)
		}
	}
	rebuilt := snapshot(t, h.ctx, fresh, h.st, h.tc)
	for i := range live {
		if !bytes.Equal(live[i], rebuilt[i]) {
			t.Errorf("view %d differs after rebuild:\n%s\n---\n%s", i, live[i], rebuilt[i])
		}
	}
	if len(marks) == 0 {
		t.Fatal("no marks in the log")
	}

	// Replaying the facts through a fresh core gives the same marks.
	core := eligibility.New(policy.Default(), "default", "sample")
	var replayed []events.Event
	for _, f := range facts {
		replayed = append(replayed, core.Observe(f)...)
	}
	if len(replayed) != len(marks) {
		t.Fatalf("replay gave %d marks, log has %d", len(replayed), len(marks))
	}
	for i := range marks {
		a, _ := events.Encode(marks[i])
		b, _ := events.Encode(replayed[i])
		if !bytes.Equal(a, b) {
			t.Errorf("mark %d differs:\nlog    %s\nreplay %s", i, a, b)
		}
	}
}

// TestAppliedAtTheNextRequest checks the first-slice timing rule: every
// application applies only marks caused before its request, and every PRUNE
// mark caused before some later request is applied by then.
func TestAppliedAtTheNextRequest(t *testing.T) {
	h := setup(t)
	if _, err := h.st.Append(h.ctx, loadSample(t)); err != nil {
		t.Fatal(err)
	}
	if err := h.p.WaitIdle(h.ctx); err != nil {
		t.Fatal(err)
	}
	logged, err := h.st.ReadSession(h.ctx, "default", "sample")
	if err != nil {
		t.Fatal(err)
	}
	marks := map[string]*events.Mark{}
	var requestIdx []int // fact indexes of model requests
	factIdx := 0
	applied := map[string]bool{}
	for _, e := range logged {
		switch p := e.Data.(type) {
		case *events.Mark:
			marks[e.ID] = p
		case *events.Application:
			for _, id := range p.Marks {
				m := marks[id]
				if m == nil {
					t.Fatalf("application %s applies unknown mark %s", e.ID, id)
				}
				if m.CauseIndex >= p.AfterIndex {
					t.Errorf("application %s at fact %d applies mark caused at fact %d", e.ID, p.AfterIndex, m.CauseIndex)
				}
				applied[id] = true
			}
		}
		if e.IsFact() {
			if e.Type == events.TypeModelRequest {
				requestIdx = append(requestIdx, factIdx)
			}
			factIdx++
		}
	}
	prunes := 0
	for id, m := range marks {
		if m.Decision != events.Prune {
			continue
		}
		prunes++
		later := false
		for _, r := range requestIdx {
			if r > m.CauseIndex {
				later = true
			}
		}
		if later && !applied[id] {
			t.Errorf("PRUNE mark %s on %s caused at fact %d was not applied at a later request", id, m.Item, m.CauseIndex)
		}
	}
	if prunes == 0 {
		t.Fatal("no PRUNE marks on the sample session")
	}
}
