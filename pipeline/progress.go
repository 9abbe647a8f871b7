package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prunesched/prunesched/events/store"
)

// progress wakes whoever waits in this process for a worker to move: the
// workers call notify when they finish a batch (its outputs stored, the
// sessions' state advanced). It carries no position: waiters check
// the workers' own state (see waitFloor), which is exact per session,
// where an acknowledged sequence is not (with batched consumers a crashed
// worker's unacknowledged facts can lie below it).
type progress struct {
	mu    sync.Mutex
	moved chan struct{} // closed and replaced on every notify
}

func newProgress() *progress {
	return &progress{moved: make(chan struct{})}
}

// notify wakes every current waiter.
func (p *progress) notify() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.moved)
	p.moved = make(chan struct{})
}

// wait returns a channel closed at the next notify. A nil progress never
// notifies.
func (p *progress) wait() <-chan struct{} {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.moved
}

// ackFloorer reads a durable consumer's ack floor from the server.
type ackFloorer interface {
	AckFloor(ctx context.Context, durable string) (uint64, error)
}

// localCheck asks this process's worker whether it has done a session's
// work through a sequence; known is false when it holds nothing of the
// session (another process may be doing it).
type localCheck func() (done, known bool)

// waitFloor blocks until a session's work through seq is done: at once when
// local says this process's worker did it (woken by progress, no
// sleeping), otherwise when the ack floor on the server of the durable
// doing that work for partition part reaches seq (every fact of the
// partition up to seq acknowledged, whichever process did it): the
// kind's own durable, or the shared one (see floorOf). The server is asked
// at first when local knows nothing of the session, then with a backoff
// of 1, 2, 4 ... 64 ms between notifications.
func waitFloor(ctx context.Context, st ackFloorer, prog *progress, kind string, part int, seq uint64, local localCheck) error {
	delay := time.Millisecond
	askServer := true
	if local != nil {
		done, known := local()
		if done {
			return nil
		}
		if known {
			// This process is doing the work: it will notify.
			askServer, delay = false, 4*time.Millisecond
		}
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	arm := func() {
		if timer == nil {
			timer = time.NewTimer(delay)
		} else {
			timer.Reset(delay)
		}
	}
	arm()
	for {
		moved := prog.wait()
		if local != nil {
			if done, _ := local(); done {
				return nil
			}
		}
		if askServer {
			floor, err := floorOf(ctx, st, kind, part)
			if err == nil && floor >= seq {
				return nil
			}
			askServer = false
			arm()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to reach seq %d: %w", kind, seq, ctx.Err())
		case <-moved:
		case <-timer.C:
			askServer = true
			if delay < 50*time.Millisecond {
				delay *= 2
			}
		}
	}
}

// floorOf is the ack floor of the durable that does worker kind's work
// for partition part (kindDurable). An error when neither exists yet (no
// worker has started there).
func floorOf(ctx context.Context, st ackFloorer, kind string, part int) (uint64, error) {
	floor, _, err := kindDurable(kind, part, func(durable string) (uint64, error) { return st.AckFloor(ctx, durable) })
	return floor, err
}

// kindDurable asks get about the durable that does worker kind's work
// (DurableEligibility, DurableScheduler) for partition part: the kind's
// own, or, where the partition has none (get fails with
// store.ErrNotFound), the shared one of a process running both kinds
// (DurableJudge), which acknowledges a fact once both have done it. A
// partition has one or the other (see Pipeline.Run). shared says the
// shared one was asked.
func kindDurable[T any](kind string, part int, get func(durable string) (T, error)) (v T, shared bool, err error) {
	v, err = get(DurableName(kind, part))
	if !errors.Is(err, store.ErrNotFound) {
		return v, false, err
	}
	v, err = get(DurableName(DurableJudge, part))
	return v, true, err
}
