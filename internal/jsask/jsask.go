// Package jsask asks JetStream for state (a durable consumer's progress, a
// stream's last sequence, the last message on a subject at a stream's
// leader) so that a request that gets no answer does not hold its caller
// until the caller's whole deadline.
//
// Such a request is answered by the leader of one Raft group: the
// consumer's, or the stream's. While that group elects a leader (at
// start-up, after a node is lost) the servers answer nothing at all, and
// a request sent then waits for an answer that never comes. A wait that
// polls the state (pipeline.WaitIdle, a worker waiting for another's ack
// floor, a proxy catching up) then failed at its deadline although the
// group had a leader again seconds later. Ask sends the request again
// after a bound and takes the first answer to any of its requests.
//
// The store (events/store) and the proxy (which may not import the
// store) share it, so the rule is defined once.
package jsask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultAgain is how long Ask waits for an answer before it sends the
// request again, when the caller gives no bound of its own. A leader
// answers state requests in milliseconds; a few seconds leave a loaded
// server time to answer the first request, and an unanswered one costs
// no more than that.
const DefaultAgain = 2 * time.Second

// codeClusterNotAvail is the JetStream API's error code for "JetStream
// system temporarily unavailable" (the server's JSClusterNotAvailErr): a
// server that finds the group leaderless for a while answers it instead
// of waiting. It is not an answer about the state, so Ask asks again.
const codeClusterNotAvail jetstream.ErrorCode = 10008

// Ask returns attempt's answer, sending the request again every again
// (DefaultAgain when not positive) while none has come, until ctx ends.
//
// The first attempt runs with ctx bounded by again; when it gets no
// answer within that bound, a new attempt starts every again, each
// bounded only by ctx, and the first answer of any of them is taken (a
// server slower than again is still answered). Any answer ends it, an
// error answer included (a consumer that does not exist, say), except
// JetStream's "temporarily unavailable", which waits for the next
// attempt. When ctx ends first the error wraps ctx.Err() and says how
// many requests went unanswered.
//
// Without a deadline on ctx it makes one attempt with ctx, as the caller
// did before (the JetStream library bounds that by its default timeout):
// asking again until a context without end ends could block forever on a
// server that is gone.
func Ask[T any](ctx context.Context, again time.Duration, attempt func(ctx context.Context) (T, error)) (T, error) {
	if _, ok := ctx.Deadline(); !ok {
		return attempt(ctx)
	}
	if again <= 0 {
		again = DefaultAgain
	}
	first, cancel := context.WithTimeout(ctx, again)
	v, err := attempt(first)
	cancel()
	if ctx.Err() == nil && !retry(err) {
		return v, err
	}
	return askAgain(ctx, again, attempt, err)
}

// askAgain is Ask after a first attempt unanswered (its error last):
// overlapping attempts, one every again, until one is answered or ctx
// ends.
func askAgain[T any](ctx context.Context, again time.Duration, attempt func(ctx context.Context) (T, error), last error) (T, error) {
	type result struct {
		v   T
		err error
	}
	actx, cancel := context.WithCancel(ctx)
	results := make(chan result)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	sent := 1
	launch := func() {
		sent++
		wg.Go(func() {
			v, err := attempt(actx)
			select {
			case results <- result{v, err}:
			case <-actx.Done():
			}
		})
	}
	ended := func() (T, error) {
		var zero T
		if last != nil && !errors.Is(last, context.DeadlineExceeded) {
			return zero, fmt.Errorf("no answer to %d request(s), the last error %v: %w", sent, last, ctx.Err())
		}
		return zero, fmt.Errorf("no answer to %d request(s): %w", sent, ctx.Err())
	}
	if ctx.Err() != nil {
		return ended()
	}
	launch()
	tick := time.NewTicker(again)
	defer tick.Stop()
	for {
		select {
		case r := <-results:
			if ctx.Err() != nil {
				return ended()
			}
			if !retry(r.err) {
				return r.v, r.err
			}
			last = r.err
		case <-tick.C:
			launch()
		case <-ctx.Done():
			return ended()
		}
	}
}

// retry reports whether err is no answer about the state: an attempt's
// own bound passed, or JetStream said it is temporarily unavailable.
func retry(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == codeClusterNotAvail
}

// LastAtLeader returns the last message on subj (a subject or a filter)
// in stream as the stream's leader holds it: the JetStream API's message
// get, never a direct get (which any replica answers, and one behind the
// leader misses what was just stored; a key-value bucket allows direct
// gets by default). It returns the message's sequence and, when data is
// true, its payload. No message is jetstream.ErrMsgNotFound. It is one
// request, on js's API prefix; without a deadline on ctx it waits at most
// js's default timeout.
func LastAtLeader(ctx context.Context, js jetstream.JetStream, stream, subj string, data bool) (uint64, []byte, error) {
	req, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{subj})
	if err != nil {
		return 0, nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, js.Options().DefaultTimeout)
		defer cancel()
	}
	msg, err := js.Conn().RequestWithContext(ctx, apiSubject(js, "STREAM.MSG.GET."+stream), req)
	if err != nil {
		return 0, nil, fmt.Errorf("get at the leader: %w", err)
	}
	var resp struct {
		Message *struct {
			Seq  uint64          `json:"seq"`
			Data json.RawMessage `json:"data"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, nil, fmt.Errorf("get at the leader: %w", err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return 0, nil, jetstream.ErrMsgNotFound
	case resp.Error != nil:
		return 0, nil, fmt.Errorf("get at the leader: %w", resp.Error)
	case resp.Message == nil:
		return 0, nil, fmt.Errorf("get at the leader: %w", jetstream.ErrInvalidJetStreamResponse)
	}
	var payload []byte
	if data && len(resp.Message.Data) > 0 {
		if err := json.Unmarshal(resp.Message.Data, &payload); err != nil {
			return 0, nil, fmt.Errorf("get at the leader: %w", err)
		}
	}
	return resp.Message.Seq, payload, nil
}

// apiSubject is the JetStream API subject rest ("STREAM.MSG.GET.X") under
// js's prefix: the one it was made with, its domain's, or the default.
func apiSubject(js jetstream.JetStream, rest string) string {
	o := js.Options()
	switch {
	case o.APIPrefix != "":
		p := o.APIPrefix
		if !strings.HasSuffix(p, ".") {
			p += "."
		}
		return p + rest
	case o.Domain != "":
		return "$JS." + o.Domain + ".API." + rest
	}
	return jetstream.DefaultAPIPrefix + rest
}
