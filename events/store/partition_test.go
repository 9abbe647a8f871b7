package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

// The server's partition(n,1,2) transform and events.Partition must agree,
// or readers would look for a session in the wrong partition.
func TestPartitionTransformMatchesClient(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), Config{Tokens: lenCounter{}, Partitions: 5})
	testutil.Equal(t, s.Partitions(), 5)
	seen := map[int]bool{}
	for i := 0; i < 40; i++ {
		tenant := []string{"", "acme", "t-2"}[i%3]
		sess := fmt.Sprintf("s%d", i)
		stored, err := s.Append(ctx, []events.Event{msgEvent(tenant, sess, "e1", "x")})
		testutil.NoError(t, err)
		msg, err := s.stream.GetMsg(ctx, stored[0].Seq)
		testutil.NoError(t, err)
		tn, sn, kind, p, err := events.ParseStoredSubject(msg.Subject)
		testutil.NoError(t, err)
		testutil.Equal(t, sn, sess)
		testutil.Equal(t, kind, events.KindFact)
		testutil.Equal(t, p, events.Partition(tn, sn, 5))
		testutil.Equal(t, p, s.PartitionOf(tenant, sess))
		seen[p] = true
		got, err := s.ReadSession(ctx, tenant, sess)
		testutil.NoError(t, err)
		testutil.Equal(t, len(got), 1)
		last, err := s.LastSeq(ctx, tenant, sess, events.KindFact)
		testutil.NoError(t, err)
		testutil.Equal(t, last, stored[0].Seq)
	}
	testutil.True(t, len(seen) == 5, "40 sessions used only partitions %v", seen)

	// The count is fixed at creation: a different one is refused, zero adopts.
	_, err := Open(ctx, s.nc, Config{Tokens: lenCounter{}, Partitions: 7}, nil)
	testutil.Error(t, err)
	testutil.Contains(t, err.Error(), "has 5 partitions")
	again := openStore(t, s.nc, Config{Tokens: lenCounter{}})
	testutil.Equal(t, again.Partitions(), 5)
}

// Two consumers of one pinned priority group: only one gets messages; when
// it stops pulling, the other takes over after the pinned TTL and nothing is
// handled twice or lost.
func TestPinnedGroupFailover(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	nc, nc2 := connectEmbeddedPair(t)
	cfg := Config{Tokens: lenCounter{}, AckWait: time.Second, Partitions: 2}
	a := openStore(t, nc, cfg)
	b := openStore(t, nc2, cfg)
	var (
		mu  sync.Mutex
		got = map[string]string{} // event id -> consumer
		dup []string
	)
	handler := func(name string) Handler {
		return func(_ context.Context, e events.Event) error {
			mu.Lock()
			defer mu.Unlock()
			if prev, ok := got[e.ID]; ok {
				dup = append(dup, e.ID+" by "+prev+" and "+name)
			}
			got[e.ID] = name
			return nil
		}
	}
	p := a.PartitionOf("", "pin")
	filter := events.PartitionFilter(events.KindFact, p)
	opts := []ConsumeOption{WithPinnedGroup("ps", 2*time.Second), WithMaxAckPending(1)}
	var evs []events.Event
	for i := 0; i < 10; i++ {
		evs = append(evs, msgEvent("", "pin", fmt.Sprintf("e%d", i), "x"))
	}
	handled := func(n int) func() error {
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(got) < n {
				return fmt.Errorf("%d of %d handled", len(got), n)
			}
			return nil
		}
	}
	waiting := func(n int) func() error {
		return func() error {
			c, err := a.js.Consumer(ctx, events.StreamName, "pinned")
			if err != nil {
				return err
			}
			ci, err := c.Info(ctx)
			if err != nil {
				return err
			}
			if ci.NumWaiting < n {
				return fmt.Errorf("%d pull requests waiting, want %d", ci.NumWaiting, n)
			}
			return nil
		}
	}
	actx, stopA := context.WithCancel(ctx)
	aDone := make(chan error, 1)
	go func() { aDone <- a.Consume(actx, "pinned", filter, handler("a"), opts...) }()
	// a alone: the server pins it with the first delivery.
	_, err := a.Append(ctx, evs[:2])
	testutil.NoError(t, err)
	testutil.Eventually(t, handled(2))
	// b pulls too (its pull request is waiting on the server); the pin
	// still sends everything to a.
	bctx, stopB := context.WithCancel(ctx)
	defer stopB()
	bDone := make(chan error, 1)
	go func() { bDone <- b.Consume(bctx, "pinned", filter, handler("b"), opts...) }()
	testutil.Eventually(t, waiting(2))
	_, err = a.Append(ctx, evs[2:5])
	testutil.NoError(t, err)
	testutil.Eventually(t, handled(5))
	stopA()
	testutil.NoError(t, <-aDone)
	_, err = a.Append(ctx, evs[5:])
	testutil.NoError(t, err)
	testutil.Eventually(t, handled(10))
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < 5; i++ {
		testutil.Equal(t, got[fmt.Sprintf("e%d", i)], "a")
	}
	for i := 5; i < 10; i++ {
		testutil.Equal(t, got[fmt.Sprintf("e%d", i)], "b")
	}
	testutil.True(t, len(dup) == 0, "handled twice: %v", dup)
	c, err := a.js.Consumer(ctx, events.StreamName, "pinned")
	testutil.NoError(t, err)
	ci, err := c.Info(ctx)
	testutil.NoError(t, err)
	testutil.Equal(t, ci.Config.PriorityPolicy, jetstream.PriorityPolicyPinned)
}
