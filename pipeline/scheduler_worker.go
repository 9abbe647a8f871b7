package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/scheduler"
)

// schedulerLog is what the scheduler worker needs from the log.
type schedulerLog interface {
	Append(ctx context.Context, evs []events.Event) ([]events.Event, error)
	AppendGuarded(ctx context.Context, ev events.Event, expectLastFactSeq uint64) (events.Event, error)
	ReadSession(ctx context.Context, tenant, session string) ([]events.Event, error)
	Consume(ctx context.Context, durable, filter string, handler store.Handler, opts ...store.ConsumeOption) error
	PartitionOf(tenant, session string) int
	AckFloor(ctx context.Context, durable string) (uint64, error)
	MarksSince(ctx context.Context, tenant, session string, afterSeq uint64) ([]events.Event, error)
	LastSeq(ctx context.Context, tenant, session string, kind events.SubjectKind) (uint64, error)
}

// ErrConflict is returned by the guarded append when a new fact landed on
// the session since the decision's view.
var errConflict = errors.New("session changed since the decision")

// SchedulerWorker feeds facts and marks to each session's scheduler core
// and, at every model request, publishes the application the core decides.
// It decides request k only after the eligibility consumer of the
// session's partition has acknowledged every fact up to k, and only on
// marks caused before k, so the applications are a function of the facts
// alone (see Run).
type SchedulerWorker struct {
	log        schedulerLog
	policy     policy.Policy
	logger     *slog.Logger
	met        *Metrics
	isConflict func(error) bool
	parts      partitioning

	mu       sync.Mutex
	sessions map[sessionKey]*schedSession
	// pending summarises each session's pending marks for the deferred
	// gauges; latest is the latest event time the worker has seen.
	pending map[sessionKey]pendingSummary
	latest  time.Time
}

type pendingSummary struct {
	n      int
	oldest time.Time
}

type schedSession struct {
	core        *scheduler.Core
	lastSeq     uint64 // last fact fed
	facts       int    // facts fed
	lastMarkSeq uint64
	seen        map[string]bool // mark and application ids fed
}

// NewSchedulerWorker returns a worker over log with policy p. isConflict
// recognises the log's optimistic-concurrency error.
func NewSchedulerWorker(log schedulerLog, p policy.Policy, logger *slog.Logger, met *Metrics, isConflict func(error) bool) *SchedulerWorker {
	return &SchedulerWorker{log: log, policy: p, logger: logger, met: met, isConflict: isConflict,
		sessions: map[sessionKey]*schedSession{}, pending: map[sessionKey]pendingSummary{}}
}

func (w *SchedulerWorker) withPartitions(p partitioning) *SchedulerWorker {
	w.parts = p
	return w
}

// Run consumes the facts of the worker's partitions, one durable consumer
// per partition (DurableName(DurableScheduler, p), filter ps.*.*.fact.<p>),
// until ctx ends.
//
// Determinism with partitions: a session's facts and marks all live in its
// partition p. Before deciding the request at stream sequence k the worker
// waits until the ack floor of DurableName(DurableEligibility, p) reaches
// k. That consumer delivers partition p's facts strictly in order
// (MaxAckPending 1) and the eligibility worker acknowledges a fact only
// after the marks it causes are stored, so every mark with CauseIndex below
// the request's fact index is in the log by then, whichever process (or
// failover successor) judged it. The core considers only those marks, so
// the application does not depend on which worker ran where, on timing, or
// on other partitions' progress.
func (w *SchedulerWorker) Run(ctx context.Context) error {
	if len(w.parts.owned) == 0 {
		return errors.New("scheduler worker: no partitions to consume")
	}
	return runPartitions(ctx, w.parts.owned, func(ctx context.Context, p int) error {
		durable := DurableName(DurableScheduler, p)
		return w.log.Consume(ctx, durable, events.PartitionFilter(events.KindFact, p),
			func(ctx context.Context, ev events.Event) error { return w.handle(ctx, p, ev) },
			w.parts.consumeOptions(w.met, "scheduler", durable, w.dropSessions)...)
	})
}

