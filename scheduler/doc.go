// Package scheduler owns timing: when marks that eligibility recorded are put
// into effect. It models the provider's prompt cache per session (prices,
// TTL, minimum cacheable length, the prefix cached by the last request),
// decides at each model request which pending PRUNE/KEEP marks to apply and
// under which trigger, records first divergence, mutation radius and the
// priced cost of every application, and simulates the economics of three
// strategies (none, immediate, scheduled) on the same session.
//
// The core is pure and deterministic: a function of the session's events
// and the policy. It never reads the wall clock (time comes from event
// timestamps and the at argument of Decide), never talks to NATS (the
// worker around it does), and never judges eligibility: it only applies
// marks, never invents them.
//
// Fact indices. Every fact of the session (events.Event.IsFact) has a
// 0-based position among the session's facts, counted in log order by
// Observe. All state is keyed by fact index, so the core's decisions do not
// depend on how marks interleave with facts: a mark is eligible at the
// request at fact index F only if its CauseIndex < F, an item is in the
// context rendered at F only if its fact index is < F, and an application
// decided at F (AfterIndex F) takes effect in the bundle rendered at F.
package scheduler
