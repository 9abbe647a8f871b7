package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

// TestConsumeBatch: batches hold events in delivery order; a failed or
// panicking batch comes back whole; an undecodable message is terminated
// and never reaches the handler; the ack hook sees the last sequence of
// each acknowledged batch; a mark outside the filter never arrives; and
// Consume returns after cancel.
func TestConsumeBatch(t *testing.T) {
	ctx := testCtx(t)
	nc := connectEmbedded(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("batch")
	var facts []events.Event
	for i := range 40 {
		facts = append(facts, msgEvent("", sess, fmt.Sprintf("e%02d", i), "text"))
	}
	stored, err := s.Append(ctx, facts[:20])
	testutil.NoError(t, err)
	_, err = s.Append(ctx, []events.Event{markEvent("", sess, "m1", "x", "e00")})
	testutil.NoError(t, err)
	// Garbage on the session's fact subject: terminated, not handled.
	testutil.NoError(t, nc.Publish(events.StoredSubject(events.DefaultTenant, sess, events.KindFact, s.PartitionOf("", sess)), []byte("{not json")))

	var (
		mu       sync.Mutex
		attempts = map[string]int{}
		done     []string
		batches  int
		acked    uint64
		decodes  int
	)
	handler := func(ctx context.Context, evs []events.Event) error {
		mu.Lock()
		defer mu.Unlock()
		batches++
		for i, e := range evs {
			if i > 0 && e.Seq <= evs[i-1].Seq {
				return fmt.Errorf("batch out of order: %d after %d", e.Seq, evs[i-1].Seq)
			}
			attempts[e.ID]++
		}
		for _, e := range evs {
			if e.ID == "e05" && attempts[e.ID] == 1 {
				return errors.New("transient failure")
			}
			if e.ID == "e25" && attempts[e.ID] == 1 {
				panic("handler bug")
			}
		}
		for _, e := range evs {
			done = append(done, e.ID)
		}
		return nil
	}
	durable := "batch-" + sess
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make(chan error, 1)
	go func() {
		res <- s.ConsumeBatch(cctx, durable, events.Subject("", sess, events.KindFact), handler,
			WithMaxBatch(8),
			WithAckHook(func(seq uint64) { mu.Lock(); acked = max(acked, seq); mu.Unlock() }),
			WithDecodeErrorHook(func(error) { mu.Lock(); decodes++; mu.Unlock() }))
	}()
	more, err := s.Append(ctx, facts[20:])
	testutil.NoError(t, err)
	last := more[len(more)-1].Seq
	drainConsumer(t, ctx, s, durable, last, cancel, res)
	mu.Lock()
	defer mu.Unlock()
	testutil.Equal(t, attempts["e05"], 2)
	testutil.Equal(t, attempts["e25"], 2)
	testutil.Equal(t, len(done), len(stored)+len(more))
	seen := map[string]bool{}
	for _, id := range done {
		testutil.True(t, !seen[id], "%s handled twice after success", id)
		seen[id] = true
	}
	_, seenMark := attempts["m1"]
	testutil.True(t, !seenMark, "filter leaked a mark")
	testutil.Equal(t, decodes, 1)
	testutil.True(t, batches > 2 && batches < len(facts), "%d batches for %d events", batches, len(facts))
	testutil.Equal(t, acked, last)
	testutil.Error(t, s.ConsumeBatch(ctx, "bad.name", "", handler))
	testutil.Error(t, s.ConsumeBatch(ctx, "ok", "", nil))
}
