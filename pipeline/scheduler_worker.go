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
	sessionLog
	AppendGuarded(ctx context.Context, ev events.Event, expectLastFactSeq uint64) (events.Event, error)
	MarksSince(ctx context.Context, tenant, session string, afterSeq uint64) ([]events.Event, error)
	LastSeq(ctx context.Context, tenant, session string, kind events.SubjectKind) (uint64, error)
	SessionsWithMarks(ctx context.Context, partition int) ([]store.SessionRef, error)
}

// ErrConflict is returned by the guarded append when a new fact landed on
// the session since the decision's view.
var errConflict = errors.New("session changed since the decision")

// SchedulerWorker feeds facts and marks to each session's scheduler core
// and, at every model request, publishes the application the core decides.
// It decides request k only once every mark caused by the session's facts
// up to k is stored (see Run), and only on marks caused before k, so the
// applications are a function of the facts alone.
type SchedulerWorker struct {
	*sessionWorker[schedSession]
	// log is the session worker's log, with the scheduler's further reads.
	log        schedulerLog
	policy     policy.Policy
	isConflict func(error) bool
	// elig is this process's eligibility worker, when it runs one: waits
	// ask it first, and new marks are taken from it instead of the log.
	elig *EligibilityWorker

	gmu sync.Mutex // guards the deferred gauges' inputs
	// pending summarises each session's pending marks for the deferred
	// gauges; latest is the latest event time the worker has seen.
	pending map[sessionKey]pendingSummary
	latest  time.Time
	// surveyed holds the partitions whose pending marks were surveyed
	// from the log since this process got their deliveries (see survey).
	surveyed map[int]bool
	// surveys is closed once the start-up surveys are done (Surveyed).
	surveys     chan struct{}
	surveysOnce sync.Once
}

// schedPartition is the worker's state for one partition.
type schedPartition = sessionTable[schedSession]

type pendingSummary struct {
	n      int
	oldest time.Time
	part   int
}

type schedSession struct {
	core        *scheduler.Core
	lastSeq     uint64 // last fact fed
	lastMarkSeq uint64
	seen        map[string]bool // mark and application ids fed
	// asked says a model request was fed since the batch's applications
	// were stored (its pending summary is refreshed then).
	asked bool
}

// NewSchedulerWorker returns a worker over log with policy p. isConflict
// recognises the log's optimistic-concurrency error.
func NewSchedulerWorker(log schedulerLog, p policy.Policy, logger *slog.Logger, met *Metrics, isConflict func(error) bool) *SchedulerWorker {
	w := &SchedulerWorker{log: log, policy: p, isConflict: isConflict,
		pending: map[sessionKey]pendingSummary{}, surveyed: map[int]bool{}, surveys: make(chan struct{})}
	w.sessionWorker = &sessionWorker[schedSession]{name: DurableScheduler, outputs: "applications", inputs: "requests",
		kind: w, log: log, logger: logger, met: met, upstream: w.waitEligibility}
	return w
}

func (w *SchedulerWorker) withPartitions(p partitioning) *SchedulerWorker {
	w.parts = p
	return w
}

// withEligibility lets the worker ask this process's eligibility worker
// before the log.
func (w *SchedulerWorker) withEligibility(e *EligibilityWorker) *SchedulerWorker {
	w.elig = e
	return w
}

// Run consumes the facts of the worker's partitions, one durable consumer
// per partition (DurableName(DurableScheduler, p), filter ps.*.*.fact.<p>),
// until ctx ends.
//
// Determinism with partitions: a session's facts and marks all live in its
// partition p. Before deciding the request at stream sequence k the worker
// waits until the marks of every fact of the session up to k are stored:
// this process's eligibility worker says so (it publishes the marks of a
// session's earlier facts before a later fact's, see EligibilityWorker),
// or else the ack floor of DurableName(DurableEligibility, p) reached k
// (the eligibility worker acknowledges a fact only after its marks are
// stored). The core considers only marks caused before k, so the
// application does not depend on which worker ran where, on timing, or on
// other partitions' progress.
//
// Facts come in batches (store.ConsumeBatch) and a batch's applications
// are published with one Append before its facts are acknowledged. A
// session's core is rebuilt from the log the first time the worker sees
// the session, after a failure, and after the partition's deliveries went
// to another process; the rebuild decides again at every earlier model
// request (the decision is a function of the facts, and a request that
// already has an application decides nothing), so a request a crashed
// worker left undecided gets its application before any later one.
func (w *SchedulerWorker) Run(ctx context.Context) error {
	return w.run(ctx, w.feeder())
}

