package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

// eligibilityLog is what the eligibility worker needs from the log.
type eligibilityLog interface {
	sessionLog
}

// blobGetter is the part of the log that returns stored outputs (span
// references need their lines).
type blobGetter interface {
	GetBlob(ctx context.Context, hash string) ([]byte, error)
}

// blobOpener is the part of the log that streams stored outputs, so a
// large one is never held whole.
type blobOpener interface {
	OpenBlob(ctx context.Context, hash string) (io.ReadCloser, error)
}

// EligibilityWorker feeds every fact to its session's eligibility core and
// publishes the marks the core emits. Mark ids are derived from their
// causes, so a redelivered fact republishes nothing new.
//
// It is a partitioned session worker (see sessionWorker): the marks of a
// batch of facts are published with one Append and the facts acknowledged
// only after every mark is stored, and a session's core is built from the
// log (every fact before the one delivered) the first time the worker sees
// the session, after a failure and after the partition's deliveries went
// to another process, publishing first the marks of those earlier facts
// that are not yet in the log (a crashed worker judged them but did not
// store their marks, or never got to them). So when a fact's marks are
// stored, the marks of every earlier fact of its session are too, whichever
// worker judged them and in whatever order the facts were redelivered.
type EligibilityWorker struct {
	*sessionWorker[eligSession]
	policy policy.Policy
}

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
	w := &EligibilityWorker{policy: p}
	w.sessionWorker = &sessionWorker[eligSession]{name: DurableEligibility, outputs: "marks", inputs: "facts",
		kind: w, log: log, logger: logger, met: met}
	return w
}

func (w *EligibilityWorker) withPartitions(p partitioning) *EligibilityWorker {
	w.parts = p
	return w
}

// Run consumes the facts of the worker's partitions, one durable consumer
// per partition (DurableName(DurableEligibility, p), filter
// ps.*.*.fact.<p>), until ctx ends. Every session lives in exactly one
// partition, so one consumer judges each of its facts.
func (w *EligibilityWorker) Run(ctx context.Context) error { return w.run(ctx, w.feeder(nil, nil)) }

// open returns the empty core of session k. The core outlives ctx (a
// batch's): its fetches of stored outputs are not cancelled with it.
func (w *EligibilityWorker) open(ctx context.Context, k sessionKey) *eligSession {
	s := &eligSession{core: eligibility.New(w.policy, k.tenant, k.session), known: map[string]bool{}}
	if bl, ok := w.log.(blobGetter); ok && w.policy.Eligibility.SpanRefsEnabled() {
		// Span references compare the lines of reads stored by content
		// address.
		bctx := context.WithoutCancel(ctx)
		if op, ok := bl.(blobOpener); ok {
			// Streamed: a large output is hashed a buffer at a time.
			s.core.SetContentReader(func(h string) (io.ReadCloser, error) {
				r, err := op.OpenBlob(bctx, h)
				if err != nil {
					return nil, fmt.Errorf("span references: output %s: %w", h, err)
				}
				return r, nil
			})
		} else {
			s.core.SetContent(func(h string) ([]byte, error) {
				b, err := bl.GetBlob(bctx, h)
				if err != nil {
					return nil, fmt.Errorf("span references: output %s: %w", h, err)
				}
				return b, nil
			})
		}
	}
	return s
}

// rebuild feeds the core the session's facts before seq, and returns
// their marks missing from the log.
func (w *EligibilityWorker) rebuild(s *eligSession, evs []events.Event, seq uint64) (repair []events.Event, err error) {
	for _, e := range evs {
		if e.Type == events.TypeMark {
			s.known[e.ID] = true
			s.from = max(s.from, e.Seq)
		}
	}
	for _, e := range evs {
		if !e.IsFact() || e.Seq >= seq {
			continue
		}
		marks, err := s.judge(e)
		if err != nil {
			return nil, err
		}
		repair = append(repair, marks...)
	}
	return repair, nil
}

// step judges the session's next fact.
func (w *EligibilityWorker) step(_ context.Context, _ int, _ sessionKey, s *eligSession, ev events.Event) ([]events.Event, error) {
	return s.judge(ev)
}

// judge feeds a fact to the core and returns its marks not in the log.
// A stored output the core could not read (the blob store timed out as a
// server went away) fails the fact: the core judged it without the
// output, which the log does not say, so its marks may differ from any
// other run's. The batch fails, the partition's cores are dropped
// (withResetOnFailure) and the fact is judged again when redelivered.
func (s *eligSession) judge(ev events.Event) ([]events.Event, error) {
	var out []events.Event
	for _, m := range s.core.Observe(ev) {
		if !s.known[m.ID] {
			out = append(out, m)
		}
	}
	if err := s.core.ContentErr(); err != nil {
		return nil, fmt.Errorf("judge fact %s at seq %d: %w", ev.ID, ev.Seq, err)
	}
	s.lastSeq = ev.Seq
	return out, nil
}

// stored records the marks stored, for the dedup and takeMarks, counts
// them, and moves each fed session's stored watermark.
func (w *EligibilityWorker) stored(st *eligPartition, marks []events.Event, keys []sessionKey, fed map[sessionKey]uint64) {
	for i, m := range marks {
		s := st.sessions[keys[i]]
		if s.known[m.ID] {
			continue // the same mark twice in one batch
		}
		s.known[m.ID] = true
		s.addTail(m)
		w.met.mark(m)
	}
	for k, seq := range fed {
		s := st.sessions[k]
		s.stored = max(s.stored, seq)
	}
}

func (w *EligibilityWorker) facts(s *eligSession) int   { return s.core.Facts() }
func (w *EligibilityWorker) fed(s *eligSession) uint64  { return s.lastSeq }
func (w *EligibilityWorker) done(s *eligSession) uint64 { return s.stored }

// eligPartition is the worker's state for one partition.
type eligPartition = sessionTable[eligSession]

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
func (w *EligibilityWorker) EvictIdle() int { return w.evictIdle() }
