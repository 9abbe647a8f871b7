package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/jsask"
)

// Handler processes one event delivered to a worker. Returning an error asks
// for redelivery after Config.NakDelay.
type Handler func(ctx context.Context, e events.Event) error

// ConsumeOption adjusts one Consume call.
type ConsumeOption func(*consumeOpts)

type consumeOpts struct {
	group         string
	pinnedTTL     time.Duration
	maxAckPending int
	onDecodeError func(error)
	onAcked       func(seq uint64)
	onGap         func()
	maxBatch      int
}

// WithGapHook calls fn before an event is handled when the consumer's
// delivery sequence jumped since the last event this Consume handled: the
// consumer delivered events to another client in between (a pinned
// priority group moved away and back). Whatever the caller cached from the
// events it saw is then stale and must be rebuilt from the log.
func WithGapHook(fn func()) ConsumeOption {
	return func(o *consumeOpts) { o.onGap = fn }
}

// WithPinnedGroup makes the durable a pinned-client priority-group consumer
// (nats-server 2.11+): the server delivers to one pulling client at a time,
// and when that client stops pulling for ttl it pins another one waiting on
// the same group. Several processes running the same Consume then share no
// work but stand by for each other: the failover for a partition's worker.
func WithPinnedGroup(group string, ttl time.Duration) ConsumeOption {
	return func(o *consumeOpts) { o.group, o.pinnedTTL = group, ttl }
}

// WithMaxAckPending overrides Config.MaxAckPending for this consumer. 1
// makes delivery strictly ordered: a message is redelivered (after a
// failure or a crash, once AckWait passes) before any later one.
func WithMaxAckPending(n int) ConsumeOption {
	return func(o *consumeOpts) { o.maxAckPending = n }
}

// WithDecodeErrorHook calls fn for every event that cannot be decoded (it
// is terminated, never redelivered), e.g. to count it.
func WithDecodeErrorHook(fn func(error)) ConsumeOption {
	return func(o *consumeOpts) { o.onDecodeError = fn }
}

// WithAckHook calls fn with an event's stream sequence once the server has
// confirmed its acknowledgement (after the handler succeeded), so a process
// can learn that its own consumer moved without asking the server. With
// MaxAckPending 1 the consumer's ack floor has then reached seq. fn runs on
// the consumer's goroutine and must not block.
//
// The confirmation costs a round trip to the server per acknowledged batch
// (per event with Consume), which the consumer waits for before its next
// batch; without fn, ConsumeBatch waits for it only when it goes idle
// (see ConsumeBatch). Give a hook only to a consumer whose ack floor
// someone waits on.
func WithAckHook(fn func(seq uint64)) ConsumeOption {
	return func(o *consumeOpts) { o.onAcked = fn }
}

// storedFilter turns a filter in the publish layout
// (ps.<tenant>.<session>.<kind>, wildcards allowed) into the stored layout by
// matching every partition; other filters are used as given.
func storedFilter(filter string) string {
	if strings.Count(filter, ".") == 3 && !strings.HasSuffix(filter, ">") {
		return filter + ".*"
	}
	return filter
}

// pullExpiry bounds one pull request of Consume; its heartbeat is half of it.
const pullExpiry = 5 * time.Second

