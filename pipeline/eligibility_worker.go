package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/policy"
)

// eligibilityLog is what the eligibility worker needs from the log.
type eligibilityLog interface {
	Append(ctx context.Context, evs []events.Event) ([]events.Event, error)
	ReadSession(ctx context.Context, tenant, session string) ([]events.Event, error)
	Consume(ctx context.Context, durable, filter string, handler store.Handler, opts ...store.ConsumeOption) error
}

// EligibilityWorker feeds every fact to its session's eligibility core and
// publishes the marks the core emits. Mark ids are derived from their
// causes, so a redelivered fact republishes nothing new.
type EligibilityWorker struct {
	log    eligibilityLog
	policy policy.Policy
	logger *slog.Logger
	met    *Metrics
	parts  partitioning

	mu       sync.Mutex
	sessions map[sessionKey]*eligSession
}

type eligSession struct {
	core    *eligibility.Core
	lastSeq uint64
	known   map[string]bool // mark ids already in the log
}

// NewEligibilityWorker returns a worker over log with policy p.
func NewEligibilityWorker(log eligibilityLog, p policy.Policy, logger *slog.Logger, met *Metrics) *EligibilityWorker {
	return &EligibilityWorker{log: log, policy: p, logger: logger, met: met, sessions: map[sessionKey]*eligSession{}}
}

func (w *EligibilityWorker) withPartitions(p partitioning) *EligibilityWorker {
	w.parts = p
	return w
}

// Run consumes the facts of the worker's partitions, one durable consumer
// per partition (DurableName(DurableEligibility, p), filter
// ps.*.*.fact.<p>), until ctx ends. Every session lives in exactly one
// partition, so one consumer judges each of its facts once.
func (w *EligibilityWorker) Run(ctx context.Context) error {
	if len(w.parts.owned) == 0 {
		return errors.New("eligibility worker: no partitions to consume")
	}
	return runPartitions(ctx, w.parts.owned, func(ctx context.Context, p int) error {
		durable := DurableName(DurableEligibility, p)
		return w.log.Consume(ctx, durable, events.PartitionFilter(events.KindFact, p), w.handle,
			w.parts.consumeOptions(w.met, "eligibility", durable, w.dropSessions)...)
	})
}

func (w *EligibilityWorker) handle(ctx context.Context, ev events.Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	done := w.met.observeLatency("eligibility")
	defer done()
	s, err := w.session(ctx, ev)
	if err != nil {
		return err
	}
	if ev.Seq != 0 && ev.Seq <= s.lastSeq {
		return nil // already seen during warm-up
	}
	marks := s.core.Observe(ev)
	var fresh []events.Event
	for _, m := range marks {
		if !s.known[m.ID] {
			fresh = append(fresh, m)
		}
	}
	if len(fresh) > 0 {
		if _, err := w.log.Append(ctx, fresh); err != nil {
			w.met.validationErrorOf("eligibility", err)
			// Drop the cached core: the fact will be redelivered and the
			// session rebuilt from the log.
			delete(w.sessions, keyOf(ev))
			return fmt.Errorf("publish %d marks for %s/%s: %w", len(fresh), ev.Session, ev.ID, err)
		}
		for _, m := range fresh {
			s.known[m.ID] = true
			w.met.mark(m)
		}
	}
	s.lastSeq = ev.Seq
	return nil
}

// session returns the cached core for ev's session, rebuilding it from the
// log (facts before ev) when the worker has not seen the session yet.
func (w *EligibilityWorker) session(ctx context.Context, ev events.Event) (*eligSession, error) {
	k := keyOf(ev)
	if s, ok := w.sessions[k]; ok {
		return s, nil
	}
	s := &eligSession{core: eligibility.New(w.policy, k.tenant, k.session), known: map[string]bool{}}
	if ev.Seq > 0 {
		evs, err := w.log.ReadSession(ctx, k.tenant, k.session)
		if err != nil {
			return nil, fmt.Errorf("rebuild eligibility for %s/%s: %w", k.tenant, k.session, err)
		}
		for _, e := range evs {
			switch {
			case e.Type == events.TypeMark:
				s.known[e.ID] = true
			case e.IsFact() && e.Seq < ev.Seq:
				s.core.Observe(e)
				s.lastSeq = e.Seq
			}
		}
	}
	w.sessions[k] = s
	return s, nil
}

// dropSessions forgets every cached session core; each is rebuilt from the
// log when its next fact arrives. Called when another process consumed
// facts of a partition this worker had cached sessions of.
func (w *EligibilityWorker) dropSessions() {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.sessions)
}
