package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/internal/lru"
	"github.com/prunesched/prunesched/projections"
)

// ProjectionWorker tails the whole stream with an ordered consumer and keeps
// one projection per session in memory. On start it rebuilds every
// projection from the first message: projections hold nothing the log does
// not.
//
// With eviction set (SetEviction), the sessions' estimated memory is kept
// under a byte budget: past it, the least recently used sessions (applied
// to or viewed) are dropped, and an evicted session is rebuilt from the
// log when it is next viewed. Events of an evicted session are not applied
// while it is evicted: they are in the log, which the rebuild reads.
type ProjectionWorker struct {
	js     jetstream.JetStream
	logger *slog.Logger
	// budget bounds the rendered fragments all sessions cache.
	budget *projections.RenderBudget
	met    *Metrics

	mu       sync.RWMutex
	sessions map[sessionKey]*projEntry
	seq      uint64 // last stream sequence applied
	errs     int    // undecodable messages skipped
	started  bool
	// waiters are the WaitSeq calls waiting for a sequence not applied
	// yet; each is woken once, when it is.
	waiters []seqWaiter

	// Eviction (SetEviction); reader nil: never evict.
	reader   SessionReader
	maxBytes int64
	bytes    int64 // estimated bytes of the sessions held
	// lruMu guards order (views move entries under the read lock of mu).
	lruMu sync.Mutex
	order *lru.Cache[sessionKey, *projEntry] // the sessions held, in order of use; no bound of its own
	// evicted holds the sessions dropped from memory; rebuilding the
	// events applied to a session while it is being rebuilt.
	evicted    map[sessionKey]struct{}
	rebuilding map[sessionKey]*rebuild
	evictions  uint64
	// gen counts idle sweeps (EvictIdle); an entry used since the last
	// sweep carries the current one (under lruMu).
	gen uint64
	// last is the session the previous event was applied to, nil after
	// an eviction: events come in runs of one session (each writer
	// appends a batch), so most find their session here without the
	// look-ups. When set, it is held (in sessions, so neither evicted
	// nor being rebuilt).
	last *projEntry
}

// projEntry is one session held in memory.
type projEntry struct {
	key sessionKey
	s   *projections.Session
	// events is the encoded size of the events applied, the basis of the
	// memory estimate.
	events int64
	bytes  int64 // estimate counted in ProjectionWorker.bytes
	// gen is ProjectionWorker.gen at the last use (under lruMu).
	gen uint64
}

// rebuild is one session being rebuilt from the log: the events the
// worker applied meanwhile, and who waits for the result.
type rebuild struct {
	events []events.Event
	done   chan struct{}
	err    error
}

// SessionReader reads one session's events from the log, in stream order
// with Seq set (store.Store does).
type SessionReader interface {
	ReadSession(ctx context.Context, tenant, session string) ([]events.Event, error)
}

// DefaultProjectionBytes is the projection's default memory budget
// (estimated, see SetEviction): 128 MiB, about 250,000 small events'
// sessions.
const DefaultProjectionBytes = 128 << 20

// Memory estimate of a projected session: sessionOverhead plus
// eventBytesFactor times the encoded size of its events, plus its cached
// renderings. Measured: a projected session holds about 2.5 times its
// encoded events (ids, maps, items, marks) beside the render cache.
const (
	sessionOverhead  = 4 << 10
	eventBytesFactor = 5 / 2.0
)

// rebuildTimeout bounds reading an evicted session back from the log for
// View (which has no context of its own).
const rebuildTimeout = 30 * time.Second

// NewProjectionWorker returns a projection over the stream reached by js.
func NewProjectionWorker(js jetstream.JetStream, logger *slog.Logger, met *Metrics) *ProjectionWorker {
	w := &ProjectionWorker{js: js, logger: logger, met: met, sessions: map[sessionKey]*projEntry{},
		budget:  projections.NewRenderBudget(projections.DefaultRenderCacheSessionBytes, projections.DefaultRenderCacheTotalBytes),
		order:   lru.New[sessionKey, *projEntry](0),
		evicted: map[sessionKey]struct{}{}, rebuilding: map[sessionKey]*rebuild{}}
	return w
}

// SetEviction bounds the sessions held in memory to about maxBytes
// (estimated); evicted sessions are read back through r when viewed.
// Call it before Run. maxBytes <= 0 or r nil: never evict.
func (w *ProjectionWorker) SetEviction(r SessionReader, maxBytes int64) {
	if maxBytes <= 0 {
		r = nil
	}
	w.reader, w.maxBytes = r, maxBytes
}

