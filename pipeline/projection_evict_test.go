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

// gatedReader is a SessionReader that, when armed, signals that a read
// started and waits for the test to release it, so events can land while
// an evicted session is being rebuilt.
type gatedReader struct {
	st      *store.Store
	started chan struct{}
	release chan struct{}
}

func (g *gatedReader) ReadSession(ctx context.Context, tenant, session string) ([]events.Event, error) {
	if g.started != nil {
		close(g.started)
		g.started = nil
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.st.ReadSession(ctx, tenant, session)
}

// renamed returns the sample session's events under another session name
// (event ids stay unique per session).
func renamed(evs []events.Event, session string) []events.Event {
	out := make([]events.Event, len(evs))
	for i, e := range evs {
		e.Session = session
		out[i] = e
	}
	return out
}

// TestProjectionEvictionRebuildsIdentically runs a projection worker whose
// memory budget holds one session beside the pipeline's own (which evicts
// nothing): every session is evicted, some receive events while evicted
// and one while it is being rebuilt, and every view after the rebuild is
// byte-identical to the projection that never evicted.
func TestProjectionEvictionRebuildsIdentically(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tc := tokens.New()
	st, _, _ := startStore(t, ctx, store.Config{Tokens: tc})
	p := newPipelineT(t, st, Config{Policy: policy.Default(), Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(), ProjectionBytes: -1})
	runPipeline(t, ctx, p)

	gate := &gatedReader{st: st}
	w := NewProjectionWorker(st.JS(), slog.New(slog.DiscardHandler), nil)
	w.SetEviction(gate, 1) // any session over the first is evicted
	wctx, wstop := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	defer func() { wstop(); <-wdone }()

	sample := loadSample(t)
	half := len(sample) / 2
	sessions := []string{"a", "b", "c"}
	appendWait := func(evs []events.Event) {
		t.Helper()
		if _, err := st.Append(ctx, evs); err != nil {
			t.Fatal(err)
		}
		if err := p.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		last, err := st.StreamLastSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WaitSeq(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	// Interleaved: each session's second half lands while it is evicted.
	for _, s := range sessions {
		appendWait(renamed(sample[:half], s))
	}
	for _, s := range sessions[:2] {
		appendWait(renamed(sample[half:], s))
	}
	// Session c (held: the last one applied) is evicted by viewing a,
	// then read back while its second half lands.
	if !w.View("default", "a", func(*projections.Session) {}) {
		t.Fatal("session a not found after its rebuild")
	}
	gate.started, gate.release = make(chan struct{}), make(chan struct{})
	started := gate.started
	viewed := make(chan bool, 1)
	go func() { viewed <- w.View("default", "c", func(*projections.Session) {}) }()
	<-started
	appendWait(renamed(sample[half:], "c"))
	close(gate.release)
	if !<-viewed {
		t.Fatal("session c not found after its rebuild")
	}

	_, _, _, evictions := w.Memory()
	if evictions == 0 {
		t.Fatal("nothing was evicted")
	}
	for _, s := range append(sessions, sessions...) { // twice: evicted again by the views
		var got, want [][]byte
		if !w.View("default", s, func(ps *projections.Session) { got = snapshot(t, ctx, ps, st, tc) }) {
			t.Fatalf("session %s not found in the evicting projection", s)
		}
		if !p.Projection.View("default", s, func(ps *projections.Session) { want = snapshot(t, ctx, ps, st, tc) }) {
			t.Fatalf("session %s not found in the reference projection", s)
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("session %s view %d differs after eviction and rebuild:\n%s\n---\n%s", s, i, got[i], want[i])
			}
		}
	}
	if w.View("default", "nope", func(*projections.Session) {}) {
		t.Error("an unknown session was found")
	}
	bytesHeld, held, evicted, _ := w.Memory()
	if held != 1 || evicted != len(sessions)-1 {
		t.Errorf("held %d sessions (%d bytes), evicted %d; want 1 held", held, bytesHeld, evicted)
	}
}

// TestWorkerEvictionSameDecisions runs the same interleaved sessions
// through a pipeline whose workers and projection hold almost nothing
// (every idle session forgotten after each batch, rebuilt from the log on
// its next fact or view) and through one that evicts nothing: the marks,
// applications and every rendered view must be byte-identical.
func TestWorkerEvictionSameDecisions(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tc := tokens.New()
	type run struct {
		st *store.Store
		p  *Pipeline
	}
	start := func(cfg Config) run {
		st, _, _ := startStore(t, ctx, store.Config{Tokens: tc})
		cfg.Policy, cfg.Logger, cfg.Registry = policy.Default(), slog.New(slog.DiscardHandler), prometheus.NewRegistry()
		p := newPipelineT(t, st, cfg)
		runPipeline(t, ctx, p)
		return run{st, p}
	}
	ref := start(Config{ProjectionBytes: -1, WorkerFacts: 1 << 30})
	tight := start(Config{ProjectionBytes: 1, WorkerFacts: 1})

	sample := loadSample(t)
	sessions := []string{"a", "b", "c"}
	step := 5
	for from := 0; from < len(sample); from += step {
		for _, s := range sessions {
			evs := renamed(sample[from:min(from+step, len(sample))], s)
			for _, r := range []run{ref, tight} {
				if _, err := r.st.Append(ctx, evs); err != nil {
					t.Fatal(err)
				}
				if err := r.p.WaitIdle(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	decisions := func(r run, s string) [][]byte {
		evs, err := r.st.ReadSession(ctx, "default", s)
		if err != nil {
			t.Fatal(err)
		}
		var out [][]byte
		for _, e := range evs {
			if !e.IsFact() {
				b, err := events.Encode(e)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, b)
			}
		}
		return out
	}
	for _, s := range sessions {
		want, got := decisions(ref, s), decisions(tight, s)
		if len(want) == 0 {
			t.Fatalf("session %s: no marks or applications in the reference", s)
		}
		if len(got) != len(want) {
			t.Fatalf("session %s: %d marks and applications with eviction, %d without", s, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("session %s decision %d differs:\nevicting %s\nref      %s", s, i, got[i], want[i])
			}
		}
		var gv, wv [][]byte
		tight.p.Projection.View("default", s, func(ps *projections.Session) { gv = snapshot(t, ctx, ps, tight.st, tc) })
		ref.p.Projection.View("default", s, func(ps *projections.Session) { wv = snapshot(t, ctx, ps, ref.st, tc) })
		for i := range wv {
			if i >= len(gv) || !bytes.Equal(gv[i], wv[i]) {
				t.Errorf("session %s view %d differs", s, i)
			}
		}
	}
	if _, _, _, ev := tight.p.Projection.Memory(); ev == 0 {
		t.Error("the tight projection evicted nothing")
	}
}
