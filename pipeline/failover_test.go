package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
)

// failoverInput is the sample session under two names, interleaved, so
// the crashed worker holds facts of both.
func failoverInput(t *testing.T) []events.Event {
	t.Helper()
	sample := loadSample(t)
	var out []events.Event
	for _, e := range sample {
		out = append(out, e)
		c := e
		c.Session = "sample-b"
		out = append(out, c)
	}
	return out
}

// logView is what a run leaves in the log and the projection, compared
// across runs: every session's views and the ids of its marks and
// applications.
type logView struct {
	views [][]byte
	ids   []string
}

func viewOf(t *testing.T, ctx context.Context, p *Pipeline, tc events.TokenCounter, sessions ...string) logView {
	t.Helper()
	var v logView
	for _, s := range sessions {
		if !p.Projection.View("default", s, func(ps *projections.Session) { v.views = append(v.views, snapshot(t, ctx, ps, p.Store, tc)...) }) {
			t.Fatalf("session %s not projected", s)
		}
		evs, err := p.Store.ReadSession(ctx, "default", s)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, e := range evs {
			if e.IsFact() {
				continue
			}
			if seen[e.ID] {
				t.Errorf("%s %s stored twice", e.Type, e.ID)
			}
			seen[e.ID] = true
			v.ids = append(v.ids, string(e.Type)+" "+e.ID)
		}
	}
	slices.Sort(v.ids)
	return v
}

func startStore(t *testing.T, ctx context.Context, cfg store.Config) (*store.Store, *nats.Conn, *store.Embedded) {
	t.Helper()
	emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{DataDir: t.TempDir()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	st, nc := connectStore(t, ctx, emb, cfg)
	return st, nc, emb
}

// connectStore opens a store on an in-process admin connection to emb (the
// tests create streams with their own settings).
func connectStore(t *testing.T, ctx context.Context, emb *store.Embedded, cfg store.Config) (*store.Store, *nats.Conn) {
	t.Helper()
	nc, err := emb.ConnectAdmin("pipeline-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, err := store.Open(ctx, nc, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return st, nc
}

func runPipeline(t *testing.T, ctx context.Context, p *Pipeline) {
	t.Helper()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("pipeline: %v", err)
		}
	})
}

// TestFailoverWithFactsInFlight: a worker that crashes holding delivered,
// unacknowledged facts (of both kinds of partition consumer, or of the
// shared one of a process running both) leaves them to be redelivered
// only after the ack wait, while its successor already receives the
// later facts. The successor must publish exactly what a single
// undisturbed run publishes: every mark and application, once, and
// byte-identical projections.
func TestFailoverWithFactsInFlight(t *testing.T) {
	t.Parallel()
	t.Run("own durables", func(t *testing.T) { t.Parallel(); failoverWithFactsInFlight(t, DurableEligibility, DurableScheduler) })
	t.Run("shared durable", func(t *testing.T) { t.Parallel(); failoverWithFactsInFlight(t, DurableJudge) })
}

// undisturbedView is what one undisturbed pipeline on a fresh store
// leaves of the sessions once it has handled input (the reference the
// tests of failures and upgrades compare with).
func undisturbedView(t *testing.T, ctx context.Context, cfg store.Config, input []events.Event, sessions []string) logView {
	t.Helper()
	st, _, _ := startStore(t, ctx, cfg)
	p := newPipelineT(t, st, Config{Policy: policy.Default()})
	runPipeline(t, ctx, p)
	if _, err := st.Append(ctx, input); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	return viewOf(t, ctx, p, cfg.Tokens, sessions...)
}

