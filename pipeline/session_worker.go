package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
)

// sessionLog is what a partitioned session worker needs from the log.
type sessionLog interface {
	Append(ctx context.Context, evs []events.Event) ([]events.Event, error)
	ReadSession(ctx context.Context, tenant, session string) ([]events.Event, error)
	ConsumeBatch(ctx context.Context, durable, filter string, handler store.BatchHandler, opts ...store.ConsumeOption) error
	PartitionOf(tenant, session string) int
	AckFloor(ctx context.Context, durable string) (uint64, error)
	shapeLog
}

// sessionKind is what a kind of partitioned session worker (eligibility,
// scheduler) adds to sessionWorker: its per-session state S and what it
// does with a session's facts. The worker holds the partition's lock
// around every call.
type sessionKind[S any] interface {
	// open returns the empty state of session k; ctx is the batch's (the
	// state outlives it).
	open(ctx context.Context, k sessionKey) *S
	// rebuild feeds s the session's events read from the log, its facts
	// before stream sequence seq, and returns the outputs of those facts
	// missing from the log, to publish before any later one. An error
	// leaves s unusable.
	rebuild(s *S, evs []events.Event, seq uint64) ([]events.Event, error)
	// step feeds s the session's next fact and returns its outputs.
	step(ctx context.Context, part int, k sessionKey, s *S, ev events.Event) ([]events.Event, error)
	// stored records what the log now holds: the outputs stored (keys
	// names each one's session) and, for each session fed in the batch,
	// its last fact fed.
	stored(st *sessionTable[S], outs []events.Event, keys []sessionKey, fed map[sessionKey]uint64)
	// facts is how many facts s observed (its cost in the table).
	facts(s *S) int
	// fed is the last fact s observed: a fact at or before it (a
	// redelivery, or one the rebuild read) is not fed again.
	fed(s *S) uint64
	// done is the last fact whose work, and every earlier fact's, is
	// stored: waiters in this process ask it (see doneThrough).
	done(s *S) uint64
}

// sessionWorker is a partitioned session worker: one durable consumer
// per partition p (DurableName(name, p), filter ps.*.*.fact.<p>) feeds
// each fact to its session's state and publishes the outputs of a whole
// batch with one Append, before the facts are acknowledged.
//
// The state of a session is rebuilt from the log the first time the
// worker sees the session, after a failure, after the partition's
// deliveries went to another process and after an eviction; the rebuild
// publishes first the outputs of earlier facts missing from the log (a
// crashed worker computed them but did not store them, or never got to
// them). So the outputs do not depend on which worker ran where, nor on
// the order facts were redelivered in.
type sessionWorker[S any] struct {
	// name is the worker kind: its durable consumers' prefix
	// (DurableEligibility, DurableScheduler), its metrics' label and its
	// logs' prefix.
	name string
	// outputs and inputs name what it publishes and what from, for logs
	// and errors ("marks" of "facts").
	outputs, inputs string
	kind            sessionKind[S]
	log             sessionLog
	logger          *slog.Logger
	met             *Metrics
	parts           partitioning
	state           partitionTables[S]
	// upstream, when set, blocks until another worker's work on a session
	// through a fact is stored; a rebuild waits for it before it reads the
	// log.
	upstream func(ctx context.Context, part int, k sessionKey, seq uint64) error
}

// batch is one delivery of partition part's facts.
type batch[S any] struct {
	part int
	st   *sessionTable[S]
	evs  []events.Event
}

// batchHandler handles one batch.
type batchHandler[S any] func(ctx context.Context, b batch[S]) error

// batchMiddleware wraps a batchHandler with a concern of its own, in the
// style of Watermill's HandlerMiddleware (func(h HandlerFunc)
// HandlerFunc).
type batchMiddleware[S any] func(h batchHandler[S]) batchHandler[S]

