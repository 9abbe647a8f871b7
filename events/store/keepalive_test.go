package store

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