// feeder returns what builds the worker's feed of a partition (see
// Run): it surveys the partition's pending marks, at its start when
// this process owns its partitions (no pinned group), else before each
// batch of a delivery run; Surveyed closes once the start-up surveys are
// done.
func (w *SchedulerWorker) feeder() func(ctx context.Context, p int) partitionFeed {
	// Alone (no pinned group) this process owns its partitions from the
	// start: survey them now, beside the consumers. With a pinned group it
	// surveys a partition when its deliveries come here (before each
	// batch).
	var start func(ctx context.Context, p int, st *schedPartition)
	if w.parts.pinnedTTL == 0 {
		var surveys sync.WaitGroup
		surveys.Add(len(w.parts.owned))
		start = func(ctx context.Context, p int, st *schedPartition) {
			go func() { defer surveys.Done(); w.survey(ctx, p, st) }()
		}
		go func() { surveys.Wait(); w.surveysOnce.Do(func() { close(w.surveys) }) }()
	} else {
		w.surveysOnce.Do(func() { close(w.surveys) })
	}
	surveyFirst := func(h batchHandler[schedSession]) batchHandler[schedSession] {
		return func(ctx context.Context, b batch[schedSession]) error {
			w.survey(ctx, b.part, b.st)
			return h(ctx, b)
		}
	}
	return w.sessionWorker.feeder(start, w.forgetPartition, surveyFirst)
}

// Surveyed is closed once the worker has surveyed its partitions' pending
// marks at start (single-process mode; see survey).
func (w *SchedulerWorker) Surveyed() <-chan struct{} { return w.surveys }

// survey rebuilds, once per partition delivery run, the pending-mark
// summaries of every session of partition p that has marks, from the log:
// after a restart or a takeover the worker has no session in memory, yet
// marks decided before may still wait, and the deferred gauges must count
// them. The session cores are built aside (nothing is published or
// cached); a session the consumer already holds keeps its own summary.
// Failures are logged: the gauges are then low until the sessions' next
// facts, as before.
func (w *SchedulerWorker) survey(ctx context.Context, p int, st *schedPartition) {
	if w.met == nil {
		return
	}
	w.gmu.Lock()
	done := w.surveyed[p]
	w.surveyed[p] = true
	w.gmu.Unlock()
	if done {
		return
	}
	refs, err := w.log.SessionsWithMarks(ctx, p)
	if err != nil {
		w.logger.Warn("scheduler: survey of pending marks failed", "partition", p, "err", err)
		return
	}
	for _, ref := range refs {
		k := sessionKey{ref.Tenant, ref.Session}
		s, err := w.rebuildAside(ctx, p, k, ^uint64(0))
		if err != nil {
			w.logger.Warn("scheduler: survey of pending marks failed", "partition", p, "err", err)
			return
		}
		st.mu.Lock()
		if cached, ok := st.sessions[k]; ok {
			s = cached
		}
		w.updatePending(k, s)
		st.mu.Unlock()
	}
}

// rebuildAside builds session k's core from the log (its facts before
// seq) without caching it or publishing anything.
func (w *SchedulerWorker) rebuildAside(ctx context.Context, p int, k sessionKey, seq uint64) (*schedSession, error) {
	scratch := &schedPartition{sessions: map[sessionKey]*schedSession{}}
	s, _, err := w.session(ctx, p, scratch, k, seq, 0)
	return s, err
}

// forgetPartition drops partition p's pending summaries (another process
// consumed it meanwhile) and lets the next delivery survey it again.
func (w *SchedulerWorker) forgetPartition(p int) {
	w.gmu.Lock()
	defer w.gmu.Unlock()
	delete(w.surveyed, p)
	for k, ps := range w.pending {
		if ps.part == p {
			delete(w.pending, k)
		}
	}
	w.setDeferredLocked()
}

// step feeds the session's next fact to the core; at a model request it
// first waits for the marks caused before it and feeds them, and returns
// the application decided.
func (w *SchedulerWorker) step(ctx context.Context, part int, k sessionKey, s *schedSession, ev events.Event) ([]events.Event, error) {
	w.sawTime(ev.Time)
	if _, ok := ev.Data.(*events.ModelRequest); ok {
		// The core decides on the marks caused before the request.
		if err := w.waitEligibility(ctx, part, k, ev.Seq); err != nil {
			return nil, err
		}
		if err := w.feedMarks(ctx, k, s, ev.Seq); err != nil {
			return nil, err
		}
		s.asked = true
	}
	if app := s.feed(ev); app != nil {
		return []events.Event{*app}, nil
	}
	return nil, nil
}