// Consume runs handler for every event on subjects matching filter (empty:
// all, "ps.>"), through the durable pull consumer named durable, created or
// updated here (explicit ack, Config.AckWait, Config.MaxAckPending). The
// durable remembers progress across restarts: a worker resumes after its
// last acknowledged event. A filter in the publish layout
// (ps.<tenant>.<session>.<kind>) matches the events of every partition.
//
// Handler calls are sequential. Success acknowledges the event and waits for
// the server to confirm (so AckFloor moves); an error (or a panic) is logged
// and the event is redelivered after Config.NakDelay, possibly after later
// events unless MaxAckPending is 1. An event that cannot be decoded is
// logged and terminated (never redelivered): retrying cannot fix it.
//
// Consume returns nil when ctx ends, after the handler in progress returns;
// it returns an error if the consumer cannot be set up or stops on its own.
func (s *Store) Consume(ctx context.Context, durable, filter string, handler Handler, opts ...ConsumeOption) error {
	if handler == nil {
		return fmt.Errorf("consume %s: nil handler", durable)
	}
	cons, o, log, err := s.consumer(ctx, durable, filter, opts)
	if err != nil {
		return err
	}

	// handling is held while a handler runs, so stopping can wait for it;
	// messages still buffered after the stop are handed back at once.
	var (
		handling sync.Mutex
		stopped  bool
		gaps     = gapDetector{log: log, onGap: o.onGap}
	)
	cb := func(msg jetstream.Msg) {
		handling.Lock()
		defer handling.Unlock()
		if stopped {
			_ = msg.Nak()
			return
		}
		gaps.see(msg)
		s.handle(ctx, log, msg, handler, o.onDecodeError, o.onAcked)
	}
	stop := func() {
		handling.Lock()
		stopped = true
		handling.Unlock()
	}
	return s.runConsumer(ctx, cons, durable, o, log, cb, stop)
}

// consumer validates a Consume call and creates or updates its durable.
func (s *Store) consumer(ctx context.Context, durable, filter string, opts []ConsumeOption) (jetstream.Consumer, consumeOpts, *slog.Logger, error) {
	if err := validDurable(durable); err != nil {
		return nil, consumeOpts{}, nil, fmt.Errorf("consume: %w", err)
	}
	o := consumeOpts{maxAckPending: s.cfg.MaxAckPending}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxAckPending < 1 {
		return nil, o, nil, fmt.Errorf("consume %s: max ack pending %d, want at least 1", durable, o.maxAckPending)
	}
	if filter == "" {
		filter = events.SubjectPrefix + ".>"
	}
	filter = storedFilter(filter)
	if !strings.HasPrefix(filter, events.SubjectPrefix+".") {
		return nil, o, nil, fmt.Errorf("consume %s: filter %q is outside %s.>", durable, filter, events.SubjectPrefix)
	}
	ccfg := jetstream.ConsumerConfig{
		Durable:       durable,
		Description:   "prunesched worker",
		FilterSubject: filter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.cfg.AckWait,
		MaxAckPending: o.maxAckPending,
	}
	if o.group != "" {
		ccfg.PriorityPolicy = jetstream.PriorityPolicyPinned
		ccfg.PriorityGroups = []string{o.group}
		ccfg.PinnedTTL = o.pinnedTTL
	}
	cons, err := s.js.CreateOrUpdateConsumer(ctx, events.StreamName, ccfg)
	if err != nil {
		return nil, o, nil, fmt.Errorf("consume %s: create or update consumer: %w", durable, err)
	}
	return cons, o, s.log.With(slog.String("consumer", durable), slog.String("filter", filter)), nil
}

// pullExpiryFor is the expiry of Consume's pull requests: pullExpiry, or
// with a pinned priority group a third of the pinned TTL (at least the
// client library's minimum of 1 s). The server keeps a client pinned
// only while it sends new pull requests within the TTL (a request
// waiting does not count): with pulls that outlive the TTL, an idle or
// busy live worker lost its pin every TTL, and a worker still handling
// a batch saw the next facts of its sessions go to another process.
func pullExpiryFor(o consumeOpts) time.Duration {
	if o.group == "" || o.pinnedTTL <= 0 {
		return pullExpiry
	}
	return min(pullExpiry, max(o.pinnedTTL/3, time.Second))
}