// Memory reports the projection's estimated bytes, the sessions held and
// evicted, and how many evictions happened.
func (w *ProjectionWorker) Memory() (bytes int64, held, evicted int, evictions uint64) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.bytes, len(w.sessions), len(w.evicted), w.evictions
}

// Run tails the stream until ctx ends.
//
// Receiving, decoding and applying run in stages so that they overlap: the
// consumer's callback only queues each message; a decoder takes whatever
// is queued as one batch and decodes it (in parallel when it is large); an
// applier applies the batches in stream order. Seq advances only as
// messages are applied, in order.
func (w *ProjectionWorker) Run(ctx context.Context) error {
	// No filter: the stream's only subjects are ps.> (store.StreamConfig;
	// store.Open makes them so), and a filter, even one equal to them,
	// costs the server a subject match for every message.
	cons, err := w.js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("projection: create ordered consumer: %w", err)
	}
	q := newProjQueue(projQueueMax)
	decoded := make(chan []projMsg, 4)
	var batches sync.Pool // decoded batches, recycled once applied
	var stages sync.WaitGroup
	stages.Go(func() {
		defer close(decoded)
		// One decoder per goroutine of decodeBatch, kept from batch to
		// batch: each shares repeated strings across the events it
		// decodes (events.Decoder).
		decs := make([]events.Decoder, runtime.GOMAXPROCS(0))
		for {
			raw := q.take()
			if raw == nil {
				return
			}
			batch := decodeBatch(raw, &batches, decs)
			q.recycle(raw)
			decoded <- batch
		}
	})
	stages.Go(func() {
		for batch := range decoded {
			w.apply(batch)
			clear(batch)
			batches.Put(&batch)
		}
	})
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		seq, err := store.StreamSeq(msg)
		if err != nil {
			w.logger.Error("projection: message without metadata", "err", err)
			return
		}
		q.push(projRaw{seq: seq, subject: msg.Subject(), data: msg.Data()})
	})
	if err != nil {
		q.close()
		stages.Wait()
		return fmt.Errorf("projection: consume: %w", err)
	}
	w.mu.Lock()
	w.started = true
	w.mu.Unlock()
	<-ctx.Done()
	// Closing the queue first releases a callback waiting for room.
	q.close()
	cc.Stop()
	stages.Wait()
	return nil
}

const (
	// projQueueMax bounds the messages received but not yet decoded (and
	// so one decode batch).
	projQueueMax = 1024
	// projApplyChunk is how many messages are applied per hold of the
	// write lock (readers get a turn in between).
	projApplyChunk = 64
	// projParallelMin is the batch size from which decoding is split
	// across goroutines.
	projParallelMin = 64
)

// projRaw is one stream message as received.
type projRaw struct {
	seq     uint64
	subject string
	data    []byte
}

// projMsg is one stream message decoded.
type projMsg struct {
	seq     uint64
	subject string
	ev      events.Event
	err     error
	size    int // encoded bytes
}

// decodeBatch decodes every message of raw, splitting a large batch
// across up to len(decs) goroutines, the k-th decoding with decs[k].
// pool recycles decoded batches once applied.
func decodeBatch(raw []projRaw, pool *sync.Pool, decs []events.Decoder) []projMsg {
	var out []projMsg
	if p, ok := pool.Get().(*[]projMsg); ok && cap(*p) >= len(raw) {
		out = (*p)[:len(raw)]
	} else {
		out = make([]projMsg, len(raw), max(len(raw), 64))
	}
	n := min(len(decs), len(raw)/(projParallelMin/2))
	if n <= 1 {
		decodeMsgs(&decs[0], raw, out)
		return out
	}
	var wg sync.WaitGroup
	per := (len(raw) + n - 1) / n
	for k, lo := 1, per; lo < len(raw); k, lo = k+1, lo+per {
		hi := min(lo+per, len(raw))
		wg.Go(func() { decodeMsgs(&decs[k], raw[lo:hi], out[lo:hi]) })
	}
	decodeMsgs(&decs[0], raw[:per], out[:per])
	wg.Wait()
	return out
}

func decodeMsgs(d *events.Decoder, raw []projRaw, out []projMsg) {
	for i, r := range raw {
		ev, err := d.Decode(r.data)
		out[i] = projMsg{seq: r.seq, subject: r.subject, ev: ev, err: err, size: len(r.data)}
	}
}