// stored counts the applications stored and refreshes the pending
// summaries of the sessions that were asked a request.
func (w *SchedulerWorker) stored(st *schedPartition, apps []events.Event, _ []sessionKey, fed map[sessionKey]uint64) {
	for _, a := range apps {
		removed := 0
		if app, ok := a.Data.(*events.Application); ok {
			removed = app.TokensRemoved
			if s := st.sessions[keyOf(a)]; s != nil {
				removed = s.core.PricedRemoved(app)
			}
		}
		w.met.application(a, removed)
	}
	for k := range fed {
		if s := st.sessions[k]; s.asked {
			s.asked = false
			w.updatePending(k, s)
		}
	}
}

func (w *SchedulerWorker) facts(s *schedSession) int   { return s.core.Facts() }
func (w *SchedulerWorker) fed(s *schedSession) uint64  { return s.lastSeq }
func (w *SchedulerWorker) done(s *schedSession) uint64 { return s.lastSeq }

// sawTime advances the latest event time seen (for the deferred ages).
func (w *SchedulerWorker) sawTime(t time.Time) {
	w.gmu.Lock()
	defer w.gmu.Unlock()
	if t.After(w.latest) {
		w.latest = t
	}
}

// feed feeds the session's next fact to the core (scheduler.Core.Feed:
// a model request is decided first) and returns the application decided,
// now seen; the caller has fed the marks the decision needs.
func (s *schedSession) feed(ev events.Event) *events.Event {
	app := s.core.Feed(ev)
	if app != nil {
		s.seen[app.ID] = true
	}
	s.lastSeq = ev.Seq
	return app
}

// observeApplication feeds an application to the core once; count says it
// was just published here (so the metrics count it once, not again when a
// session is rebuilt from the log).
func (w *SchedulerWorker) observeApplication(s *schedSession, app events.Event, count bool) {
	if s.seen[app.ID] {
		return
	}
	s.seen[app.ID] = true
	// Judged again first when decided at the core's position (a rebuild),
	// so Pending's reasons are this decision's (scheduler.Core.ObserveDecided).
	s.core.ObserveDecided(app)
	if count {
		removed := 0
		if a, ok := app.Data.(*events.Application); ok {
			removed = s.core.PricedRemoved(a)
		}
		w.met.application(app, removed)
	}
}

// updatePending refreshes the session's pending-mark summary and the
// deferred gauges. Ages are measured on event time: the latest event time
// seen minus the oldest pending mark's time.
func (w *SchedulerWorker) updatePending(k sessionKey, s *schedSession) {
	if w.met == nil {
		return
	}
	sum := pendingSummary{part: w.log.PartitionOf(k.tenant, k.session)}
	sum.n, sum.oldest = s.core.PendingSummary()
	w.gmu.Lock()
	defer w.gmu.Unlock()
	if sum.n == 0 {
		delete(w.pending, k)
	} else {
		w.pending[k] = sum
	}
	w.setDeferredLocked()
}

