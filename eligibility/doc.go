// Package eligibility owns the eligibility core: for every item of one agent
// session (a message, a tool call's input, a tool call's output) it decides
// whether the item can leave the rendered context — KEEP, PRUNE, DEFER or
// ABSTAIN — on evidence it can name, and records each decision as a mark with
// its certificate (rung, reason code, evidence, recoverability, protection,
// residue, estimated tokens net of the placeholder, policy version).
//
// It owns the evidence ladder (identical_l0.go, source_l1.go, superseded_l2.go,
// residue_l3.go, predicted_l4.go; cold_recoverable.go is the opt-in
// recoverable policy, L4 COLD_RECOVERABLE; keep_copy.go says which of two copies
// stays; span_l1.go is the L1 span, a partial prune that renders an
// output's repeated runs as references to an earlier output, whose lines it
// reads through SetContent when outputs are stored by content address),
// the policy's overrides of the tool determinism classes (determinism.go;
// the built-in classes, argument extraction and the shell-command
// classifier are package toolspec's), errored-call residue (errored.go,
// skeleton.go) and property-derived protection (protect.go); judge.go
// combines them. REASONS.md lists every reason code.
//
// The core is a pure, deterministic function of the session's fact events in
// log order and the policy: Core.Observe takes the next fact and returns the
// marks whose decision changed because of it. Replaying the log reproduces
// every mark byte for byte (mark ids are derived from their causes). Per-event
// work is amortised O(1): comparisons go through indexes by tool and
// canonical arguments, by source identity, by path and by request count,
// never through rescans of the session.
//
// It must not: touch NATS or any I/O (the worker around it moves events in
// and out); read the wall clock (time comes from event timestamps); read
// output payloads from the blob store (it compares content addresses and
// stored token counts); summarise or rewrite anything (a prune removes, a
// placeholder carries identity, never content); decide when a prune is
// applied (that is the scheduler's job); import scheduler or projections.
package eligibility
