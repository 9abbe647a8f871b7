package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
)

// progressMsg is a delivered message that counts its working
// acknowledgements.
type progressMsg struct {
	jetstream.Msg
	n    atomic.Int32
	told chan struct{} // receives at each InProgress
}

func (m *progressMsg) InProgress() error {
	m.n.Add(1)
	select {
	case m.told <- struct{}{}:
	default:
	}
	return nil
}

// TestBatcherKeepsHeldMessagesInProgress: while a batch consumer holds a
// message (queued or being handled) it tells the server it is in
// progress, so a batch slower than the ack wait is not redelivered to
// another worker while this one works on it; a settled message is not
// told about any more.
func TestBatcherKeepsHeldMessagesInProgress(t *testing.T) {
	b := &batcher{held: map[jetstream.Msg]struct{}{}, quit: make(chan struct{})}
	held := &progressMsg{told: make(chan struct{}, 1)}
	settled := &progressMsg{told: make(chan struct{}, 1)}
	b.held[held] = struct{}{}
	b.held[settled] = struct{}{}
	b.release([]delivered{{msg: settled}})
	done := make(chan struct{})
	go func() { defer close(done); b.keepAlive(30 * time.Millisecond) }()
	for i := 0; i < 2; i++ {
		select {
		case <-held.told:
		case <-time.After(time.Minute):
			t.Fatal("a held message was never told in progress")
		}
	}
	close(b.quit)
	<-done
	if n := settled.n.Load(); n != 0 {
		t.Fatalf("a settled message was told in progress %d times", n)
	}
}

// TestPinnedPullsRenewWithinTTL: with a pinned priority group, pull
// requests expire (and are renewed) well within the pinned TTL, since the
// server unpins a client that sends no new pull for the TTL however long
// its last one waits; never below the client library's 1 s minimum.
func TestPinnedPullsRenewWithinTTL(t *testing.T) {
	for _, c := range []struct {
		o    consumeOpts
		want time.Duration
	}{
		{consumeOpts{}, pullExpiry},
		{consumeOpts{group: "g", pinnedTTL: time.Minute}, pullExpiry},
		{consumeOpts{group: "g", pinnedTTL: 10 * time.Second}, 10 * time.Second / 3},
		{consumeOpts{group: "g", pinnedTTL: 2 * time.Second}, time.Second},
	} {
		if got := pullExpiryFor(c.o); got != c.want {
			t.Errorf("pinned TTL %s: pull expiry %s, want %s", c.o.pinnedTTL, got, c.want)
		}
	}
}

// ackMsg is a delivered message that accepts its acknowledgements.
type ackMsg struct{ jetstream.Msg }

func (ackMsg) Ack() error                       { return nil }
func (ackMsg) DoubleAck(context.Context) error  { return nil }
func (ackMsg) InProgress() error                { return nil }
func (ackMsg) NakWithDelay(time.Duration) error { return nil }

// TestBatchGapInHandlingOrder: a message delivered after a gap (the
// consumer delivered to another client in between) opens a batch of its
// own, and the gap hook runs when the loop reaches it: after the messages
// delivered before the gap are handled, not when the gap is seen. Dropping
// the cached state on delivery let those earlier messages rebuild it, and
// the message after the gap was then judged on a state that missed the
// other client's facts.
func TestBatchGapInHandlingOrder(t *testing.T) {
	seen := make(chan string, 8)
	b := &batcher{maxBatch: 10, held: map[jetstream.Msg]struct{}{}, quit: make(chan struct{}), done: make(chan struct{}),
		in: make(chan delivered, 8), log: testLogger(t),
		gaps: gapDetector{log: testLogger(t), onGap: func() { seen <- "gap" }},
		handler: func(_ context.Context, evs []events.Event) error {
			var ids []string
			for _, e := range evs {
				ids = append(ids, e.ID)
			}
			seen <- strings.Join(ids, ",")
			return nil
		}}
	for i, gap := range []bool{false, false, true, false} {
		b.in <- delivered{msg: &ackMsg{}, ev: events.Event{ID: fmt.Sprint("e", i+1), Seq: uint64(i + 1)}, gap: gap}
	}
	go b.loop(context.Background())
	var got []string
	for len(got) < 3 {
		select {
		case s := <-seen:
			got = append(got, s)
		case <-time.After(time.Minute):
			t.Fatalf("batches not handled: %v", got)
		}
	}
	close(b.quit)
	<-b.done
	if want := []string{"e1,e2", "gap", "e3,e4"}; !slices.Equal(got, want) {
		t.Fatalf("handled %v, want %v", got, want)
	}
}

// countingMsg counts its plain and confirmed acknowledgements.
type countingMsg struct {
	jetstream.Msg
	acks, confirmed *int
}

func (m countingMsg) Ack() error { *m.acks++; return nil }
func (m countingMsg) DoubleAck(context.Context) error {
	*m.confirmed++
	return nil
}

// TestBatchAckConfirmedWhenIdle: a handled batch's acknowledgements are
// sent without waiting for the server while more events are queued; when
// nothing is queued, or an ack hook waits for it, the batch's last
// acknowledgement is confirmed, and the hook runs with its sequence.
func TestBatchAckConfirmedWhenIdle(t *testing.T) {
	for _, c := range []struct {
		hook, queued bool
		want         [2]int // plain, confirmed
	}{
		{false, false, [2]int{2, 1}},
		{false, true, [2]int{3, 0}},
		{true, false, [2]int{2, 1}},
		{true, true, [2]int{2, 1}},
	} {
		var acks, confirmed int
		var acked []uint64
		b := &batcher{log: testLogger(t), held: map[jetstream.Msg]struct{}{}, in: make(chan delivered, 1)}
		if c.hook {
			b.o.onAcked = func(seq uint64) { acked = append(acked, seq) }
		}
		if c.queued {
			b.in <- delivered{msg: ackMsg{}}
		}
		var batch []delivered
		for i := range 3 {
			m := countingMsg{acks: &acks, confirmed: &confirmed}
			batch = append(batch, delivered{msg: m, ev: events.Event{Seq: uint64(i + 1)}})
		}
		b.settle(context.Background(), batch, nil)
		if got := [2]int{acks, confirmed}; got != c.want {
			t.Errorf("hook %v, queued %v: plain and confirmed acks %v, want %v", c.hook, c.queued, got, c.want)
		}
		if want := []uint64{3}; c.hook && !slices.Equal(acked, want) {
			t.Errorf("hook ran with %v, want %v", acked, want)
		}
		if !c.hook && len(acked) != 0 {
			t.Errorf("no hook, yet acked %v", acked)
		}
	}
}
