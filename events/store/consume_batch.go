package store

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
)

// BatchHandler processes events a batch consumer delivered, in delivery
// order. Returning nil acknowledges all of them; an error (or a panic)
// hands every one back for redelivery after Config.NakDelay.
type BatchHandler func(ctx context.Context, evs []events.Event) error

// DefaultMaxBatch bounds the events of one BatchHandler call unless
// WithMaxBatch says otherwise.
const DefaultMaxBatch = 256

// WithMaxBatch bounds the events one BatchHandler call receives.
func WithMaxBatch(n int) ConsumeOption {
	return func(o *consumeOpts) { o.maxBatch = n }
}

// delivered is one decoded message waiting for the batch loop.
type delivered struct {
	msg jetstream.Msg
	ev  events.Event
	// gap says the consumer delivered to another client between the
	// previous message and this one (see WithGapHook).
	gap bool
}

// ConsumeBatch is Consume for handlers that work faster on many events at
// once: it runs handler on batches of the events already delivered (up to
// WithMaxBatch, at least one; a batch is whatever arrived while the last
// one was handled, so batches grow with the load and a lone event is
// handled at once). Events are decoded as they arrive, ahead of the
// handler, on the consumer's delivery goroutine.
//
// Acknowledgement: after the handler returns nil every event of the batch
// is acknowledged in order. While more events are queued, nobody waits
// for the server: the next batch is handled while the acknowledgements
// travel. When the batch leaves nothing queued (the consumer goes idle),
// the last acknowledgement is confirmed by the server: a round trip the
// idle consumer does not miss, during which the events still on their
// way arrive and are then handled as one batch (a request's facts are
// stored one after the other; acknowledging each at once made nearly
// every fact a batch of its own, and a batch's handling, flush and
// server wake-ups cost more than the round trip). With WithAckHook the
// last acknowledgement of every batch is confirmed, so the ack floor has
// moved when fn runs with the batch's last sequence. An acknowledgement
// lost on the way (a connection that breaks) gets its events redelivered
// after Config.AckWait, as a crash before the acknowledgement does: the
// handler must be idempotent in any case. After an error every event of
// the batch is negatively acknowledged in order, for redelivery after
// Config.NakDelay; events delivered after the batch are still handled
// meanwhile.
//
// Unlike Consume with MaxAckPending 1, delivery order is not a guarantee
// after a failure or a failover: a redelivered event can arrive after later
// ones. A handler must therefore be correct for any order of redelivery; the
// pipeline's workers rebuild a session from the log when in doubt (see
// pipeline.EligibilityWorker).
func (s *Store) ConsumeBatch(ctx context.Context, durable, filter string, handler BatchHandler, opts ...ConsumeOption) error {
	if handler == nil {
		return fmt.Errorf("consume %s: nil handler", durable)
	}
	cons, o, log, err := s.consumer(ctx, durable, filter, opts)
	if err != nil {
		return err
	}
	maxBatch := o.maxBatch
	if maxBatch <= 0 {
		maxBatch = DefaultMaxBatch
	}
	b := &batcher{
		s: s, log: log, o: o, handler: handler, maxBatch: maxBatch,
		// The server delivers at most maxAckPending unacknowledged
		// messages; redeliveries of slow ones can add as many again.
		in:   make(chan delivered, 2*o.maxAckPending+maxBatch),
		quit: make(chan struct{}),
		done: make(chan struct{}),
		gaps: gapDetector{log: log, onGap: o.onGap},
		held: map[jetstream.Msg]struct{}{},
	}
	go b.loop(ctx)
	go b.keepAlive(s.cfg.AckWait)
	return s.runConsumer(ctx, cons, durable, o, log, b.deliver, b.stop)
}

// batcher hands delivered messages from the consumer's callback to one
// loop that runs the handler on batches.
type batcher struct {
	s        *Store
	log      *slog.Logger
	o        consumeOpts
	handler  BatchHandler
	maxBatch int

	mu      sync.Mutex // guards stopped, held and sends on in
	stopped bool
	// held is every message delivered here and not yet settled: queued
	// or in the batch being handled (see keepAlive).
	held map[jetstream.Msg]struct{}
	in   chan delivered
	quit chan struct{} // closed by stop
	done chan struct{} // closed when loop returns
	gaps gapDetector   // used on the delivery goroutine only
}

// deliver is the consumer callback: decode, then queue for the loop.
func (b *batcher) deliver(msg jetstream.Msg) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		_ = msg.Nak()
		return
	}
	// The metadata is parsed from the reply subject: once per message.
	meta, err := msg.Metadata()
	if err != nil {
		b.log.Error("consume: message without metadata", slog.String("subject", msg.Subject()), slog.Any("err", err))
		_ = msg.Term()
		return
	}
	// The gap is acted on when the loop reaches this message, not now:
	// the messages delivered before it may still be queued, and handling
	// them rebuilds the state the gap makes stale.
	gap := b.gaps.jumped(meta.Sequence.Consumer)
	seq := meta.Sequence.Stream
	e, err := decodeMsg(msg.Subject(), seq, msg.Data())
	if err != nil {
		if b.o.onDecodeError != nil {
			b.o.onDecodeError(err)
		}
		b.log.Error("consume: undecodable event, not redelivered", slog.Uint64("seq", seq), slog.Any("err", err))
		if err := msg.Term(); err != nil {
			b.log.Warn("consume: term failed", slog.Uint64("seq", seq), slog.Any("err", err))
		}
		return
	}
	select {
	case b.in <- delivered{msg: msg, ev: e, gap: gap}:
		b.held[msg] = struct{}{}
	default:
		// Cannot happen with the buffer sized above; never block the
		// delivery goroutine: hand it back.
		b.log.Warn("consume: batch queue full, event handed back", slog.Uint64("seq", seq))
		_ = msg.NakWithDelay(b.s.cfg.NakDelay)
	}
}

