package pipeline

import (
	"strconv"

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
