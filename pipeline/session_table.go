package pipeline

import (
	"strconv"
	"sync"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/lru"
)

// sessionKey identifies a session across tenants.
type sessionKey struct{ tenant, session string }

func keyOf(ev events.Event) sessionKey {
	return sessionKey{ev.TenantOrDefault(), ev.Session}
}

// Durable consumer name prefixes. Each worker kind has one durable consumer
// per partition, named DurableName(prefix, p). The scheduler waits on the
// ack floor of the eligibility consumer of the session's partition, so its
// decisions never depend on how marks interleave with later facts.
//
// A process running both kinds consumes a partition no other durable
// consumes with one shared durable, DurableName(DurableJudge, p): each
// fact is delivered and acknowledged once for both, the eligibility
// worker judging a batch before the scheduler takes it, and its ack
// floor stands for both kinds (see Pipeline.Run).
const (
	DurableEligibility = "eligibility"
	DurableScheduler   = "scheduler"
	DurableJudge       = "judge"
)

// PriorityGroup is the pinned-client priority group every partition
// consumer uses: one process at a time consumes a partition, the others
// stand by.
const PriorityGroup = "prunesched"

// DurableName returns the durable consumer name of a worker kind
// (DurableEligibility or DurableScheduler) for partition p, e.g.
// "eligibility-p3".
func DurableName(prefix string, partition int) string {
	return prefix + "-p" + strconv.Itoa(partition)
}

// sessionTable is one worker's state for one partition: its sessions are
// touched by that partition's consumer and by readers (waits, the other
// worker), under mu.
//
// The sessions held are bounded: each costs the facts it observed, and
// when the partition's total passes maxFacts the least recently used
// sessions are forgotten (evictLocked, called between batches) down to
// three quarters of it. A forgotten session is rebuilt from the log when
// its next fact arrives, exactly as after drop.
type sessionTable[S any] struct {
	mu       sync.Mutex
	sessions map[sessionKey]*S
	// ahead holds, for a session rebuilt from the log at a fact, the
	// stream sequences of the session's later facts the log already held
	// (see sessionWorker.handle): each must be fed before any fact after
	// it, or the session's state misses it.
	ahead map[sessionKey][]uint64
	// order holds the sessions in order of use, each with its last use
	// (a tick of clock) and the facts it observed as its cost; it has no
	// bound of its own (evictLocked applies maxFacts).
	order    *lru.Cache[sessionKey, *sessionUse]
	clock    uint64
	maxFacts int // 0: DefaultWorkerFacts
	// through is the last fact of the partition handled, with every
	// earlier fact delivered here, since the last failure or gap: a
	// forgotten session's facts up to it are known handled (see
	// handledUpTo). Zero: unknown.
	through uint64
	// idleMark is clock at the last idle sweep (see evictIdle): a session
	// whose last use is at or before it was not used since.
	idleMark uint64
}

// sessionUse is a session's last use, a tick of sessionTable.clock.
type sessionUse struct{ tick uint64 }

// total is the facts the sessions held have observed.
func (t *sessionTable[S]) total() int {
	if t.order == nil {
		return 0
	}
	return int(t.order.Cost())
}

// advanceLocked records a batch handled whole, in order.
func (t *sessionTable[S]) advanceLocked(evs []events.Event) {
	for _, e := range evs {
		t.through = max(t.through, e.Seq)
	}
}

// handledUpTo reports whether a fact at stream sequence seq of a session
// this table does not hold (forgotten) is known handled.
func (t *sessionTable[S]) handledUpTo(seq uint64) bool {
	return t.through > 0 && seq <= t.through
}

// DefaultWorkerFacts bounds the facts the sessions held by one partition
// of the eligibility or the scheduler worker have observed (about 0.9 KB
// each for eligibility, measured on small events): 16,384 per partition,
// 131,072 for the default eight partitions.
const DefaultWorkerFacts = 16 << 10

