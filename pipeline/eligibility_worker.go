package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/policy"
)

// eligibilityLog is what the eligibility worker needs from the log.
type eligibilityLog interface {
	Append(ctx context.Context, evs []events.Event) ([]events.Event, error)
	ReadSession(ctx context.Context, tenant, session string) ([]events.Event, error)
	ConsumeBatch(ctx context.Context, durable, filter string, handler store.BatchHandler, opts ...store.ConsumeOption) error
	PartitionOf(tenant, session string) int
}

// blobGetter is the part of the log that returns stored outputs (span
// references need their lines).
type blobGetter interface {
	GetBlob(ctx context.Context, hash string) ([]byte, error)
}

// EligibilityWorker feeds every fact to its session's eligibility core and
// publishes the marks the core emits. Mark ids are derived from their
// causes, so a redelivered fact republishes nothing new.
//
// Facts arrive in batches (store.ConsumeBatch); the marks of a whole batch
// are published with one Append and the facts acknowledged only after
// every mark is stored. Order is kept per session without relying on
// delivery order: a session's core is built from the log (every fact
// before the one delivered) the first time the worker sees the session,
// after a failure and after the partition's deliveries went to another
// process, and the marks of those earlier facts that are not yet in the log
// (a crashed worker judged them but did not store their marks, or never
// got to them) are published first. So when a fact's marks are stored,
// the marks of every earlier fact of its session are too, whichever worker
// judged them and in whatever order the facts were redelivered.
type EligibilityWorker struct {
	log    eligibilityLog
	policy policy.Policy
	logger *slog.Logger
	met    *Metrics
	parts  partitioning

	state partitionTables[eligSession]
}

// eligPartition is the worker's state for one partition.
type eligPartition = sessionTable[eligSession]

type eligSession struct {
	core *eligibility.Core
	// lastSeq is the last fact the core observed; stored is the last fact
	// whose marks (and every earlier fact's) are known stored.
	lastSeq, stored uint64
	known           map[string]bool // mark ids in the log
	// tail holds, in stream order, every mark of the session stored after
	// stream sequence from (read at the rebuild, then published here), so
	// the scheduler of this process can take new marks without reading
	// the log (see takeMarks).
	tail []events.Event
	from uint64
}

// NewEligibilityWorker returns a worker over log with policy p.
func NewEligibilityWorker(log eligibilityLog, p policy.Policy, logger *slog.Logger, met *Metrics) *EligibilityWorker {
	return &EligibilityWorker{log: log, policy: p, logger: logger, met: met}
}

func (w *EligibilityWorker) withPartitions(p partitioning) *EligibilityWorker {
	w.parts = p
	return w
}

// partition returns partition p's state.
func (w *EligibilityWorker) partition(p int) *eligPartition { return w.state.get(p) }

// Run consumes the facts of the worker's partitions, one durable consumer
// per partition (DurableName(DurableEligibility, p), filter
// ps.*.*.fact.<p>), until ctx ends. Every session lives in exactly one
// partition, so one consumer judges each of its facts.
func (w *EligibilityWorker) Run(ctx context.Context) error {
	if len(w.parts.owned) == 0 {
		return errors.New("eligibility worker: no partitions to consume")
	}
	return runPartitions(ctx, w.parts.owned, func(ctx context.Context, p int) error {
		durable := DurableName(DurableEligibility, p)
		st := w.partition(p)
		return w.log.ConsumeBatch(ctx, durable, events.PartitionFilter(events.KindFact, p),
			func(ctx context.Context, evs []events.Event) error { return w.handleBatch(ctx, st, evs) },
			w.parts.consumeOptions(w.met, "eligibility", durable, st.drop)...)
	})
}

// pendingMark is a mark to publish and the session it belongs to.
type pendingMark struct {
	s  *eligSession
	ev events.Event
}

// handleBatch judges a batch of facts of one partition and stores their
// marks with one Append.
func (w *EligibilityWorker) handleBatch(ctx context.Context, st *eligPartition, evs []events.Event) (err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	defer func() {
		if err != nil {
			st.through = 0 // facts come back out of order
		}
	}()
	done := w.met.observeLatency("eligibility")
	defer done()
	var out []pendingMark
	touched := map[*eligSession]uint64{}
	for _, ev := range evs {
		s, repair, err := w.session(ctx, st, ev)
		if err != nil {
			return err
		}
		out = append(out, repair...)
		if ev.Seq != 0 && ev.Seq <= s.lastSeq {
			continue // already seen: during the rebuild, or redelivered
		}
		for _, m := range s.core.Observe(ev) {
			if !s.known[m.ID] {
				out = append(out, pendingMark{s, m})
			}
		}
		s.lastSeq = ev.Seq
		touched[s] = ev.Seq
	}
	if len(out) > 0 {
		marks := make([]events.Event, len(out))
		for i, pm := range out {
			marks[i] = pm.ev
		}
		stored, err := w.log.Append(ctx, marks)
		if err != nil {
			w.met.validationErrorOf("eligibility", err)
			// The cores are ahead of the log: drop them, the facts come
			// back and the sessions are rebuilt from the log.
			st.clearLocked()
			return fmt.Errorf("publish %d marks: %w", len(marks), err)
		}
		for i, pm := range out {
			if pm.s.known[stored[i].ID] {
				continue // the same mark twice in one batch
			}
			pm.s.known[stored[i].ID] = true
			pm.s.addTail(stored[i])
			w.met.mark(stored[i])
		}
	}
	for s, seq := range touched {
		s.stored = max(s.stored, seq)
	}
	st.advanceLocked(evs)
	st.evictLocked()
	w.parts.prog.notify()
	return nil
}

