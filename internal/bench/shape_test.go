//go:build benchprof

package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/pipeline"
	"github.com/prunesched/prunesched/policy"
)

// BenchmarkPipelineShape measures the pipeline's CPU per fact (the whole
// process: store appends, the embedded server, the three workers) with
// the eligibility and scheduler workers in one process, on their own
// durables (each fact delivered and acknowledged twice: the shape of a
// store from before the shared durable, which it keeps) and on the
// shared one, with facts coming a request at a time, 1 ms apart, as
// proxy-load's agents send them. The two shapes in one binary:
//
//	go test -tags benchprof -run '^$' -bench PipelineShape -benchtime 6x ./internal/bench/
func BenchmarkPipelineShape(b *testing.B) {
	for _, shape := range []string{"own", "shared"} {
		b.Run(shape, func(b *testing.B) { pipelineShape(b, shape == "shared") })
	}
}

func pipelineShape(b *testing.B, shared bool) {
	ctx := context.Background()
	r := newRunner(Config{TempDir: b.TempDir()}, policy.Default(), &Result{})
	rig, err := r.startLog(ctx, false)
	if err != nil {
		b.Fatal(err)
	}
	defer rig.close()
	if err := r.w.putBlobs(ctx, rig.st); err != nil {
		b.Fatal(err)
	}
	p, err := pipeline.NewFromConfig(rig.st, pipeline.Config{Policy: r.pol, Logger: r.log})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	run := func(only ...string) { wg.Go(func() { _ = p.Run(runCtx, only...) }) }
	if shared {
		run()
	} else {
		// Run apart, the kinds create their own durables; the scheduler
		// still asks this process's eligibility worker.
		run("eligibility")
		run("scheduler", "projection")
	}
	defer func() { cancel(); wg.Wait() }()
	facts := 0
	b.ResetTimer()
	cpu0 := processCPU()
	for i := range b.N {
		evs := r.w.session("", fmt.Sprintf("shape%02d", i), 200)
		for len(evs) > 0 {
			n := 1
			for n < len(evs) {
				if _, ok := evs[n-1].Data.(*events.ModelRequest); ok {
					break
				}
				n++
			}
			if err := appendEvents(ctx, rig.st, evs[:n]); err != nil {
				b.Fatal(err)
			}
			facts += n
			evs = evs[n:]
			time.Sleep(time.Millisecond)
		}
	}
	if err := p.WaitIdle(ctx); err != nil {
		b.Fatal(err)
	}
	cpu := processCPU() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(facts), "cpu-µs/fact")
	b.ReportMetric(float64(facts)/float64(b.N), "facts/op")
}
