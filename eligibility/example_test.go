package eligibility_test

import (
	"context"
	"fmt"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/importers"
	"github.com/prunesched/prunesched/policy"
)

// blobs keeps tool outputs by content address in memory (the log's
// object store in a running service).
type blobs map[string][]byte

func (b blobs) PutBlob(_ context.Context, hash string, data []byte) error {
	b[hash] = data
	return nil
}

func (b blobs) get(hash string) ([]byte, error) {
	if d, ok := b[hash]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("no blob %s", hash)
}

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
	store, tc := blobs{}, tokens.New()
	core := eligibility.New(policy.Default(), events.DefaultTenant, "sample")
	core.SetContent(store.get)
	for _, ev := range sessions[0].Events {
		fact, err := events.Prepare(ctx, ev, store, tc)
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
