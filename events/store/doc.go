// Package store owns prunesched's access to the log on NATS JetStream: the
// one event stream (events.StreamName, subjects ps.>), the content-addressed
// blob bucket for tool outputs, the append paths (batched with Nats-Msg-Id
// deduplication, and guarded by an expected-last-sequence check), the read
// paths (one session, the whole log, the list of sessions), a durable
// consumer helper for workers, and an embedded nats-server for the
// single-binary mode.
//
// It must not decide anything about pruning: it moves events in and out and
// never interprets them beyond the envelope. It never deletes or rewrites an
// event: the stream denies deletes and purges, and its discard policy rejects
// new writes rather than dropping old events when a limit is hit.
//
// Only the jetstream package of nats.go is used (never the legacy
// JetStreamContext API).
package store