// apply applies a decoded batch in order.
func (w *ProjectionWorker) apply(batch []projMsg) {
	for len(batch) > 0 {
		n := min(len(batch), projApplyChunk)
		w.mu.Lock()
		for i := range batch[:n] {
			m := &batch[i]
			if m.err != nil {
				w.errs++
				w.met.decodeError("projection")
				w.logger.Error("projection: undecodable event skipped", "seq", m.seq, "subject", m.subject, "err", m.err)
			} else {
				ev := m.ev
				ev.Seq = m.seq
				w.applyOne(ev, m.size)
			}
			w.seq = m.seq
		}
		w.evict()
		if len(w.waiters) > 0 {
			w.wakeWaiters()
		}
		w.mu.Unlock()
		batch = batch[n:]
	}
}

// applyOne applies one event under the write lock.
func (w *ProjectionWorker) applyOne(ev events.Event, size int) {
	k := keyOf(ev)
	e := w.last
	if e == nil || e.key != k {
		if rb, ok := w.rebuilding[k]; ok {
			rb.events = append(rb.events, ev)
			return
		}
		if _, ok := w.evicted[k]; ok {
			return // in the log; the rebuild reads it
		}
		var ok bool
		if e, ok = w.sessions[k]; !ok {
			e = w.hold(k, projections.NewSession(k.tenant, k.session))
		}
		w.last = e
	}
	e.s.Observe(ev)
	e.events += int64(size)
	w.touch(e)
}

// hold adds a session to memory (write lock held).
func (w *ProjectionWorker) hold(k sessionKey, s *projections.Session) *projEntry {
	s.SetRenderBudget(w.budget)
	e := &projEntry{key: k, s: s}
	w.sessions[k] = e
	w.lruMu.Lock()
	e.gen = w.gen
	w.order.Add(k, e, 0)
	w.lruMu.Unlock()
	return e
}

// touch marks e most recently used and updates its estimate (write lock
// held).
func (w *ProjectionWorker) touch(e *projEntry) {
	est := sessionOverhead + int64(float64(e.events)*eventBytesFactor) + e.s.RenderCacheBytes()
	w.bytes += est - e.bytes
	e.bytes = est
	w.lruMu.Lock()
	e.gen = w.gen
	// Already the most recently used (the same session as the event
	// before, no view in between): nothing to move.
	if k, _, ok := w.order.Newest(); !ok || k != e.key {
		w.order.Get(e.key)
	}
	w.lruMu.Unlock()
}

// evict drops least recently used sessions while the estimate is over the
// budget, keeping at least one (write lock held).
func (w *ProjectionWorker) evict() {
	if w.reader == nil {
		return
	}
	w.lruMu.Lock()
	defer w.lruMu.Unlock()
	for w.bytes > w.maxBytes && w.order.Len() > 1 {
		_, e, _ := w.order.Oldest()
		w.evictLocked(e)
	}
}

// evictLocked moves e from memory to the evicted set (write lock and lruMu
// held).
func (w *ProjectionWorker) evictLocked(e *projEntry) {
	w.order.Remove(e.key)
	// Cached renderings may have grown since the last touch.
	w.bytes -= e.bytes
	delete(w.sessions, e.key)
	if w.last == e {
		w.last = nil
	}
	w.evicted[e.key] = struct{}{}
	w.evictions++
}

// EvictIdle evicts the sessions not applied to or viewed since the
// previous call (the idle sweep, see Pipeline.EvictIdle) and returns how
// many. An evicted session keeps only its key; it is rebuilt from the log
// when next viewed. Without a reader (SetEviction) it evicts nothing.
func (w *ProjectionWorker) EvictIdle() int {
	if w.reader == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lruMu.Lock()
	defer w.lruMu.Unlock()
	n := 0
	// Least recently used first: stop at the first entry used since the
	// last sweep (every entry in front of it was used later).
	for {
		_, e, ok := w.order.Oldest()
		if !ok || e.gen == w.gen {
			break
		}
		w.evictLocked(e)
		n++
	}
	w.gen++
	return n
}

// Seq returns the last stream sequence applied.
func (w *ProjectionWorker) Seq() uint64 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.seq
}

