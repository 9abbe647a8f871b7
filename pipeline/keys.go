package pipeline

import (
	"strconv"
	"sync"

	"github.com/prunesched/prunesched/events"
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
const (
	DurableEligibility = "eligibility"
	DurableScheduler   = "scheduler"
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
type sessionTable[S any] struct {
	mu       sync.Mutex
	sessions map[sessionKey]*S
}

// drop forgets every cached session of the partition; each is rebuilt from
// the log when its next fact arrives. Called when another process consumed
// facts of the partition in between, and after a failure.
func (t *sessionTable[S]) drop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.sessions)
}

// partitionTables holds a worker's sessionTable per partition, created on
// first use.
type partitionTables[S any] struct {
	mu     sync.Mutex
	tables map[int]*sessionTable[S]
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
		t = &sessionTable[S]{sessions: map[sessionKey]*S{}}
		pt.tables[p] = t
	}
	return t
}