func (w *SchedulerWorker) handle(ctx context.Context, part int, ev events.Event) error {
	done := w.met.observeLatency("scheduler")
	defer done()
	if _, ok := ev.Data.(*events.ModelRequest); ok {
		// Wait outside the lock: other partitions keep moving meanwhile.
		if err := w.waitEligibility(ctx, part, ev.Seq); err != nil {
			return err
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	k := keyOf(ev)
	s, err := w.session(ctx, k, ev.Seq)
	if err != nil {
		return err
	}
	if ev.Seq != 0 && ev.Seq <= s.lastSeq {
		return nil
	}
	if ev.Time.After(w.latest) {
		w.latest = ev.Time
	}
	if mr, ok := ev.Data.(*events.ModelRequest); ok {
		if err := w.feedMarks(ctx, k, s); err != nil {
			return err
		}
		if app := s.core.Decide(ev.Time, mr.Request, s.facts); app != nil && !s.seen[app.ID] {
			stored, err := w.log.Append(ctx, []events.Event{*app})
			if err != nil {
				delete(w.sessions, k)
				w.met.validationErrorOf("scheduler", err)
				return fmt.Errorf("publish application for %s/%s request %s: %w", k.tenant, k.session, mr.Request, err)
			}
			w.observeApplication(s, stored[0], true)
		}
	}
	s.core.Observe(ev)
	s.facts++
	s.lastSeq = ev.Seq
	if _, ok := ev.Data.(*events.ModelRequest); ok {
		w.updatePending(k, s)
	}
	return nil
}

// observeApplication feeds an application to the core once; count says it
// was just published here (so the metrics count it once, not again when a
// session is rebuilt from the log).
func (w *SchedulerWorker) observeApplication(s *schedSession, app events.Event, count bool) {
	if s.seen[app.ID] {
		return
	}
	s.seen[app.ID] = true
	s.core.Observe(app)
	if count {
		w.met.application(app)
	}
}

// updatePending refreshes the session's pending-mark summary and the
// deferred gauges (w.mu held). Ages are measured on event time: the latest
// event time seen minus the oldest pending mark's time.
func (w *SchedulerWorker) updatePending(k sessionKey, s *schedSession) {
	if w.met == nil {
		return
	}
	var sum pendingSummary
	for _, pm := range s.core.Pending() {
		sum.n++
		if sum.oldest.IsZero() || pm.Since.Before(sum.oldest) {
			sum.oldest = pm.Since
		}
	}
	if sum.n == 0 {
		delete(w.pending, k)
	} else {
		w.pending[k] = sum
	}
	total := 0
	var oldest time.Time
	for _, ps := range w.pending {
		total += ps.n
		if oldest.IsZero() || ps.oldest.Before(oldest) {
			oldest = ps.oldest
		}
	}
	age := 0.0
	if !oldest.IsZero() && w.latest.After(oldest) {
		age = w.latest.Sub(oldest).Seconds()
	}
	w.met.setDeferred(total, age)
}

// waitEligibility blocks until the eligibility consumer of partition part
// has acknowledged every fact of the partition up to seq.
func (w *SchedulerWorker) waitEligibility(ctx context.Context, part int, seq uint64) error {
	return waitFloor(ctx, w.log, w.parts.prog, DurableName(DurableEligibility, part), seq, "eligibility")
}

// feedMarks gives the core every mark of the session published since the
// last call.
func (w *SchedulerWorker) feedMarks(ctx context.Context, k sessionKey, s *schedSession) error {
	marks, err := w.log.MarksSince(ctx, k.tenant, k.session, s.lastMarkSeq)
	if err != nil {
		return fmt.Errorf("read marks of %s/%s: %w", k.tenant, k.session, err)
	}
	for _, m := range marks {
		if !s.seen[m.ID] {
			s.seen[m.ID] = true
			s.core.Observe(m)
		}
		if m.Seq > s.lastMarkSeq {
			s.lastMarkSeq = m.Seq
		}
	}
	return nil
}

// session returns the cached core for k, rebuilding it from the log (facts
// before seq, every mark, and applications) when needed.
func (w *SchedulerWorker) session(ctx context.Context, k sessionKey, seq uint64) (*schedSession, error) {
	if s, ok := w.sessions[k]; ok {
		return s, nil
	}
	s := &schedSession{core: scheduler.New(w.policy, k.tenant, k.session), seen: map[string]bool{}}
	if seq > 0 {
		evs, err := w.log.ReadSession(ctx, k.tenant, k.session)
		if err != nil {
			return nil, fmt.Errorf("rebuild scheduler for %s/%s: %w", k.tenant, k.session, err)
		}
		// Applications are fed at the fact position they were decided at.
		apps := map[int][]events.Event{}
		for _, e := range evs {
			if a, ok := e.Data.(*events.Application); ok {
				apps[a.AfterIndex] = append(apps[a.AfterIndex], e)
			}
			if e.Time.After(w.latest) {
				w.latest = e.Time
			}
		}
		for _, e := range evs {
			switch {
			case e.Type == events.TypeMark:
				s.seen[e.ID] = true
				s.core.Observe(e)
				s.lastMarkSeq = max(s.lastMarkSeq, e.Seq)
			case e.IsFact() && e.Seq < seq:
				for _, a := range apps[s.facts] {
					w.observeApplication(s, a, false)
				}
				s.core.Observe(e)
				s.facts++
				s.lastSeq = e.Seq
			}
		}
	}
	w.sessions[k] = s
	return s, nil
}

// DecideLive is the render-time path: an adapter is about to send request
// req at time at. The worker catches the session up to the log, decides, and
// publishes the application guarded by the session's last fact sequence, so
// a fact that lands concurrently makes it retry instead of applying on a
// stale view. It returns the stored application, or nil when nothing applies.
func (w *SchedulerWorker) DecideLive(ctx context.Context, tenant, session string, at time.Time, req string) (*events.Event, error) {
	k := sessionKey{tenant, session}
	part := w.log.PartitionOf(tenant, session)
	for attempt := 0; attempt < 20; attempt++ {
		last, err := w.log.LastSeq(ctx, tenant, session, events.KindFact)
		if err != nil {
			return nil, err
		}
		if err := w.waitFacts(ctx, part, last); err != nil {
			return nil, err
		}
		if err := w.waitEligibility(ctx, part, last); err != nil {
			return nil, err
		}
		w.mu.Lock()
		s, err := w.session(ctx, k, last+1)
		if err != nil {
			w.mu.Unlock()
			return nil, err
		}
		if s.lastSeq != last {
			w.mu.Unlock()
			continue
		}
		if err := w.feedMarks(ctx, k, s); err != nil {
			w.mu.Unlock()
			return nil, err
		}
		app := s.core.Decide(at, req, s.facts)
		if app == nil || s.seen[app.ID] {
			w.mu.Unlock()
			return nil, nil
		}
		stored, err := w.log.AppendGuarded(ctx, *app, last)
		if err != nil {
			// The core recorded the application when it decided; forget the
			// session so the retry rebuilds it from the log.
			delete(w.sessions, k)
			w.mu.Unlock()
			if w.isConflict != nil && w.isConflict(err) {
				w.met.conflict()
				continue
			}
			return nil, fmt.Errorf("publish live application for %s/%s: %w", tenant, session, err)
		}
		w.observeApplication(s, stored, true)
		w.updatePending(k, s)
		w.mu.Unlock()
		return &stored, nil
	}
	return nil, fmt.Errorf("decide %s/%s: %w after 20 attempts", tenant, session, errConflict)
}

// waitFacts blocks until the scheduler consumer of partition part (in
// whichever process) has handled the partition's facts up to seq.
func (w *SchedulerWorker) waitFacts(ctx context.Context, part int, seq uint64) error {
	return waitFloor(ctx, w.log, w.parts.prog, DurableName(DurableScheduler, part), seq, "scheduler")
}

// Pending returns the marks the session's scheduler holds back, with the
// reason each waits, as of the facts the worker has processed. It reports
// false when the worker has not seen the session.
func (w *SchedulerWorker) Pending(tenant, session string) ([]scheduler.PendingMark, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.sessions[sessionKey{tenant, session}]
	if !ok {
		return nil, false
	}
	return s.core.Pending(), true
}

// dropSessions forgets every cached session core; each is rebuilt from the
// log (facts, marks and applications) when its next fact arrives. Called
// when another process consumed facts of a partition this worker had cached
// sessions of.
func (w *SchedulerWorker) dropSessions() {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.sessions)
}
