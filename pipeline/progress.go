package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// progress records, per durable consumer, the highest stream sequence this
// process's own workers have had acknowledged, and wakes whoever waits for
// it. Partition consumers deliver strictly in order (MaxAckPending 1), so
// an acknowledged sequence means the consumer's ack floor has reached it:
// a local waiter learns it without asking the server. A consumer run by
// another process never moves here; waiters fall back to the server's ack
// floor, polled with backoff.
type progress struct {
	mu    sync.Mutex
	acked map[string]uint64
	moved chan struct{} // closed and replaced on every advance
}

func newProgress() *progress {
	return &progress{acked: map[string]uint64{}, moved: make(chan struct{})}
}

// advance records that durable's event at seq was acknowledged.
func (p *progress) advance(durable string, seq uint64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if seq <= p.acked[durable] {
		return
	}
	p.acked[durable] = seq
	close(p.moved)
	p.moved = make(chan struct{})
}

// hook returns the store.WithAckHook callback for durable.
func (p *progress) hook(durable string) func(uint64) {
	return func(seq uint64) { p.advance(durable, seq) }
}

// at returns durable's local acknowledged sequence and a channel closed at
// the next advance of any consumer. A nil progress knows nothing.
func (p *progress) at(durable string) (uint64, <-chan struct{}) {
	if p == nil {
		return 0, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked[durable], p.moved
}

// ackFloorer reads a durable consumer's ack floor from the server.
type ackFloorer interface {
	AckFloor(ctx context.Context, durable string) (uint64, error)
}

// waitFloor blocks until durable's ack floor reaches seq: at once when this
// process's worker acknowledged it (woken by the acknowledgement, no
// sleeping), otherwise when the server's ack floor says so, asked at first
// and then with a backoff of 1, 2, 4 ... 64 ms between notifications.
func waitFloor(ctx context.Context, st ackFloorer, prog *progress, durable string, seq uint64, what string) error {
	delay := time.Millisecond
	remote := true
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		local, moved := prog.at(durable)
		if local >= seq {
			return nil
		}
		if remote {
			floor, err := st.AckFloor(ctx, durable)
			if err == nil && floor >= seq {
				return nil
			}
			remote = false
			if timer == nil {
				timer = time.NewTimer(delay)
			} else {
				timer.Reset(delay)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to reach seq %d: %w", what, seq, ctx.Err())
		case <-moved:
		case <-timer.C:
			remote = true
			if delay < 50*time.Millisecond {
				delay *= 2
			}
		}
	}
}
