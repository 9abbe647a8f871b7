package pipeline

import "github.com/prunesched/prunesched/events"

// sessionKey identifies a session across tenants.
type sessionKey struct{ tenant, session string }

func keyOf(ev events.Event) sessionKey {
	return sessionKey{ev.TenantOrDefault(), ev.Session}
}

// Durable consumer names. The scheduler waits on the eligibility consumer's
// ack floor so its decisions never depend on how marks interleave with
// later facts.
const (
	DurableEligibility = "eligibility"
	DurableScheduler   = "scheduler"
)
