// Package projections owns the read side of prunesched: the per-session
// projection built from the log (items, marks, applications, restores), the
// rendered bundle in its three shapes (Anthropic Messages, OpenAI Chat
// Completions, readable text) with mechanical placeholders where payload was
// removed, the certificate ledger view of decisions, and the token ledger.
//
// It must not decide anything: it never marks, never applies, never
// re-tokenizes a payload (stored counts only; only placeholders it writes
// itself are counted), and never changes the log. Everything it shows is a
// deterministic function of the events it was fed, in log order, so
// discarding the state and replaying the log gives byte-identical output.
// It does not talk to NATS: a worker feeds Session.Observe.
package projections
