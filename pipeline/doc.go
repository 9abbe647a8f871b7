// Package pipeline runs prunesched's components as JetStream workers: the
// eligibility worker (facts in, marks out), the timing scheduler (facts and
// marks in, applications out) and the projection (every event in, bundles
// and ledgers out). Each worker is a thin shell around a pure core from the
// eligibility, scheduler and projections packages; the same workers run
// together inside `prunesched serve` and `prunesched analyze`, or one per
// process with `prunesched worker`.
//
// It owns no policy: what to prune is the eligibility core's, when is the
// scheduler core's, and what the bundle looks like is the projection's. It
// must never decide anything the cores would not decide from the log alone
// (no wall clock, no arrival order across sessions): the same log gives
// the same decisions, in one process or in a fleet.
package pipeline
