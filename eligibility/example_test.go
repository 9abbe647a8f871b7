package eligibility_test

import (
	"context"
	"fmt"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/policy"
)

// ExampleCore runs the eligibility core alone, without NATS: each fact of
// the shipped sample session, in stored form (events.Prepare: outputs
// hashed into the blob store, tokens counted), goes through Observe, which
// returns the marks it causes. The PRUNE marks name the rung and reason
// that proved the item redundant.
func ExampleCore() {
	ctx := context.Background()
	sessions, err := importers.Import("../examples/sample-session.jsonl", "native")
	if err != nil {
		fmt.Println(err)
		return
	}
	blobs, tc := store.NewMemBlobs(), tokens.New() // an in-memory blob store stands in for the log's
	core := eligibility.New(policy.Default(), events.DefaultTenant, "sample")
	core.SetContent(func(h string) ([]byte, error) { return blobs.GetBlob(ctx, h) })
	for _, ev := range sessions[0].Events {
		fact, err := events.Prepare(ctx, ev, blobs, tc)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, m := range core.Observe(fact) {
			if mk := m.Data.(*events.Mark); mk.Decision == events.Prune {
				fmt.Println(mk.Item, mk.Rung, mk.Reason)
			}
		}
	}
	// Output:
	// t3 L0 DUPLICATE_OUTPUT
	// t1 L2 SUPERSEDED
	// t7 L0 DUPLICATE_OUTPUT
}
