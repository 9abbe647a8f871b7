package pipeline

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/policy"
)

// TestPendingAfterRestart: a restarted pipeline (or the worker that took a
// partition over) reports the same pending marks and deferred gauge as the
// one that decided them, though no new fact arrives.
func TestPendingAfterRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tc := tokens.New()
	st, _, _ := startStore(t, ctx, store.Config{Tokens: tc})
	// Up to the Read before the idle gap: the marks wait for a cold cache.
	sample := loadSample(t)[:20]

	run := func() (*Pipeline, *prometheus.Registry, context.CancelFunc, chan error) {
		reg := prometheus.NewRegistry()
		p := New(st, policy.Default(), slog.New(slog.DiscardHandler), reg)
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(runCtx) }()
		return p, reg, stop, done
	}
	p1, reg1, stop1, done1 := run()
	if _, err := st.Append(ctx, sample); err != nil {
		t.Fatal(err)
	}
	if err := p1.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	want := pendingOf(t, ctx, p1, "default", "sample")
	if len(want) == 0 {
		t.Fatal("the sample leaves no mark pending: the test needs one")
	}
	wantGauge := gaugeValue(t, p1.Metrics.deferred)
	if wantGauge != float64(len(want)) {
		t.Fatalf("deferred gauge %v before the restart, %d pending", wantGauge, len(want))
	}
	_ = reg1
	stop1()
	if err := <-done1; err != nil {
		t.Fatal(err)
	}

	p2, _, stop2, done2 := run()
	defer func() { stop2(); <-done2 }()
	if err := p2.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	waitSurveyed(t, ctx, p2)
	if got := gaugeValue(t, p2.Metrics.deferred); got != wantGauge {
		t.Errorf("deferred gauge after restart = %v, want %v", got, wantGauge)
	}
	got := pendingOf(t, ctx, p2, "default", "sample")
	if len(got) != len(want) {
		t.Fatalf("pending after restart: %d marks, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("pending[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// TestDeferredGaugeAfterTakeover: the scheduler that takes a partition over
// from a stopped one counts the marks waiting in the partition's sessions
// as soon as the partition's deliveries reach it, not only those of the
// sessions it then receives facts for.
func TestDeferredGaugeAfterTakeover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tc := tokens.New()
	st, _, _ := startStore(t, ctx, store.Config{Tokens: tc, Partitions: 1, AckWait: 3 * time.Second})
	const ttl = 300 * time.Millisecond
	start := func() (*Pipeline, context.CancelFunc, chan error) {
		p := newPipelineT(t, st, Config{Policy: policy.Default(), PinnedTTL: ttl, Registry: prometheus.NewRegistry()})
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(runCtx) }()
		return p, stop, done
	}
	a, stopA, doneA := start()
	if _, err := st.Append(ctx, loadSample(t)[:20]); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	want := gaugeValue(t, a.Metrics.deferred)
	if want == 0 {
		t.Fatal("nothing deferred: the test needs a waiting mark")
	}
	stopA()
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}

	b, stopB, doneB := start()
	defer func() { stopB(); <-doneB }()
	other := loadSample(t)[:3]
	for i := range other {
		other[i].Session = "other"
	}
	if _, err := st.Append(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := gaugeValue(t, b.Metrics.deferred); got != want {
		t.Errorf("deferred gauge on the successor = %v, want %v (the marks still waiting in session sample)", got, want)
	}
}