// touchLocked records a use of session k that observed n more facts.
func (t *sessionTable[S]) touchLocked(k sessionKey, n int) {
	if t.order == nil {
		t.order = lru.New[sessionKey, *sessionUse](0)
	}
	t.clock++
	if u, ok := t.order.Get(k); ok {
		u.tick = t.clock
		t.order.Grow(k, int64(n))
		return
	}
	t.order.Add(k, &sessionUse{tick: t.clock}, int64(n))
}

// skipsAheadLocked reports whether feeding session k the fact at stream
// sequence seq would skip a later fact its rebuild found in the log (see
// ahead); it forgets the facts ahead that seq reaches.
func (t *sessionTable[S]) skipsAheadLocked(k sessionKey, seq uint64) bool {
	a := t.ahead[k]
	if len(a) == 0 {
		return false
	}
	if a[0] < seq {
		return true
	}
	for len(a) > 0 && a[0] <= seq {
		a = a[1:]
	}
	if len(a) == 0 {
		delete(t.ahead, k)
	} else {
		t.ahead[k] = a
	}
	return false
}

// forgetLocked drops session k.
func (t *sessionTable[S]) forgetLocked(k sessionKey) {
	delete(t.sessions, k)
	delete(t.ahead, k)
	if t.order != nil {
		t.order.Remove(k)
	}
}

// clearLocked drops every session.
func (t *sessionTable[S]) clearLocked() {
	clear(t.sessions)
	clear(t.ahead)
	if t.order != nil {
		t.order.Clear()
	}
	t.through = 0
}

// evictLocked forgets the least recently used sessions while the facts
// held exceed the bound, down to three quarters of it (so eviction runs
// once per quarter of the bound), keeping the most recent.
func (t *sessionTable[S]) evictLocked() {
	limit := t.maxFacts
	if limit <= 0 {
		limit = DefaultWorkerFacts
	}
	if t.total() <= limit || len(t.sessions) <= 1 {
		return
	}
	for t.order.Len() > 1 && t.total() > limit*3/4 {
		k, _, _ := t.order.Oldest()
		t.forgetLocked(k)
	}
}

// evictIdle forgets the sessions not used since the previous call (the
// idle sweep: called every idle interval, it forgets sessions idle for
// one to two intervals) and returns how many. A forgotten session is
// rebuilt from the log when its next fact arrives, exactly as after
// evictLocked.
func (t *sessionTable[S]) evictIdle() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	// Least recently used first: the ticks grow towards the most recent.
	for t.order != nil {
		k, u, ok := t.order.Oldest()
		if !ok || u.tick > t.idleMark {
			break
		}
		if _, ok := t.sessions[k]; ok {
			n++
		}
		t.forgetLocked(k)
	}
	t.idleMark = t.clock
	return n
}

// drop forgets every cached session of the partition; each is rebuilt from
// the log when its next fact arrives. Called when another process consumed
// facts of the partition in between, and after a failure.
func (t *sessionTable[S]) drop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clearLocked()
}

// partitionTables holds a worker's sessionTable per partition, created on
// first use.
type partitionTables[S any] struct {
	mu     sync.Mutex
	tables map[int]*sessionTable[S]
	// maxFacts is each table's bound (0: DefaultWorkerFacts).
	maxFacts int
}

// evictIdle runs every table's idle sweep (sessionTable.evictIdle) and
// returns the sessions forgotten.
func (pt *partitionTables[S]) evictIdle() int {
	pt.mu.Lock()
	tables := make([]*sessionTable[S], 0, len(pt.tables))
	for _, t := range pt.tables {
		tables = append(tables, t)
	}
	pt.mu.Unlock()
	n := 0
	for _, t := range tables {
		n += t.evictIdle()
	}
	return n
}

// get returns partition p's table.
func (pt *partitionTables[S]) get(p int) *sessionTable[S] {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.tables == nil {
		pt.tables = map[int]*sessionTable[S]{}
	}
	t, ok := pt.tables[p]
	if !ok {
		t = &sessionTable[S]{sessions: map[sessionKey]*S{}, maxFacts: pt.maxFacts}
		pt.tables[p] = t
	}
	return t
}
