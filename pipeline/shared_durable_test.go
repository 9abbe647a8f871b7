package pipeline

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/policy"
)

// durables returns which partition consumers of kinds the stream has.
func durables(t *testing.T, ctx context.Context, st *store.Store, kinds ...string) []string {
	t.Helper()
	lg := &Log{Store: st}
	var out []string
	for p := range st.Partitions() {
		for _, k := range kinds {
			ok, err := lg.HasConsumer(ctx, DurableName(k, p))
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				out = append(out, DurableName(k, p))
			}
		}
	}
	return out
}

// runOnly runs p's workers named in only until the test ends (or until
// the returned stop is called), and fails the test if they fail.
func runOnly(t *testing.T, ctx context.Context, p *Pipeline, only ...string) (stop func()) {
	t.Helper()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx, only...) }()
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("pipeline %v: %v", only, err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// sharedCase is the setting of the shared durable's tests: a context
// bounding the test, the input of two sessions, their names and the
// store's configuration.
func sharedCase(t *testing.T) (context.Context, []events.Event, []string, store.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx, failoverInput(t), []string{"sample", "sample-b"}, store.Config{Tokens: tokens.New()}
}

// sameView fails the test when got differs from want.
func sameView(t *testing.T, want, got logView) {
	t.Helper()
	if len(want.ids) == 0 || !slices.Equal(want.ids, got.ids) {
		t.Errorf("marks and applications differ:\nwant %v\ngot  %v", want.ids, got.ids)
	}
	for i := range want.views {
		if !bytes.Equal(want.views[i], got.views[i]) {
			t.Errorf("view %d differs:\n%s\n---\n%s", i, want.views[i], got.views[i])
		}
	}
}

// TestSharedDurable: a process running the eligibility and scheduler
// workers together consumes each partition with one shared durable
// (judge-pN, no eligibility-pN or scheduler-pN) and decides exactly what
// the two kinds in separate processes decide; a process that runs no
// worker waits on the shared durable's ack floor (a proxy of a fleet);
// a worker of one kind refuses a partition the shared durable consumes
// (both would judge every fact).
func TestSharedDurable(t *testing.T) {
	t.Parallel()
	ctx, input, sessions, cfg := sharedCase(t)
	tc := cfg.Tokens

	// Reference: eligibility and scheduler in separate processes.
	refSt, _, emb := startStore(t, ctx, cfg)
	elig := newPipelineT(t, refSt, Config{Policy: policy.Default()})
	runOnly(t, ctx, elig, "eligibility")
	otherSt, _ := connectStore(t, ctx, emb, cfg)
	ref := newPipelineT(t, otherSt, Config{Policy: policy.Default()})
	runOnly(t, ctx, ref, "scheduler", "projection")
	if _, err := refSt.Append(ctx, input); err != nil {
		t.Fatal(err)
	}
	if err := ref.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	want := viewOf(t, ctx, ref, tc, sessions...)
	if got := durables(t, ctx, refSt, DurableJudge); len(got) != 0 {
		t.Fatalf("separate processes created %v", got)
	}

	st, _, emb := startStore(t, ctx, cfg)
	p := newPipelineT(t, st, Config{Policy: policy.Default()})
	runPipeline(t, ctx, p)
	for _, e := range input {
		if _, err := st.Append(ctx, []events.Event{e}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	sameView(t, want, viewOf(t, ctx, p, tc, sessions...))
	if got := durables(t, ctx, st, DurableEligibility, DurableScheduler); len(got) != 0 {
		t.Errorf("the shared shape created %v", got)
	}
	if got := durables(t, ctx, st, DurableJudge); len(got) != st.Partitions() {
		t.Errorf("shared durables %v, want one per partition", got)
	}

	// A process running no worker waits on the shared floor.
	obsSt, _ := connectStore(t, ctx, emb, cfg)
	obs := newPipelineT(t, obsSt, Config{Policy: policy.Default()})
	for _, s := range sessions {
		last, err := obsSt.LastSeq(ctx, "default", s, events.KindFact)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := obs.Scheduler.WaitJudged(ctx, "default", s, last); err != nil {
			t.Errorf("wait for the eligibility of %s: %v", s, err)
		}
		if err := obs.Scheduler.waitFacts(ctx, st.PartitionOf("default", s), sessionKey{"default", s}, last); err != nil {
			t.Errorf("wait for the scheduling of %s: %v", s, err)
		}
	}

	// A worker of one kind refuses the shared partitions.
	for _, kind := range []string{"eligibility", "scheduler"} {
		one := newPipelineT(t, obsSt, Config{Policy: policy.Default()})
		err := one.Run(ctx, kind)
		if !errors.Is(err, errSharedDurable) {
			t.Errorf("%s worker on shared partitions: %v, want %v", kind, err, errSharedDurable)
		}
	}
}

// TestSharedDurableUpgrade: a store whose partitions are consumed by the
// two kinds' own durables (written before the shared durable existed)
// keeps them when a process running both workers starts on it: they go
// on from their positions (nothing judged again, nothing skipped), no
// shared durable is created, and the decisions are those of one
// undisturbed run.
func TestSharedDurableUpgrade(t *testing.T) {
	t.Parallel()
	ctx, input, sessions, cfg := sharedCase(t)
	tc := cfg.Tokens

	want := undisturbedView(t, ctx, cfg, input, sessions)

	// Before: one process, each kind its own durables (as every store
	// written before the shared durable).
	st, _, _ := startStore(t, ctx, cfg)
	old := newPipelineT(t, st, Config{Policy: policy.Default()})
	stopElig := runOnly(t, ctx, old, "eligibility")
	stopRest := runOnly(t, ctx, old, "scheduler", "projection")
	cut := len(input) * 2 / 3
	if _, err := st.Append(ctx, input[:cut]); err != nil {
		t.Fatal(err)
	}
	if err := old.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	stopElig()
	stopRest()
	lg := &Log{Store: st}
	floors := map[string]uint64{}
	for _, d := range durables(t, ctx, st, DurableEligibility, DurableScheduler) {
		f, err := lg.AckFloor(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		floors[d] = f
	}
	if len(floors) != 2*st.Partitions() {
		t.Fatalf("own durables before the upgrade: %v", floors)
	}

	// After: the upgraded process runs both together on the same store.
	p := newPipelineT(t, st, Config{Policy: policy.Default()})
	runPipeline(t, ctx, p)
	if _, err := st.Append(ctx, input[cut:]); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	sameView(t, want, viewOf(t, ctx, p, tc, sessions...))
	if got := durables(t, ctx, st, DurableJudge); len(got) != 0 {
		t.Errorf("the upgrade created %v over the existing durables", got)
	}
	// Every fact was delivered once to each durable: the kept durables
	// went on from their floors, not from the start.
	facts := map[int]uint64{}
	for _, e := range input {
		facts[st.PartitionOf(e.TenantOrDefault(), e.Session)]++
	}
	for d, before := range floors {
		info, err := st.JS().Consumer(ctx, events.StreamName, d)
		if err != nil {
			t.Fatal(err)
		}
		ci := info.CachedInfo()
		part := -1
		for p := range st.Partitions() {
			if d == DurableName(DurableEligibility, p) || d == DurableName(DurableScheduler, p) {
				part = p
			}
		}
		if ci.Delivered.Consumer != facts[part] || ci.NumRedelivered != 0 {
			t.Errorf("%s: %d deliveries (%d redelivered), want each of the partition's %d facts once (floor %d before the upgrade)",
				d, ci.Delivered.Consumer, ci.NumRedelivered, facts[part], before)
		}
	}
}