// WaitSeq blocks until the projection has applied seq (read-your-writes for
// the API) or ctx ends. A waiter is woken once, when seq is applied, not
// at every batch applied before it.
func (w *ProjectionWorker) WaitSeq(ctx context.Context, seq uint64) error {
	w.mu.Lock()
	if w.seq >= seq {
		w.mu.Unlock()
		return nil
	}
	x := seqWaiter{seq: seq, done: make(chan struct{})}
	w.waiters = append(w.waiters, x)
	w.mu.Unlock()
	select {
	case <-x.done:
		return nil
	case <-ctx.Done():
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seq >= seq {
		return nil
	}
	for i := range w.waiters {
		if w.waiters[i].done == x.done {
			w.waiters = slices.Delete(w.waiters, i, i+1)
			break
		}
	}
	return fmt.Errorf("wait for projection to reach seq %d (at %d): %w", seq, w.seq, ctx.Err())
}

// seqWaiter is one WaitSeq call: done is closed once seq is applied.
type seqWaiter struct {
	seq  uint64
	done chan struct{}
}

// wakeWaiters wakes the waiters whose sequence is applied (write lock
// held).
func (w *ProjectionWorker) wakeWaiters() {
	kept := w.waiters[:0]
	for _, x := range w.waiters {
		if x.seq <= w.seq {
			close(x.done)
		} else {
			kept = append(kept, x)
		}
	}
	clear(w.waiters[len(kept):])
	w.waiters = kept
}

// View runs fn on the projection of one session under the read lock. It
// reports false when the session is unknown. An evicted session is rebuilt
// from the log first (bounded by rebuildTimeout; a failed rebuild is
// logged and reported as false).
func (w *ProjectionWorker) View(tenant, session string, fn func(*projections.Session)) bool {
	ctx, cancel := context.WithTimeout(context.Background(), rebuildTimeout)
	defer cancel()
	ok, err := w.ViewContext(ctx, tenant, session, fn)
	if err != nil {
		w.logger.Error("projection: rebuild evicted session", "tenant", tenant, "session", session, "err", err)
	}
	return ok
}

// ViewContext is View with the rebuild of an evicted session bounded by
// ctx; the error reports a rebuild that failed.
func (w *ProjectionWorker) ViewContext(ctx context.Context, tenant, session string, fn func(*projections.Session)) (bool, error) {
	k := sessionKey{tenant, session}
	for {
		w.mu.RLock()
		e, ok := w.sessions[k]
		if ok {
			w.lruMu.Lock()
			e.gen = w.gen
			w.order.Get(k)
			w.lruMu.Unlock()
			fn(e.s)
			w.mu.RUnlock()
			return true, nil
		}
		_, gone := w.evicted[k]
		rb := w.rebuilding[k]
		w.mu.RUnlock()
		if !gone && rb == nil {
			return false, nil
		}
		if err := w.rebuild(ctx, k); err != nil {
			return false, err
		}
	}
}

// rebuild reads an evicted session back from the log and holds it again.
// Concurrent callers share one rebuild. Events the worker applies while
// the log is read are collected and observed after it (Observe ignores
// the ones the read already returned).
func (w *ProjectionWorker) rebuild(ctx context.Context, k sessionKey) error {
	w.mu.Lock()
	if rb, ok := w.rebuilding[k]; ok {
		w.mu.Unlock()
		select {
		case <-rb.done:
			return rb.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if _, ok := w.evicted[k]; !ok {
		w.mu.Unlock()
		return nil // rebuilt meanwhile
	}
	rb := &rebuild{done: make(chan struct{})}
	w.rebuilding[k] = rb
	delete(w.evicted, k)
	w.mu.Unlock()

	evs, err := w.reader.ReadSession(ctx, k.tenant, k.session)

	w.mu.Lock()
	delete(w.rebuilding, k)
	if err != nil {
		w.evicted[k] = struct{}{}
		rb.err = fmt.Errorf("rebuild %s/%s from the log: %w", k.tenant, k.session, err)
	} else {
		s := projections.NewSession(k.tenant, k.session)
		e := w.hold(k, s)
		var size int64
		for _, ev := range evs {
			if ev.Seq > w.seq {
				break // not applied yet: the worker will apply it
			}
			s.Observe(ev)
			size += encodedSize(ev)
		}
		for _, ev := range rb.events {
			s.Observe(ev)
			size += encodedSize(ev)
		}
		e.events = size
		w.touch(e)
		w.evict()
	}
	w.mu.Unlock()
	close(rb.done)
	return rb.err
}

// encodedSize approximates an event's encoded size for the memory
// estimate of a rebuilt session.
func encodedSize(ev events.Event) int64 {
	b, err := events.EncodeValidated(ev)
	if err != nil {
		return 256
	}
	return int64(len(b))
}

// SessionRef names one session known to the projection.
type SessionRef struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
}

// Sessions lists the sessions known to the projection, sorted.
func (w *ProjectionWorker) Sessions() []SessionRef {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]SessionRef, 0, len(w.sessions)+len(w.evicted)+len(w.rebuilding))
	for k := range w.sessions {
		out = append(out, SessionRef{k.tenant, k.session})
	}
	for k := range w.evicted {
		out = append(out, SessionRef{k.tenant, k.session})
	}
	for k := range w.rebuilding {
		out = append(out, SessionRef{k.tenant, k.session})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tenant != out[j].Tenant {
			return out[i].Tenant < out[j].Tenant
		}
		return out[i].Session < out[j].Session
	})
	return out
}
