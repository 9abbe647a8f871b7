package pipeline

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/policy"
)

// TestMixedShapesStartTogether: a process running both workers (serve)
// and a worker of one kind (prunesched worker eligibility) start at the
// same moment on an empty stream. Each partition gets exactly one shape:
// the shared durable alone, or the kinds' own durables alone, never both
// (both would judge every fact); the worker refuses the partitions it
// lost with errSharedDurable; and every fact is delivered once to the
// consumer that judges it.
func TestMixedShapesStartTogether(t *testing.T) {
	t.Parallel()
	ctx, input, _, cfg := sharedCase(t)
	cfg.Partitions = 16 // sixteen races in one run
	serveSt, _, emb := startStore(t, ctx, cfg)
	workerSt, _ := connectStore(t, ctx, emb, cfg)
	serve := newPipelineT(t, serveSt, Config{Policy: policy.Default()})
	worker := newPipelineT(t, workerSt, Config{Policy: policy.Default()})

	start := make(chan struct{})
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	serveDone, workerDone := make(chan error, 1), make(chan error, 1)
	go func() { <-start; serveDone <- serve.Run(runCtx) }()
	go func() { <-start; workerDone <- worker.Run(runCtx, "eligibility") }()
	close(start)

	lg := &Log{Store: serveSt}
	has := func(kind string, p int) bool {
		ok, err := lg.HasConsumer(ctx, DurableName(kind, p))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// Serve consumes every partition in one shape or the other.
	testutil.Eventually(t, func() error {
		for p := range serveSt.Partitions() {
			if !has(DurableJudge, p) && !(has(DurableEligibility, p) && has(DurableScheduler, p)) {
				return fmt.Errorf("partition %d not consumed yet", p)
			}
		}
		return nil
	})
	shared := 0
	for p := range serveSt.Partitions() {
		judge, own := has(DurableJudge, p), has(DurableEligibility, p) || has(DurableScheduler, p)
		if judge && own {
			t.Errorf("partition %d: consumed by %s and by the kinds' own durables", p, DurableName(DurableJudge, p))
		}
		if judge {
			shared++
		}
	}
	if _, err := serveSt.Append(ctx, input); err != nil {
		t.Fatal(err)
	}
	if err := serve.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	facts := map[int]uint64{}
	for _, e := range input {
		facts[serveSt.PartitionOf(e.TenantOrDefault(), e.Session)]++
	}
	for p := range serveSt.Partitions() {
		var judged uint64
		for _, kind := range []string{DurableJudge, DurableEligibility} {
			c, err := serveSt.JS().Consumer(ctx, events.StreamName, DurableName(kind, p))
			if err != nil {
				continue
			}
			judged += c.CachedInfo().Delivered.Consumer
		}
		if judged != facts[p] {
			t.Errorf("partition %d: %d deliveries to the consumers that judge, want its %d facts once", p, judged, facts[p])
		}
	}

	if shared > 0 {
		// The worker refused a partition it lost, and stopped.
		if err := <-workerDone; !errors.Is(err, errSharedDurable) {
			t.Errorf("worker on %d shared partitions: %v, want %v", shared, err, errSharedDurable)
		}
	}
	cancel()
	if err := <-serveDone; err != nil {
		t.Errorf("serve: %v", err)
	}
	if shared == 0 {
		if err := <-workerDone; err != nil {
			t.Errorf("worker: %v", err)
		}
	}
}
