// Package events owns the prunesched event schema: the versioned envelope,
// every event type that flows through the log, the enumerated decision, rung
// and reason vocabularies, strict decoding of the native JSONL session format,
// and the subject layout on the JetStream stream.
//
// It must not import eligibility, scheduler, projections or any other
// component: everything else depends on it, never the reverse.
package events
