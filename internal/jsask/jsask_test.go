package jsask

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/internal/testutil"
)

// longCtx is a context whose deadline the tests never reach: they end on
// an answer or cancel it themselves.
func longCtx(t *testing.T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx, cancel
}

// unanswered is an attempt that gets no answer: it returns when its
// context ends, as a request does.
func unanswered(ctx context.Context) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// again is the bound between attempts in the tests: short, so the tests
// do not wait; what they check does not depend on it.
const again = 5 * time.Millisecond

func TestAskAnsweredOnce(t *testing.T) {
	ctx, _ := longCtx(t)
	var n atomic.Int32
	v, err := Ask(ctx, again, func(context.Context) (string, error) { n.Add(1); return "a", nil })
	testutil.NoError(t, err)
	testutil.Equal(t, v, "a")
	testutil.Equal(t, n.Load(), int32(1))
}

// A request that gets no answer is sent again, and the later answer is
// taken (before, the caller waited until its deadline).
func TestAskAgainAfterNoAnswer(t *testing.T) {
	ctx, _ := longCtx(t)
	var n atomic.Int32
	v, err := Ask(ctx, again, func(ctx context.Context) (string, error) {
		if n.Add(1) == 1 {
			return unanswered(ctx)
		}
		return "second", nil
	})
	testutil.NoError(t, err)
	testutil.Equal(t, v, "second")
	testutil.True(t, n.Load() >= 2, "%d attempts", n.Load())
}

// An answer that is an error (a consumer that does not exist) is the
// answer: not asked again.
func TestAskErrorAnswerNotRetried(t *testing.T) {
	ctx, _ := longCtx(t)
	var n atomic.Int32
	_, err := Ask(ctx, again, func(context.Context) (string, error) {
		n.Add(1)
		return "", jetstream.ErrConsumerNotFound
	})
	testutil.True(t, errors.Is(err, jetstream.ErrConsumerNotFound), "error %v", err)
	testutil.Equal(t, n.Load(), int32(1))
}

// JetStream's "temporarily unavailable" (a group without a leader for a
// while) is no answer about the state: asked again.
func TestAskAgainAfterClusterNotAvailable(t *testing.T) {
	ctx, _ := longCtx(t)
	var n atomic.Int32
	v, err := Ask(ctx, again, func(context.Context) (string, error) {
		if n.Add(1) == 1 {
			return "", &jetstream.APIError{Code: 503, ErrorCode: codeClusterNotAvail, Description: "JetStream system temporarily unavailable"}
		}
		return "later", nil
	})
	testutil.NoError(t, err)
	testutil.Equal(t, v, "later")
}

// Attempts after the first overlap: an earlier one answering late (a
// slow server) is taken while a later one still waits.
func TestAskTakesALateAnswer(t *testing.T) {
	ctx, _ := longCtx(t)
	var n atomic.Int32
	third := make(chan struct{})
	v, err := Ask(ctx, again, func(ctx context.Context) (string, error) {
		switch n.Add(1) {
		case 1:
			return unanswered(ctx)
		case 2:
			select {
			case <-third:
				return "second", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		case 3:
			close(third)
		}
		return unanswered(ctx)
	})
	testutil.NoError(t, err)
	testutil.Equal(t, v, "second")
}

// When the caller's context ends first, the error wraps its reason and
// counts the requests sent.
func TestAskEndsWithTheContext(t *testing.T) {
	ctx, cancel := longCtx(t)
	var n atomic.Int32
	_, err := Ask(ctx, again, func(ctx context.Context) (string, error) {
		if n.Add(1) == 3 {
			cancel()
		}
		return unanswered(ctx)
	})
	testutil.True(t, errors.Is(err, context.Canceled), "error %v", err)
	testutil.Contains(t, err.Error(), "no answer to ")
	testutil.True(t, n.Load() >= 3, "%d attempts", n.Load())
}

// Without a deadline there is one attempt, with the caller's context.
func TestAskWithoutDeadlineOnce(t *testing.T) {
	var n atomic.Int32
	_, err := Ask(context.Background(), again, func(ctx context.Context) (string, error) {
		n.Add(1)
		if _, ok := ctx.Deadline(); ok {
			t.Error("the attempt got a deadline the caller did not set")
		}
		return "", context.DeadlineExceeded // the library's own default timeout
	})
	testutil.True(t, errors.Is(err, context.DeadlineExceeded), "error %v", err)
	testutil.Equal(t, n.Load(), int32(1))
}
