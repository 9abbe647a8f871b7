package pipeline

import (
	"context"
	"fmt"
	"log/slog"
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
	w := &ProjectionWorker{js: js, logger: logger, met: met, sessions: map[sessionKey]*projections.Session{}}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// Run tails the stream until ctx ends.
func (w *ProjectionWorker) Run(ctx context.Context) error {
	cons, err := w.js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.SubjectPrefix + ".>"},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("projection: create ordered consumer: %w", err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		meta, err := msg.Metadata()
		if err != nil {
			w.logger.Error("projection: message without metadata", "err", err)
			return
		}
		ev, err := events.Decode(msg.Data())
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			w.errs++
			w.met.decodeError("projection")
			w.logger.Error("projection: undecodable event skipped", "seq", meta.Sequence.Stream, "subject", msg.Subject(), "err", err)
		} else {
			ev.Seq = meta.Sequence.Stream
			k := keyOf(ev)
			s, ok := w.sessions[k]
			if !ok {
				s = projections.NewSession(k.tenant, k.session)
				w.sessions[k] = s
			}
			s.Observe(ev)
		}
		w.seq = meta.Sequence.Stream
		w.cond.Broadcast()
	})
	if err != nil {
		return fmt.Errorf("projection: consume: %w", err)
	}
	w.mu.Lock()
	w.started = true
	w.mu.Unlock()
	<-ctx.Done()
	cc.Stop()
	w.mu.Lock()
	w.cond.Broadcast()
	w.mu.Unlock()
	return nil
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