// runConsumer pulls from cons into cb until ctx ends or the consumer stops
// on its own; stop is called before it returns, after the pulls ended.
func (s *Store) runConsumer(ctx context.Context, cons jetstream.Consumer, durable string, o consumeOpts, log *slog.Logger, cb func(jetstream.Msg), stop func()) error {
	popts := []jetstream.PullConsumeOpt{
		jetstream.PullMaxBytes(s.cfg.ReadBufferBytes),
		// Short pulls: a pull that fails (no responders while a clustered
		// consumer elects its leader, a server going away) is only retried
		// after a missed heartbeat, half the expiry. With the library's 30 s
		// default a partition could stall for 30 s after a failover.
		jetstream.PullExpiry(pullExpiryFor(o)),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, jetstream.ErrPinIDMismatch) {
				log.Debug("consume: another client holds the pin (standing by)")
				return
			}
			log.Warn("consume: pull error (retrying)", slog.Any("err", err))
		}),
	}
	if o.group != "" {
		popts = append(popts, jetstream.PullPriorityGroup(o.group))
	}
	cc, err := cons.Consume(cb, popts...)
	if err != nil {
		stop()
		return fmt.Errorf("consume %s: start: %w", durable, err)
	}
	log.Debug("consume: started")
	select {
	case <-ctx.Done():
		cc.Stop()
		stop()
		<-cc.Closed()
		log.Debug("consume: stopped")
		return nil
	case <-cc.Closed():
		stop()
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("consume %s: consumer stopped", durable)
	}
}

// gapDetector calls onGap when a consumer's delivery sequence jumps between
// two messages this client handled (see WithGapHook).
type gapDetector struct {
	log   *slog.Logger
	onGap func()
	last  uint64 // consumer (delivery) sequence of the last message seen
}

func (g *gapDetector) see(msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		return
	}
	g.seeDelivery(meta.Sequence.Consumer)
}

// seeDelivery is see for a message whose delivery sequence d the caller
// has parsed already.
func (g *gapDetector) seeDelivery(d uint64) {
	if g.jumped(d) {
		g.stale()
	}
}

// jumped records delivery sequence d and reports whether it jumped since
// the last one seen: the consumer delivered to another client in between.
func (g *gapDetector) jumped(d uint64) bool {
	last := g.last
	g.last = d
	if last != 0 && d != last+1 {
		g.log.Info("consume: deliveries went to another client; dropping cached state",
			slog.Uint64("last", last), slog.Uint64("now", d))
		return true
	}
	return false
}

// stale calls the gap hook, if any.
func (g *gapDetector) stale() {
	if g.onGap != nil {
		g.onGap()
	}
}

// handle runs the handler for one message and settles it.
func (s *Store) handle(ctx context.Context, log *slog.Logger, msg jetstream.Msg, handler Handler, onDecodeError func(error), onAcked func(uint64)) {
	meta, err := msg.Metadata()
	if err != nil {
		log.Error("consume: message without metadata", slog.String("subject", msg.Subject()), slog.Any("err", err))
		_ = msg.Term()
		return
	}
	seq := meta.Sequence.Stream
	e, err := decodeMsg(msg.Subject(), seq, msg.Data())
	if err != nil {
		if onDecodeError != nil {
			onDecodeError(err)
		}
		log.Error("consume: undecodable event, not redelivered", slog.Uint64("seq", seq), slog.Any("err", err))
		if err := msg.Term(); err != nil {
			log.Warn("consume: term failed", slog.Uint64("seq", seq), slog.Any("err", err))
		}
		return
	}
	if err := runHandler(ctx, handler, e); err != nil {
		log.Warn("consume: handler failed, will redeliver",
			slog.Uint64("seq", seq), slog.String("event", e.ID),
			slog.Uint64("delivered", meta.NumDelivered), slog.Any("err", err))
		if err := msg.NakWithDelay(s.cfg.NakDelay); err != nil {
			log.Warn("consume: nak failed (redelivered after ack wait)", slog.Uint64("seq", seq), slog.Any("err", err))
		}
		return
	}
	if err := msg.DoubleAck(ctx); err != nil {
		log.Warn("consume: ack not confirmed, event may be redelivered", slog.Uint64("seq", seq), slog.Any("err", err))
		return
	}
	if onAcked != nil {
		onAcked(seq)
	}
}

