package pipeline

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
)

// TestIdleSweepSameDecisions runs the same interleaved sessions through a
// pipeline that never sweeps and through one swept after every session's
// step (so the other sessions, idle since the previous sweep, are evicted
// from the three workers and rebuilt from the log on their next fact or
// view): marks, applications and every rendered view must be
// byte-identical, and a final pair of sweeps leaves no session held.
func TestIdleSweepSameDecisions(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tc := tokens.New()
	type run struct {
		st *store.Store
		p  *Pipeline
	}
	start := func() run {
		st, _, _ := startStore(t, ctx, store.Config{Tokens: tc})
		p := newPipelineT(t, st, Config{Policy: policy.Default(), Logger: slog.New(slog.DiscardHandler),
			Registry: prometheus.NewRegistry(), IdleAfter: -1})
		runPipeline(t, ctx, p)
		return run{st, p}
	}
	ref, swept := start(), start()

	sample := loadSample(t)
	sessions := []string{"a", "b", "c"}
	var evicted Evicted
	step := 7
	for from := 0; from < len(sample); from += step {
		for _, s := range sessions {
			evs := renamed(sample[from:min(from+step, len(sample))], s)
			for _, r := range []run{ref, swept} {
				if _, err := r.st.Append(ctx, evs); err != nil {
					t.Fatal(err)
				}
				if err := r.p.WaitIdle(ctx); err != nil {
					t.Fatal(err)
				}
			}
			ev := swept.p.EvictIdle()
			evicted.Eligibility += ev.Eligibility
			evicted.Scheduler += ev.Scheduler
			evicted.Projection += ev.Projection
		}
	}
	if evicted.Eligibility == 0 || evicted.Scheduler == 0 || evicted.Projection == 0 {
		t.Errorf("the sweeps evicted %+v, want some from every worker", evicted)
	}
	// Marks in log order, then applications in log order: how the two
	// workers' appends interleave depends on how facts were batched (in
	// the reference too); each worker's own output must not.
	decisions := func(r run, s string) [][]byte {
		evs, err := r.st.ReadSession(ctx, "default", s)
		if err != nil {
			t.Fatal(err)
		}
		var marks, apps [][]byte
		for _, e := range evs {
			if e.IsFact() {
				continue
			}
			b, err := events.Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			if e.Type == events.TypeMark {
				marks = append(marks, b)
			} else {
				apps = append(apps, b)
			}
		}
		return append(marks, apps...)
	}
	for _, s := range sessions {
		want, got := decisions(ref, s), decisions(swept, s)
		if len(want) == 0 {
			t.Fatalf("session %s: no marks or applications in the reference", s)
		}
		if len(got) != len(want) {
			t.Fatalf("session %s: %d marks and applications with sweeps, %d without", s, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("session %s decision %d differs:\nswept %s\nref   %s", s, i, got[i], want[i])
			}
		}
	}
	// Two sweeps with nothing in between leave every session compact;
	// views rebuild them, identical to the reference.
	swept.p.EvictIdle()
	swept.p.EvictIdle()
	if _, held, _, _ := swept.p.Projection.Memory(); held != 0 {
		t.Errorf("projection holds %d sessions after two idle sweeps, want 0", held)
	}
	for _, s := range sessions {
		var gv, wv [][]byte
		if !swept.p.Projection.View("default", s, func(ps *projections.Session) { gv = snapshot(t, ctx, ps, swept.st, tc) }) {
			t.Fatalf("session %s not rebuilt", s)
		}
		ref.p.Projection.View("default", s, func(ps *projections.Session) { wv = snapshot(t, ctx, ps, ref.st, tc) })
		if len(gv) != len(wv) {
			t.Fatalf("session %s: %d views after the sweep, %d in the reference", s, len(gv), len(wv))
		}
		for i := range wv {
			if !bytes.Equal(gv[i], wv[i]) {
				t.Errorf("session %s view %d differs", s, i)
			}
		}
	}
}

// TestSessionTableIdleSweep checks the sweep's rule on one table: a
// session used since the previous sweep stays, one that was not is
// forgotten, with its cost.
func TestSessionTableIdleSweep(t *testing.T) {
	tb := &sessionTable[int]{sessions: map[sessionKey]*int{}}
	a, b := sessionKey{"t", "a"}, sessionKey{"t", "b"}
	one, two := 1, 2
	tb.sessions[a], tb.sessions[b] = &one, &two
	tb.touchLocked(a, 3)
	tb.touchLocked(b, 4)
	if n := tb.evictIdle(); n != 0 {
		t.Fatalf("first sweep forgot %d sessions, want 0 (both used since the start)", n)
	}
	tb.touchLocked(b, 1)
	if n := tb.evictIdle(); n != 1 {
		t.Fatalf("second sweep forgot %d sessions, want 1", n)
	}
	if _, ok := tb.sessions[a]; ok {
		t.Error("a, idle since the first sweep, is still held")
	}
	if _, ok := tb.sessions[b]; !ok {
		t.Error("b, used since the first sweep, was forgotten")
	}
	if tb.total() != 5 {
		t.Errorf("total facts %d, want 5 (b's)", tb.total())
	}
}
