package pipeline_test

import (
	"context"
	"fmt"
	"os"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/pipeline"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
)

// Example embeds the whole pipeline: the embedded log, the eligibility
// worker, the timing scheduler and the projection, run in this process.
// It appends the shipped sample session, waits until every worker has
// handled it, and reads the PRUNE decisions from the projection.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, _ := os.MkdirTemp("", "prunesched-example-")
	defer os.RemoveAll(dir)
	emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{DataDir: dir}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer emb.Shutdown()
	nc, err := emb.ConnectAdmin("example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	st, err := store.Open(ctx, nc, store.Config{SoleWriter: true}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// No logger, no metrics registry: both are optional.
	p := pipeline.New(st, policy.Default(), nil, nil)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	sessions, err := importers.Import("../examples/sample-session.jsonl", "native")
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := st.Append(ctx, sessions[0].Events); err != nil {
		fmt.Println(err)
		return
	}
	if err := p.WaitIdle(ctx); err != nil {
		fmt.Println(err)
		return
	}
	p.Projection.View(events.DefaultTenant, "sample", func(s *projections.Session) {
		for _, d := range s.Decisions() {
			if d.Decision == events.Prune {
				fmt.Println(d.Item, d.Rung, d.Reason, "applied:", d.Applied)
			}
		}
	})
	// Output:
	// t1 L2 SUPERSEDED applied: true
	// t3 L0 DUPLICATE_OUTPUT applied: true
	// t7 L0 DUPLICATE_OUTPUT applied: true
}