// addTail records a stored mark for takeMarks, keeping stream order (a
// duplicate comes back with the sequence of the copy stored earlier).
func (s *eligSession) addTail(m events.Event) {
	if m.Seq <= s.from {
		return
	}
	i := len(s.tail)
	for i > 0 && s.tail[i-1].Seq > m.Seq {
		i--
	}
	if i > 0 && s.tail[i-1].Seq == m.Seq {
		return
	}
	s.tail = slices.Insert(s.tail, i, m)
	if len(s.tail) > maxTail {
		// No scheduler of this process takes them (it runs elsewhere, or
		// is far behind): keep the newest half; a reader asking for older
		// marks reads the log.
		drop := len(s.tail) - maxTail/2
		s.from = s.tail[drop-1].Seq
		s.tail = slices.Delete(s.tail, 0, drop)
	}
}

// maxTail bounds the marks a session keeps for this process's scheduler.
const maxTail = 4096

// session returns the cached core for ev's session, building it from the
// log (facts before ev) when the worker has not seen the session, and the
// marks of those earlier facts missing from the log (to publish before
// ev's own).
func (w *EligibilityWorker) session(ctx context.Context, st *eligPartition, ev events.Event) (*eligSession, []pendingMark, error) {
	k := keyOf(ev)
	if s, ok := st.sessions[k]; ok {
		st.touchLocked(k, 1)
		return s, nil, nil
	}
	s := &eligSession{core: eligibility.New(w.policy, k.tenant, k.session), known: map[string]bool{}}
	if bl, ok := w.log.(blobGetter); ok && w.policy.Eligibility.SpanRefsEnabled() {
		// Span references compare the lines of reads stored by content
		// address. The core outlives this call's context (a batch's), so
		// its fetches are not cancelled with it.
		bctx := context.WithoutCancel(ctx)
		s.core.SetContent(func(h string) ([]byte, error) {
			b, err := bl.GetBlob(bctx, h)
			if err != nil {
				return nil, fmt.Errorf("span references: output %s: %w", h, err)
			}
			return b, nil
		})
	}
	var repair []pendingMark
	if ev.Seq > 0 {
		evs, err := w.log.ReadSession(ctx, k.tenant, k.session)
		if err != nil {
			return nil, nil, fmt.Errorf("rebuild eligibility for %s/%s: %w", k.tenant, k.session, err)
		}
		for _, e := range evs {
			if e.Type == events.TypeMark {
				s.known[e.ID] = true
				s.from = max(s.from, e.Seq)
			}
		}
		for _, e := range evs {
			if !e.IsFact() || e.Seq >= ev.Seq {
				continue
			}
			for _, m := range s.core.Observe(e) {
				if !s.known[m.ID] {
					repair = append(repair, pendingMark{s, m})
				}
			}
			s.lastSeq = e.Seq
		}
		if len(repair) > 0 {
			w.logger.Info("eligibility: publishing marks of earlier facts missing from the log",
				"tenant", k.tenant, "session", k.session, "marks", len(repair), "before_seq", ev.Seq)
		}
	}
	st.sessions[k] = s
	st.touchLocked(k, 1+s.core.Facts())
	return s, repair, nil
}

// judgedThrough reports whether this process's worker has stored the marks
// of every fact of the session up to stream sequence seq (a fact of the
// session); known is false when the worker has no state for the session
// (another process may have done it).
func (w *EligibilityWorker) judgedThrough(k sessionKey, seq uint64) (done, known bool) {
	st := w.partition(w.log.PartitionOf(k.tenant, k.session))
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.sessions[k]
	if !ok {
		if st.handledUpTo(seq) {
			return true, true // judged, then forgotten
		}
		return false, false
	}
	return s.stored >= seq, true
}

// takeMarks returns the session's marks stored after stream sequence
// after, in stream order, when this process's worker holds them all:
// it has judged the session's facts through seq (so every mark caused
// before seq is stored) and holds every mark stored after after. The
// marks up to after are forgotten (the one reader, this process's
// scheduler, asks for ever later marks). ok is false when the caller must
// read the log instead.
func (w *EligibilityWorker) takeMarks(k sessionKey, seq, after uint64) (marks []events.Event, ok bool) {
	st := w.partition(w.log.PartitionOf(k.tenant, k.session))
	st.mu.Lock()
	defer st.mu.Unlock()
	s, found := st.sessions[k]
	if !found || s.stored < seq || after < s.from {
		return nil, false
	}
	i := 0
	for i < len(s.tail) && s.tail[i].Seq <= after {
		i++
	}
	marks = slices.Clone(s.tail[i:])
	s.tail = slices.Delete(s.tail, 0, i)
	s.from = after
	return marks, true
}

// EvictIdle forgets the sessions no fact or reader used since the previous
// call (see Pipeline.EvictIdle) and returns how many. Each is rebuilt from
// the log when its next fact arrives; until then the partition's handled
// watermark answers the waits.
func (w *EligibilityWorker) EvictIdle() int { return w.state.evictIdle() }
