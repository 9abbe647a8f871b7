package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/projections"
)

// ProjectionWorker tails the whole stream with an ordered consumer and keeps
// one projection per session in memory. On start it rebuilds every
// projection from the first message: projections hold nothing the log does
// not.
type ProjectionWorker struct {
	js     jetstream.JetStream
	logger *slog.Logger
	// budget bounds the rendered fragments all sessions cache.
	budget *projections.RenderBudget
	met    *Metrics

	mu       sync.RWMutex
	cond     *sync.Cond
	sessions map[sessionKey]*projections.Session
	seq      uint64 // last stream sequence applied
	errs     int    // undecodable messages skipped
	started  bool
}

// NewProjectionWorker returns a projection over the stream reached by js.
func NewProjectionWorker(js jetstream.JetStream, logger *slog.Logger, met *Metrics) *ProjectionWorker {
	w := &ProjectionWorker{js: js, logger: logger, met: met, sessions: map[sessionKey]*projections.Session{},
		budget: projections.NewRenderBudget(projections.DefaultRenderCacheSessionBytes, projections.DefaultRenderCacheTotalBytes)}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// Run tails the stream until ctx ends.
//
// Receiving, decoding and applying run in stages so that they overlap: the
// consumer's callback only queues each message; a decoder takes whatever
// is queued as one batch and decodes it (in parallel when it is large); an
// applier applies the batches in stream order. Seq advances only as
// messages are applied, in order.
func (w *ProjectionWorker) Run(ctx context.Context) error {
	cons, err := w.js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.SubjectPrefix + ".>"},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
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
		for {
			raw := q.take()
			if raw == nil {
				return
			}
			batch := decodeBatch(raw, &batches)
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
		meta, err := msg.Metadata()
		if err != nil {
			w.logger.Error("projection: message without metadata", "err", err)
			return
		}
		q.push(projRaw{seq: meta.Sequence.Stream, subject: msg.Subject(), data: msg.Data()})
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
	w.mu.Lock()
	w.cond.Broadcast()
	w.mu.Unlock()
	return nil
}

const (
	// projQueueMax bounds the messages received but not yet decoded (and
	// so one decode batch).
	projQueueMax = 1024
	// projApplyChunk is how many messages are applied per hold of the
	// write lock (readers and WaitSeq get a turn in between).
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
}

// decodeBatch decodes every message of raw, splitting a large batch
// across up to GOMAXPROCS goroutines. pool recycles decoded batches once
// applied.
func decodeBatch(raw []projRaw, pool *sync.Pool) []projMsg {
	var out []projMsg
	if p, ok := pool.Get().(*[]projMsg); ok && cap(*p) >= len(raw) {
		out = (*p)[:len(raw)]
	} else {
		out = make([]projMsg, len(raw), max(len(raw), 64))
	}
	n := min(runtime.GOMAXPROCS(0), len(raw)/(projParallelMin/2))
	if n <= 1 {
		decodeMsgs(raw, out)
		return out
	}
	var wg sync.WaitGroup
	per := (len(raw) + n - 1) / n
	for lo := per; lo < len(raw); lo += per {
		hi := min(lo+per, len(raw))
		wg.Go(func() { decodeMsgs(raw[lo:hi], out[lo:hi]) })
	}
	decodeMsgs(raw[:per], out[:per])
	wg.Wait()
	return out
}

func decodeMsgs(raw []projRaw, out []projMsg) {
	for i, r := range raw {
		ev, err := events.Decode(r.data)
		out[i] = projMsg{seq: r.seq, subject: r.subject, ev: ev, err: err}
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
				k := keyOf(ev)
				s, ok := w.sessions[k]
				if !ok {
					s = projections.NewSession(k.tenant, k.session)
					s.SetRenderBudget(w.budget)
					w.sessions[k] = s
				}
				s.Observe(ev)
			}
			w.seq = m.seq
		}
		w.cond.Broadcast()
		w.mu.Unlock()
		batch = batch[n:]
	}
}

// projQueue hands messages from the consumer's callback to the decoder:
// push waits while max messages are queued; take returns everything
// queued as one batch, so batches grow only when the decoder falls behind
// and a lone message is passed on at once.
type projQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	msgs   []projRaw
	spare  []projRaw // a taken batch given back, reused by take
	max    int
	closed bool
}

func newProjQueue(max int) *projQueue {
	q := &projQueue{max: max}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// push queues m; after close it drops it.
func (q *projQueue) push(m projRaw) {
	q.mu.Lock()
	for len(q.msgs) >= q.max && !q.closed {
		q.cond.Wait()
	}
	if !q.closed {
		q.msgs = append(q.msgs, m)
		if len(q.msgs) == 1 {
			q.cond.Broadcast()
		}
	}
	q.mu.Unlock()
}

// take waits for messages and returns all of them, or nil once the queue
// is closed and empty.
func (q *projQueue) take() []projRaw {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.msgs) == 0 && !q.closed {
		q.cond.Wait()
	}
	batch := q.msgs
	q.msgs, q.spare = q.spare[:0], nil
	if len(batch) >= q.max {
		q.cond.Broadcast()
	}
	if len(batch) == 0 {
		return nil
	}
	return batch
}

// recycle gives back a batch returned by take once it is done with.
func (q *projQueue) recycle(batch []projRaw) {
	clear(batch)
	q.mu.Lock()
	if cap(batch) > cap(q.spare) {
		q.spare = batch[:0]
	}
	q.mu.Unlock()
}

// close makes push drop and take return nil once the queue is empty.
func (q *projQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// Seq returns the last stream sequence applied.
func (w *ProjectionWorker) Seq() uint64 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.seq
}

// WaitSeq blocks until the projection has applied seq (read-your-writes for
// the API) or ctx ends.
func (w *ProjectionWorker) WaitSeq(ctx context.Context, seq uint64) error {
	stop := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.cond.Broadcast()
		w.mu.Unlock()
	})
	defer stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.seq < seq {
		if ctx.Err() != nil {
			return fmt.Errorf("wait for projection to reach seq %d (at %d): %w", seq, w.seq, ctx.Err())
		}
		w.cond.Wait()
	}
	return nil
}

// View runs fn on the projection of one session under the read lock. It
// reports false when the session is unknown.
func (w *ProjectionWorker) View(tenant, session string, fn func(*projections.Session)) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	s, ok := w.sessions[sessionKey{tenant, session}]
	if !ok {
		return false
	}
	fn(s)
	return true
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
	out := make([]SessionRef, 0, len(w.sessions))
	for k := range w.sessions {
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