// failoverWithFactsInFlight is TestFailoverWithFactsInFlight with a
// crashed worker holding the partition consumers named by kinds.
func failoverWithFactsInFlight(t *testing.T, kinds ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	input := failoverInput(t)
	sessions := []string{"sample", "sample-b"}
	tc := tokens.New()
	cfg := store.Config{Tokens: tc, AckWait: 3 * time.Second, NakDelay: 100 * time.Millisecond}

	want := undisturbedView(t, ctx, cfg, input, sessions)

	// The crashed worker: takes the pins of every partition consumer of
	// both kinds, receives the first facts, never acknowledges them, and
	// disappears (its connection closes without a word).
	st, _, emb := startStore(t, ctx, cfg)
	deadSt, deadNC := connectStore(t, ctx, emb, cfg)
	const ttl = 300 * time.Millisecond
	parts := partitioning{pinnedTTL: ttl}
	hold := make(chan struct{})
	got := make(chan string, 64)
	deadCtx, deadCancel := context.WithCancel(ctx)
	for p := range st.Partitions() {
		for _, kind := range kinds {
			durable := DurableName(kind, p)
			go func() {
				_ = deadSt.ConsumeBatch(deadCtx, durable, events.PartitionFilter(events.KindFact, p),
					func(ctx context.Context, evs []events.Event) error {
						got <- durable
						<-hold
						return context.Canceled
					}, parts.consumeOptions(nil, kind, durable, func() {})...)
			}()
		}
	}
	cut := len(input) * 2 / 3
	if _, err := st.Append(ctx, input[:cut]); err != nil {
		t.Fatal(err)
	}
	// Every consumer of the two sessions' partitions holds a batch (the
	// cut is late enough in the sessions that the facts held cause marks
	// and applications: the successor must publish them; without its
	// repair of earlier facts this test fails).
	need := map[string]bool{}
	for _, s := range sessions {
		p := st.PartitionOf("default", s)
		for _, kind := range kinds {
			need[DurableName(kind, p)] = true
		}
	}
	for len(need) > 0 {
		select {
		case d := <-got:
			delete(need, d)
		case <-ctx.Done():
			t.Fatalf("the crashed worker never received facts on %v", need)
		}
	}
	deadNC.Close()
	t.Cleanup(func() { close(hold); deadCancel() })

	// The successor takes over while facts keep coming.
	var logs bytes.Buffer
	p := newPipelineT(t, st, Config{Policy: policy.Default(), PinnedTTL: ttl, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer func() {
		if t.Failed() {
			t.Logf("successor logs:\n%s", logs.String())
		}
	}()
	runPipeline(t, ctx, p)
	for _, e := range input[cut:] {
		if _, err := st.Append(ctx, []events.Event{e}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	got2 := viewOf(t, ctx, p, tc, sessions...)
	if !slices.Equal(want.ids, got2.ids) {
		t.Errorf("marks and applications differ from the undisturbed run:\nwant %v\ngot  %v", want.ids, got2.ids)
	}
	for i := range want.views {
		if !bytes.Equal(want.views[i], got2.views[i]) {
			t.Errorf("view %d differs from the undisturbed run:\n%s\n---\n%s", i, want.views[i], got2.views[i])
		}
	}
}

// TestMarkTailBounded: the marks a session keeps for this process's
// scheduler stay bounded when nobody takes them, and a reader asking for
// marks older than those kept is sent to the log.
func TestMarkTailBounded(t *testing.T) {
	s := &eligSession{}
	for i := 1; i <= maxTail+10; i++ {
		s.addTail(events.Event{ID: fmt.Sprintf("m%d", i), Seq: uint64(i)})
	}
	if len(s.tail) > maxTail {
		t.Fatalf("tail holds %d marks, bound %d", len(s.tail), maxTail)
	}
	if s.from == 0 || s.tail[0].Seq != s.from+1 || s.tail[len(s.tail)-1].Seq != maxTail+10 {
		t.Fatalf("tail covers (%d, %d..%d]", s.from, s.tail[0].Seq, s.tail[len(s.tail)-1].Seq)
	}
	w := NewEligibilityWorker(fakePartitioner{}, policy.Default(), nil, nil)
	w.partition(0).sessions[sessionKey{"t", "s"}] = s
	s.stored = maxTail + 10
	if _, ok := w.takeMarks(sessionKey{"t", "s"}, s.stored, s.from-1); ok {
		t.Fatal("marks older than the tail were served from memory")
	}
	marks, ok := w.takeMarks(sessionKey{"t", "s"}, s.stored, maxTail)
	if !ok || len(marks) != 10 || marks[0].Seq != maxTail+1 {
		t.Fatalf("takeMarks after %d: ok %v, %d marks", maxTail, ok, len(marks))
	}
}

// fakePartitioner puts every session in partition 0.
type fakePartitioner struct{ eligibilityLog }

func (fakePartitioner) PartitionOf(string, string) int { return 0 }