// runHandler calls h, turning a panic into an error so one bad event cannot
// kill the worker.
func runHandler(ctx context.Context, h Handler, e events.Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return h(ctx, e)
}

// AckFloor returns the stream sequence below which the durable consumer has
// acknowledged every event it was delivered (consumer info AckFloor.Stream),
// so one worker can wait until another has processed up to a sequence. For a
// filtered consumer compare it with a sequence the filter matches.
// A missing consumer is an error wrapping ErrNotFound.
func (s *Store) AckFloor(ctx context.Context, durable string) (uint64, error) {
	if err := validDurable(durable); err != nil {
		return 0, fmt.Errorf("ack floor: %w", err)
	}
	info, err := s.consumerInfo(ctx, durable)
	if err != nil {
		return 0, fmt.Errorf("ack floor: %w", err)
	}
	return info.AckFloor.Stream, nil
}

// ProcessedThrough reports whether the durable consumer has processed every
// event it will ever be given with a stream sequence up to seq. Unlike
// AckFloor >= seq, it also answers true when seq is an event outside the
// consumer's filter (a filtered consumer's floor stays at the last event it
// matched): it checks that seq is stored and that the consumer then had
// nothing pending and nothing unacknowledged.
func (s *Store) ProcessedThrough(ctx context.Context, durable string, seq uint64) (bool, error) {
	if err := validDurable(durable); err != nil {
		return false, fmt.Errorf("processed through: %w", err)
	}
	// Read the stream's end before the consumer's state: a consumer state
	// read later covers every event stored by then.
	last, err := s.StreamLastSeq(ctx)
	if err != nil {
		return false, fmt.Errorf("processed through: %w", err)
	}
	info, err := s.consumerInfo(ctx, durable)
	if err != nil {
		return false, fmt.Errorf("processed through: %w", err)
	}
	if info.AckFloor.Stream >= seq {
		return true, nil
	}
	return seq <= last && info.NumPending == 0 && info.NumAckPending == 0, nil
}

// ConsumerLag returns what a durable consumer still has to do: messages
// matching its filter not yet delivered plus those delivered and not yet
// acknowledged (NumPending + NumAckPending). A missing consumer is an error
// wrapping ErrNotFound.
func (s *Store) ConsumerLag(ctx context.Context, durable string) (uint64, error) {
	if err := validDurable(durable); err != nil {
		return 0, fmt.Errorf("consumer lag: %w", err)
	}
	info, err := s.consumerInfo(ctx, durable)
	if err != nil {
		return 0, fmt.Errorf("consumer lag: %w", err)
	}
	return info.NumPending + uint64(info.NumAckPending), nil
}

// consumerInfo is a durable consumer's state as the server has it now:
// the look-up of the consumer fetches its info, so it is one request to
// the server (a second Info would double the server's work and the wait,
// and the pipeline's waits poll it), sent again every
// Config.RequestAgain while unanswered (jsask.Ask: the consumer's leader
// answers it, and none does while its group elects one). A missing
// consumer is an error wrapping ErrNotFound.
func (s *Store) consumerInfo(ctx context.Context, durable string) (*jetstream.ConsumerInfo, error) {
	cons, err := jsask.Ask(ctx, s.cfg.RequestAgain, func(ctx context.Context) (jetstream.Consumer, error) {
		return s.js.Consumer(ctx, events.StreamName, durable)
	})
	if err != nil {
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, fmt.Errorf("consumer %s: %w", durable, ErrNotFound)
		}
		return nil, fmt.Errorf("consumer %s: %w", durable, err)
	}
	info := cons.CachedInfo()
	if info == nil {
		return nil, fmt.Errorf("consumer %s: no info", durable)
	}
	return info, nil
}

func validDurable(name string) error {
	if name == "" {
		return errors.New("durable name missing")
	}
	if strings.ContainsAny(name, ".*> \t\r\n/\\") {
		return fmt.Errorf("durable name %q: must not contain '.', '*', '>', '/', '\\' or whitespace", name)
	}
	return nil
}