// chain wraps h in mw, the first outermost.
func chain[S any](h batchHandler[S], mw ...batchMiddleware[S]) batchHandler[S] {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// withLatency observes the time a batch takes in the worker's processing
// latency histogram.
func withLatency[S any](met *Metrics, worker string) batchMiddleware[S] {
	return func(h batchHandler[S]) batchHandler[S] {
		return func(ctx context.Context, b batch[S]) error {
			done := met.observeLatency(worker)
			defer done()
			return h(ctx, b)
		}
	}
}

// withLock holds the partition's lock around the batch: readers (waits,
// the other worker, live decisions) see the state between batches only.
func withLock[S any]() batchMiddleware[S] {
	return func(h batchHandler[S]) batchHandler[S] {
		return func(ctx context.Context, b batch[S]) error {
			b.st.mu.Lock()
			defer b.st.mu.Unlock()
			return h(ctx, b)
		}
	}
}

// withResetOnFailure forgets every session of the partition when a batch
// fails: the states may be ahead of the log (they fed facts whose outputs
// were not stored), and the facts come back, maybe out of order. Each
// session is rebuilt from the log at its next fact. The caller holds the
// partition's lock.
func withResetOnFailure[S any]() batchMiddleware[S] {
	return func(h batchHandler[S]) batchHandler[S] {
		return func(ctx context.Context, b batch[S]) error {
			err := h(ctx, b)
			if err != nil {
				b.st.clearLocked()
			}
			return err
		}
	}
}

// withValidationErrors counts a batch that failed because an event failed
// validation (events.FieldError) in the validation-error metric.
func withValidationErrors[S any](met *Metrics, component string) batchMiddleware[S] {
	return func(h batchHandler[S]) batchHandler[S] {
		return func(ctx context.Context, b batch[S]) error {
			err := h(ctx, b)
			if err != nil {
				met.validationErrorOf(component, err)
			}
			return err
		}
	}
}

// run consumes the worker's partitions until ctx ends, one durable
// consumer per partition, each feeding its batches to feed's feed of the
// partition.
func (w *sessionWorker[S]) run(ctx context.Context, feed func(ctx context.Context, p int) partitionFeed) error {
	if len(w.parts.owned) == 0 {
		return fmt.Errorf("%s worker: no partitions to consume", w.name)
	}
	return runPartitions(ctx, w.parts.owned, func(ctx context.Context, p int) error {
		return w.consume(ctx, p, feed(ctx, p))
	})
}

// consume runs partition p's own durable consumer (DurableName(w.name,
// p)) until ctx ends, feeding its batches to f. A partition whose shape
// is the shared consumer (DurableName(DurableJudge, p), claimed by a
// process running both kinds) is refused: both consumers would judge
// every fact.
func (w *sessionWorker[S]) consume(ctx context.Context, p int, f partitionFeed) error {
	shape, err := claimPartitionShape(ctx, w.log, p, shapeOwn)
	if err != nil {
		return fmt.Errorf("%s worker: %w", w.name, err)
	}
	if shape != shapeOwn {
		return fmt.Errorf("%s worker: partition %d: %w", w.name, p, errSharedDurable)
	}
	return w.consumeOwn(ctx, p, f)
}

// consumeOwn is consume on a partition whose shape is each kind's own
// durable (the caller claimed it).
func (w *sessionWorker[S]) consumeOwn(ctx context.Context, p int, f partitionFeed) error {
	durable := DurableName(w.name, p)
	return w.log.ConsumeBatch(ctx, durable, events.PartitionFilter(events.KindFact, p), f.handle,
		w.parts.consumeOptions(w.met, w.name, durable, f.dropped)...)
}

// errSharedDurable refuses a worker of one kind on a partition whose
// shape is the shared durable of a process running the eligibility and
// scheduler workers together.
var errSharedDurable = errors.New("its facts go to the shared durable consumer of a process running the eligibility and scheduler workers together (" + DurableJudge + "-pN, claimed in key-value bucket " + store.ShapesBucket + "): run both workers in one process there, or stop that process and delete both the consumer and the partition's key (nats kv del " + store.ShapesBucket + " pN)")

// partitionFeed is one worker's part of a partition's consumer: what it
// does with a batch of the partition's facts, and what when the
// partition's deliveries went to another process in between.
type partitionFeed struct {
	handle  store.BatchHandler
	dropped func()
}

// feeder returns what builds the worker's feed of a partition: start,
// when set, runs when the partition's consumer starts; stale, when set,
// after the partition's sessions were dropped because its deliveries
// went to another process in between; mw wrap every batch outside the
// worker's own middleware (latency, lock, reset on failure, validation
// errors).
func (w *sessionWorker[S]) feeder(start func(ctx context.Context, p int, st *sessionTable[S]), stale func(p int), mw ...batchMiddleware[S]) func(ctx context.Context, p int) partitionFeed {
	h := w.handler(mw...)
	return func(ctx context.Context, p int) partitionFeed {
		st := w.partition(p)
		if start != nil {
			start(ctx, p, st)
		}
		return partitionFeed{
			handle: func(ctx context.Context, evs []events.Event) error {
				return h(ctx, batch[S]{part: p, st: st, evs: evs})
			},
			dropped: func() {
				st.drop()
				if stale != nil {
					stale(p)
				}
			},
		}
	}
}

// handler is handle in the worker's middleware (latency, lock, reset on
// failure, validation errors), inside mw.
func (w *sessionWorker[S]) handler(mw ...batchMiddleware[S]) batchHandler[S] {
	return chain(w.handle, append(mw,
		withLatency[S](w.met, w.name),
		withLock[S](),
		withResetOnFailure[S](),
		withValidationErrors[S](w.met, w.name))...)
}

// handle feeds a batch's facts to their sessions and stores their outputs
// with one Append. The caller holds the partition's lock.
func (w *sessionWorker[S]) handle(ctx context.Context, b batch[S]) error {
	var outs []events.Event
	var keys []sessionKey // the session of each output
	fed := map[sessionKey]uint64{}
	for _, ev := range b.evs {
		k := keyOf(ev)
		if b.st.skipsAheadLocked(k, ev.Seq) {
			// The session was rebuilt at an earlier fact (a redelivery)
			// while later facts were in the log; one of those comes
			// before ev and was not fed: it was handled before the
			// rebuild and will not be delivered again. Rebuild at ev.
			b.st.forgetLocked(k)
		}
		s, repair, err := w.session(ctx, b.part, b.st, k, ev.Seq, ev.Seq)
		if err != nil {
			return err
		}
		outs = append(outs, repair...)
		for range repair {
			keys = append(keys, k)
		}
		if ev.Seq != 0 && ev.Seq <= w.kind.fed(s) {
			continue // already seen: during the rebuild, or redelivered
		}
		out, err := w.kind.step(ctx, b.part, k, s, ev)
		if err != nil {
			return err
		}
		outs = append(outs, out...)
		for range out {
			keys = append(keys, k)
		}
		fed[k] = ev.Seq
	}
	stored, err := w.publish(ctx, outs)
	if err != nil {
		return err
	}
	w.kind.stored(b.st, stored, keys, fed)
	b.st.advanceLocked(b.evs)
	b.st.evictLocked()
	w.parts.prog.notify()
	return nil
}

// publish stores outputs, in order, with one Append.
func (w *sessionWorker[S]) publish(ctx context.Context, outs []events.Event) ([]events.Event, error) {
	if len(outs) == 0 {
		return nil, nil
	}
	stored, err := w.log.Append(ctx, outs)
	if err != nil {
		return nil, fmt.Errorf("publish %d %s: %w", len(outs), w.outputs, err)
	}
	return stored, nil
}

// session returns the held state of session k, or rebuilds it from the
// log (the facts before stream sequence seq; none when seq is 0) with the
// outputs of those facts missing from the log, to publish first. Before
// reading the log it waits for the upstream work on the session through
// through (0: no wait). The caller holds st.mu.
func (w *sessionWorker[S]) session(ctx context.Context, part int, st *sessionTable[S], k sessionKey, seq, through uint64) (*S, []events.Event, error) {
	if s, ok := st.sessions[k]; ok {
		st.touchLocked(k, 1)
		return s, nil, nil
	}
	s := w.kind.open(ctx, k)
	var repair []events.Event
	if seq > 0 {
		if through > 0 && w.upstream != nil {
			if err := w.upstream(ctx, part, k, through); err != nil {
				return nil, nil, err
			}
		}
		evs, err := w.log.ReadSession(ctx, k.tenant, k.session)
		if err != nil {
			return nil, nil, fmt.Errorf("rebuild %s for %s/%s: %w", w.name, k.tenant, k.session, err)
		}
		if repair, err = w.kind.rebuild(s, evs, seq); err != nil {
			return nil, nil, fmt.Errorf("rebuild %s for %s/%s: %w", w.name, k.tenant, k.session, err)
		}
		var ahead []uint64
		for _, e := range evs {
			if e.IsFact() && e.Seq > seq {
				ahead = append(ahead, e.Seq)
			}
		}
		if len(ahead) > 0 && seq != ^uint64(0) {
			if st.ahead == nil {
				st.ahead = map[sessionKey][]uint64{}
			}
			st.ahead[k] = ahead
		}
		if len(repair) > 0 {
			w.logger.Info(w.name+": publishing "+w.outputs+" of earlier "+w.inputs+" missing from the log",
				"tenant", k.tenant, "session", k.session, w.outputs, len(repair), "before_seq", seq)
		}
	}
	st.sessions[k] = s
	st.touchLocked(k, 1+w.kind.facts(s))
	return s, repair, nil
}

// partition returns partition p's sessions.
func (w *sessionWorker[S]) partition(p int) *sessionTable[S] { return w.state.get(p) }

// doneThrough reports whether this process's worker has stored the work
// of every fact of session k up to stream sequence seq (a fact of the
// session); known is false when it holds nothing of the session (another
// process may have done it).
func (w *sessionWorker[S]) doneThrough(k sessionKey, seq uint64) (done, known bool) {
	st := w.partition(w.log.PartitionOf(k.tenant, k.session))
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.sessions[k]
	if !ok {
		if st.handledUpTo(seq) {
			return true, true // done, then forgotten
		}
		return false, false
	}
	return w.kind.done(s) >= seq, true
}

// wait blocks until the work of every fact of session k up to stream
// sequence seq is stored: this process's worker says so, or the
// partition's consumer (in whichever process) acknowledged every fact of
// the partition up to seq.
func (w *sessionWorker[S]) wait(ctx context.Context, part int, k sessionKey, seq uint64) error {
	local := func() (bool, bool) { return w.doneThrough(k, seq) }
	return waitFloor(ctx, w.log, w.parts.prog, w.name, part, seq, local)
}

// evictIdle forgets the sessions no fact or reader used since the
// previous call and returns how many (see sessionTable.evictIdle).
func (w *sessionWorker[S]) evictIdle() int { return w.state.evictIdle() }