// keepAlive tells the server, every third of the ack wait until stop,
// that the messages this client holds are in progress (JetStream's
// working acknowledgement, which restarts their ack wait): a batch that
// takes longer than the ack wait (a loaded machine, a slow wait for
// eligibility) must not be redelivered to another process while this one
// still works on it, or two workers judge the same facts at once. A
// client that dies stops telling, and its messages are redelivered after
// the ack wait as before.
func (b *batcher) keepAlive(ackWait time.Duration) {
	t := time.NewTicker(max(ackWait/3, 10*time.Millisecond))
	defer t.Stop()
	var msgs []jetstream.Msg
	for {
		select {
		case <-b.quit:
			return
		case <-t.C:
		}
		b.mu.Lock()
		msgs = msgs[:0]
		for m := range b.held {
			msgs = append(msgs, m)
		}
		b.mu.Unlock()
		for _, m := range msgs {
			// A message settled meanwhile answers an error or nothing.
			_ = m.InProgress()
		}
		clear(msgs)
	}
}

// release forgets settled messages (see keepAlive).
func (b *batcher) release(batch []delivered) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range batch {
		delete(b.held, d.msg)
	}
}

// stop makes deliver hand messages back, waits for the batch in progress
// and hands back whatever is still queued.
func (b *batcher) stop() {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	b.stopped = true
	b.mu.Unlock()
	close(b.quit)
	<-b.done
	for {
		select {
		case d := <-b.in:
			_ = d.msg.Nak()
		default:
			return
		}
	}
}

// loop runs the handler on batches until stop. A message that follows a
// gap in the consumer's deliveries starts a batch of its own, and the gap
// hook runs before that batch: after every message delivered before the
// gap was handled, before any message after it.
func (b *batcher) loop(ctx context.Context) {
	defer close(b.done)
	batch := make([]delivered, 0, b.maxBatch)
	evs := make([]events.Event, 0, b.maxBatch)
	var next *delivered // a message after a gap, opening the next batch
	for {
		batch, evs = batch[:0], evs[:0]
		if next != nil {
			batch = append(batch, *next)
			next = nil
		} else {
			select {
			case d := <-b.in:
				batch = append(batch, d)
			case <-b.quit:
				return
			}
		}
	fill:
		for len(batch) < b.maxBatch {
			select {
			case d := <-b.in:
				if d.gap {
					next = &d
					break fill
				}
				batch = append(batch, d)
			default:
				break fill
			}
		}
		if batch[0].gap {
			b.gaps.stale()
		}
		for _, d := range batch {
			evs = append(evs, d.ev)
		}
		b.settle(ctx, batch, runBatchHandler(ctx, b.handler, evs))
		// Do not keep the last batch's messages and events alive while
		// the consumer is idle.
		clear(batch)
		clear(evs)
	}
}

// settle acknowledges a handled batch, or hands it back after a failure.
func (b *batcher) settle(ctx context.Context, batch []delivered, err error) {
	defer b.release(batch)
	first, last := batch[0].ev, batch[len(batch)-1].ev
	if err != nil {
		b.log.Warn("consume: batch handler failed, will redeliver",
			slog.Int("events", len(batch)), slog.Uint64("first", first.Seq), slog.Uint64("last", last.Seq), slog.Any("err", err))
		for _, d := range batch {
			if err := d.msg.NakWithDelay(b.s.cfg.NakDelay); err != nil {
				b.log.Warn("consume: nak failed (redelivered after ack wait)", slog.Uint64("seq", d.ev.Seq), slog.Any("err", err))
			}
		}
		return
	}
	// Acknowledgements of one connection reach the consumer in order, so
	// confirming the last one confirms them all. Without an ack hook the
	// confirmation is only waited for when nothing else is queued (see
	// ConsumeBatch).
	confirm := b.o.onAcked != nil || len(b.in) == 0
	for i, d := range batch {
		if confirm && i == len(batch)-1 {
			break
		}
		if err := d.msg.Ack(); err != nil {
			b.log.Warn("consume: ack failed, event may be redelivered", slog.Uint64("seq", d.ev.Seq), slog.Any("err", err))
		}
	}
	if !confirm {
		return
	}
	if err := batch[len(batch)-1].msg.DoubleAck(ctx); err != nil {
		b.log.Warn("consume: ack not confirmed, events may be redelivered", slog.Uint64("seq", last.Seq), slog.Any("err", err))
		return
	}
	if b.o.onAcked != nil {
		b.o.onAcked(last.Seq)
	}
}

// runBatchHandler calls h, turning a panic into an error.
func runBatchHandler(ctx context.Context, h BatchHandler, evs []events.Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return h(ctx, evs)
}
