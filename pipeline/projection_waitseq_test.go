package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/prunesched/prunesched/internal/testutil"
)

// TestProjectionWaitSeqWakesOnce: a WaitSeq call returns at once for a
// sequence applied, is woken when its own sequence is applied (not by the
// batches before it), and leaves the worker when its context ends.
func TestProjectionWaitSeqWakesOnce(t *testing.T) {
	t.Parallel()
	w := NewProjectionWorker(nil, slog.New(slog.DiscardHandler), nil)
	// Messages that do not decode advance the sequence like any other.
	applyTo := func(from, to uint64) {
		var batch []projMsg
		for seq := from; seq <= to; seq++ {
			batch = append(batch, projMsg{seq: seq, err: errors.New("not an event")})
		}
		w.apply(batch)
	}
	waiting := func(n int) func() error {
		return func() error {
			w.mu.RLock()
			defer w.mu.RUnlock()
			if len(w.waiters) != n {
				return fmt.Errorf("%d waiters, want %d", len(w.waiters), n)
			}
			return nil
		}
	}
	ctx := context.Background()
	testutil.NoError(t, w.WaitSeq(ctx, 0))
	applyTo(1, 3)
	testutil.NoError(t, w.WaitSeq(ctx, 3))

	cctx, cancel := context.WithCancel(ctx)
	res := map[string]chan error{"5": make(chan error, 1), "10": make(chan error, 1), "10 cancelled": make(chan error, 1)}
	go func() { res["5"] <- w.WaitSeq(ctx, 5) }()
	go func() { res["10"] <- w.WaitSeq(ctx, 10) }()
	go func() { res["10 cancelled"] <- w.WaitSeq(cctx, 10) }()
	testutil.Eventually(t, waiting(3))

	applyTo(4, 4)
	testutil.Eventually(t, waiting(3)) // nobody's sequence yet
	applyTo(5, 7)
	testutil.NoError(t, <-res["5"])
	testutil.Eventually(t, waiting(2))

	cancel()
	err := <-res["10 cancelled"]
	testutil.Error(t, err, context.Canceled)
	testutil.Eventually(t, waiting(1))

	applyTo(8, 12)
	testutil.NoError(t, <-res["10"])
	testutil.Eventually(t, waiting(0))
	testutil.Equal(t, w.Seq(), uint64(12), "seq")
}