// setDeferredLocked sets the deferred gauges from the summaries; the
// caller holds gmu.
func (w *SchedulerWorker) setDeferredLocked() {
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

// waitEligibility blocks until the marks of every fact of session k up to
// stream sequence seq are stored: this process's eligibility worker says
// so, or the eligibility consumer of partition part acknowledged every
// fact of the partition up to seq.
func (w *SchedulerWorker) waitEligibility(ctx context.Context, part int, k sessionKey, seq uint64) error {
	if w.elig != nil {
		return w.elig.wait(ctx, part, k, seq)
	}
	return waitFloor(ctx, w.log, w.parts.prog, DurableEligibility, part, seq, nil)
}

// feedMarks gives the core every mark of the session published since the
// last call; the caller has waited for the marks caused up to seq.
func (w *SchedulerWorker) feedMarks(ctx context.Context, k sessionKey, s *schedSession, seq uint64) error {
	marks, ok := []events.Event(nil), false
	if w.elig != nil {
		marks, ok = w.elig.takeMarks(k, seq, s.lastMarkSeq)
	}
	if !ok {
		var err error
		marks, err = w.log.MarksSince(ctx, k.tenant, k.session, s.lastMarkSeq)
		if err != nil {
			return fmt.Errorf("read marks of %s/%s: %w", k.tenant, k.session, err)
		}
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

// open returns the empty core of session k.
func (w *SchedulerWorker) open(_ context.Context, k sessionKey) *schedSession {
	return &schedSession{core: scheduler.New(w.policy, k.tenant, k.session), seen: map[string]bool{}}
}

// rebuild rebuilds session state s from the session's events evs: every
// mark, then the facts before seq with the applications at the positions
// they were decided at, deciding again at each model request that has no
// application (a request with an application decides nothing; one a
// crashed worker never decided gets its application). It returns the
// applications so decided (to be published by a worker that owns the
// session; discarded by a read-only view). The caller waited for the
// eligibility of the facts, so the marks those decisions need are in evs.
func (w *SchedulerWorker) rebuild(s *schedSession, evs []events.Event, seq uint64) (repair []events.Event, err error) {
	for _, e := range evs {
		w.sawTime(e.Time)
	}
	scheduler.Replay(evs, seq, scheduler.Replayer{
		Mark: func(m events.Event) {
			s.seen[m.ID] = true
			s.core.Observe(m)
			s.lastMarkSeq = max(s.lastMarkSeq, m.Seq)
		},
		// Applications are fed at the fact position they were decided at;
		// those after the last fact replayed (a render call, a manual
		// prune) only when stored before seq.
		Application: func(a events.Event) { w.observeApplication(s, a, false) },
		Fact: func(e events.Event) {
			if app := s.feed(e); app != nil {
				repair = append(repair, *app)
			}
		},
	})
	return repair, nil
}

// DecideLive is the render-time path: an adapter is about to send request
// req at time at. The worker catches the session up to the log, decides, and
// publishes the application guarded by the session's last fact sequence, so
// a fact that lands concurrently makes it retry instead of applying on a
// stale view. It returns the stored application, or nil when nothing applies.
func (w *SchedulerWorker) DecideLive(ctx context.Context, tenant, session string, at time.Time, req string) (*events.Event, error) {
	return w.DecideLiveAfter(ctx, tenant, session, 0, at, req)
}

// DecideLiveAfter is DecideLive for a caller that knows the stream sequence
// of the session's last fact (it just appended it: the proxy), which saves
// asking the log for it. 0 means unknown. A stale lastFact costs a retry,
// never a wrong application: the worker must have handled exactly the
// facts through it, and the guarded publish rejects an application if a
// later fact landed.
func (w *SchedulerWorker) DecideLiveAfter(ctx context.Context, tenant, session string, lastFact uint64, at time.Time, req string) (*events.Event, error) {
	k := sessionKey{tenant, session}
	part := w.log.PartitionOf(tenant, session)
	st := w.partition(part)
	for attempt := 0; attempt < 20; attempt++ {
		last := lastFact
		if attempt > 0 || last == 0 {
			var err error
			if last, err = w.log.LastSeq(ctx, tenant, session, events.KindFact); err != nil {
				return nil, err
			}
		}
		if err := w.waitFacts(ctx, part, k, last); err != nil {
			return nil, err
		}
		if err := w.waitEligibility(ctx, part, k, last); err != nil {
			return nil, err
		}
		app, retry, err := w.decideLive(ctx, part, st, k, last, at, req)
		if err != nil {
			return nil, err
		}
		if !retry {
			return app, nil
		}
	}
	return nil, fmt.Errorf("decide %s/%s: %w after 20 attempts", tenant, session, errConflict)
}

// decideLive is one attempt of DecideLive on the session's facts through
// last; retry says the session moved meanwhile.
func (w *SchedulerWorker) decideLive(ctx context.Context, part int, st *schedPartition, k sessionKey, last uint64, at time.Time, req string) (app *events.Event, retry bool, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, repair, err := w.session(ctx, part, st, k, last+1, 0)
	if err != nil {
		return nil, false, err
	}
	// Never any in practice (the scheduler consumer handled the facts
	// through last); published anyway, in order.
	stored, err := w.publish(ctx, repair)
	if err != nil {
		w.met.validationErrorOf(DurableScheduler, err)
		st.forgetLocked(k)
		return nil, false, fmt.Errorf("%s/%s: %w", k.tenant, k.session, err)
	}
	w.stored(st, stored, nil, nil)
	if s.lastSeq != last {
		if s.lastSeq < last {
			// Held behind the log after the wait said the facts were
			// handled: another process consumes the partition (this one
			// decides for a proxy of a fleet). Rebuilt at the retry.
			st.forgetLocked(k)
		}
		return nil, true, nil
	}
	if err := w.feedMarks(ctx, k, s, last); err != nil {
		return nil, false, err
	}
	decided := s.core.Decide(at, req, s.core.Facts())
	if decided == nil || s.seen[decided.ID] {
		return nil, false, nil
	}
	live, err := w.log.AppendGuarded(ctx, *decided, last)
	if err != nil {
		// The core recorded the application when it decided; forget the
		// session so the retry rebuilds it from the log.
		st.forgetLocked(k)
		if w.isConflict != nil && w.isConflict(err) {
			w.met.conflict()
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("publish live application for %s/%s: %w", k.tenant, k.session, err)
	}
	w.observeApplication(s, live, true)
	w.updatePending(k, s)
	return &live, false, nil
}

// waitFacts blocks until the scheduler (this process's worker, or the
// consumer of partition part in whichever process) has handled the
// session's facts up to seq.
func (w *SchedulerWorker) waitFacts(ctx context.Context, part int, k sessionKey, seq uint64) error {
	return w.wait(ctx, part, k, seq)
}

// Pending returns the marks the session's scheduler holds back, with the
// reason each waits, as of the session's facts in the log. It uses the
// worker's session core when that has handled every fact, and otherwise
// (after a restart, in a process that does not consume the session's
// partition, or while the consumer catches up) rebuilds one aside from the
// log, waiting first for the eligibility of the facts, and publishes
// nothing. A session without facts has none.
func (w *SchedulerWorker) Pending(ctx context.Context, tenant, session string) ([]scheduler.PendingMark, error) {
	k := sessionKey{tenant, session}
	part := w.log.PartitionOf(tenant, session)
	last, err := w.log.LastSeq(ctx, tenant, session, events.KindFact)
	if err != nil || last == 0 {
		return nil, err
	}
	st := w.partition(part)
	st.mu.Lock()
	if s, ok := st.sessions[k]; ok && s.lastSeq >= last {
		defer st.mu.Unlock()
		return s.core.Pending(), nil
	}
	st.mu.Unlock()
	if err := w.waitEligibility(ctx, part, k, last); err != nil {
		return nil, err
	}
	s, err := w.rebuildAside(ctx, part, k, last+1)
	if err != nil {
		return nil, err
	}
	// The rebuild fed every mark stored when it read the session.
	return s.core.Pending(), nil
}

// EvictIdle forgets the session cores no fact or reader used since the
// previous call (see Pipeline.EvictIdle) and returns how many. Each is
// rebuilt from the log when next needed (its next fact, a live decision,
// Pending); the pending-mark summary of the deferred gauges is kept.
func (w *SchedulerWorker) EvictIdle() int { return w.evictIdle() }

// WaitJudged blocks until eligibility has stored the marks of every fact
// of the session up to stream sequence lastFact, and returns the stream
// sequence of the session's last mark (0: none), for a reader that must
// see those marks in the projection (the proxy answering the agent's
// removal request).
func (w *SchedulerWorker) WaitJudged(ctx context.Context, tenant, session string, lastFact uint64) (uint64, error) {
	k := sessionKey{tenant, session}
	if err := w.waitEligibility(ctx, w.log.PartitionOf(tenant, session), k, lastFact); err != nil {
		return 0, err
	}
	return w.log.LastSeq(ctx, tenant, session, events.KindMark)
}

// SessionFacts returns how many facts of the session this process's
// scheduler has taken, when it holds the session with exactly the facts
// through stream sequence lastFact (false otherwise: nothing waits or
// rebuilds). A writer that keeps its own count of the session's facts
// (the proxy deciding in memory) compares it to find facts another writer
// appended meanwhile (a pin, a manual prune through the API).
func (w *SchedulerWorker) SessionFacts(tenant, session string, lastFact uint64) (int, bool) {
	k := sessionKey{tenant, session}
	st := w.partition(w.log.PartitionOf(tenant, session))
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.sessions[k]
	if !ok || s.lastSeq != lastFact {
		return 0, false
	}
	return s.core.Facts(), true
}
