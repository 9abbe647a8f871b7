package store_test

import (
	"context"
	"fmt"
	"os"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/internal/importers"
)

// Example starts the embedded JetStream server on a directory, opens the
// log as its only writer, appends a session's facts (twice: the second
// append stores nothing, appends are idempotent by event id) and reads the
// session back in order.
func Example() {
	ctx := context.Background()
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
	// The shipped sample session, in prunesched's native JSONL.
	sessions, err := importers.Import("../../examples/sample-session.jsonl", "native")
	if err != nil {
		fmt.Println(err)
		return
	}
	facts := sessions[0].Events
	for range 2 {
		if _, err := st.Append(ctx, facts); err != nil {
			fmt.Println(err)
			return
		}
	}
	evs, err := st.ReadSession(ctx, events.DefaultTenant, "sample")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(facts), "facts appended twice,", len(evs), "stored")
	for _, e := range evs[:3] {
		fmt.Println(e.Seq, e.ID, e.Type)
	}
	// Output:
	// 28 facts appended twice, 28 stored
	// 1 e01 session_started
	// 2 e02 message
	// 3 e03 message
}
