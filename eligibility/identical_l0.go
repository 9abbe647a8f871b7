package eligibility

import (
	"strconv"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/toolspec"
)

// L0, identical rendered copy. An older tool output O and a newer output N
// are L0 duplicates when all of these hold:
//
//  1. same tool name and same canonical arguments (JSON with sorted keys and
//     no insignificant whitespace), and N is the next successful, in-context
//     observation of that call after O (copies are compared in runs: an
//     output that differs breaks the run);
//  2. the same output content hash (byte-identical rendered output);
//  3. the determinism class (the more dangerous of the two) allows it, as
//     rules 4 to 6 say.
//  4. Pure and versioned tools: always. For a versioned read the bytes are the
//     source content, so identical bytes are the same observation even if a
//     write happened between them and was undone.
//  5. State tools: only when no state change is recorded or possible between
//     O's call and N's result (no side-effecting or unknown tool call in that
//     span); otherwise ABSTAIN STATE_MAY_HAVE_CHANGED: "git status" clean
//     before and after an edit is two observations, not one. Unknown tools
//     are judged as state but each of their calls is itself a possible
//     change, so they never get L0: ABSTAIN UNKNOWN_DETERMINISM (a policy
//     override of the tool's class lifts this).
//  6. Side-effecting tools: never, every call is itself a change: ABSTAIN
//     STATE_MAY_HAVE_CHANGED.
//
// Which copy stays follows eligibility.keep_copy (see keepCopy): "first"
// (default) prunes N with the earliest copy of the run still in context as
// survivor, "last" prunes O with N as survivor. The survivor gets KEEP
// SURVIVING_COPY.
//
// Same call, different output is never L0: the older gets ABSTAIN
// SAME_CALL_DIFFERENT_OUTPUT (unless another rung proves it redundant). When
// the two differing outputs are content reads of one file range with no
// write recorded between, the file evidently changed outside the log: the
// core records an inferred change of that path, so no later rung treats the
// two as one version (unless the importer declared equal source versions or
// content hashes: then the difference is rendering, and L1 decides).
func (c *Core) l0(n *item) {
	cl := n.call
	run := runOf(c.l0Runs, cl.key)
	prev := run.latest
	run.latest = n
	if prev == nil || prev.gone {
		run.first = n
		return
	}
	pc := prev.call
	if prev.hash != n.hash || n.hash == "" {
		run.first = n
		sameDeclared := pc.srcVersion != "" && pc.srcVersion == cl.srcVersion || pc.srcHash != "" && pc.srcHash == cl.srcHash
		if !sameDeclared && cl.readPath != "" && pc.readPath == cl.readPath && pc.stable && cl.stable && pc.chgAtResult == cl.chgAtResult {
			c.inferred[cl.readPath] = c.causeIdx
			cl.chgAtResult = c.causeIdx
		}
		if prev.slot(sL0) == nil {
			c.setVerdict(prev, sL0, c.withEvidence(verdict{decision: events.Abstain, reason: events.ReasonDifferentOutput},
				events.Evidence{Kind: "canonical_args", Item: n.id, Hash: c.canonHash(cl.canon), Value: trunc(cl.canon, 200)},
				events.Evidence{Kind: "content_hash", Item: n.id, Hash: n.hash, Detail: "newer output of the same call differs from " + prev.hash},
			))
		}
		return
	}
	if ok, reason := c.l0Allowed(pc, cl); !ok {
		run.first = n
		if prev.slot(sL0) == nil {
			c.setVerdict(prev, sL0, c.withEvidence(verdict{decision: events.Abstain, reason: reason},
				events.Evidence{Kind: "content_hash", Item: n.id, Hash: n.hash},
				events.Evidence{Kind: "determinism", Value: string(cl.class), Detail: l0Refusal(pc, cl)},
			))
		}
		return
	}
	victim, survivor, kc := c.keepCopy(prev, n, run.first, events.L0)
	if survivor == n && c.el.KeepCopy == "first" {
		run.first = n // the fallback: the newest copy starts the run
	}
	c.setVerdict(victim, sL0, c.runVerdict(run, verdict{
		decision: events.Prune, rung: events.L0, reason: events.ReasonDuplicateOutput,
		survivor: survivor,
	},
		events.Evidence{Kind: "canonical_args", Item: survivor.id, Hash: c.canonHash(cl.canon), Value: trunc(cl.canon, 200)},
		events.Evidence{Kind: "content_hash", Item: survivor.id, Hash: n.hash},
		events.Evidence{Kind: "determinism", Value: string(cl.class)},
		kc,
	))
}

// l0Allowed applies the determinism rule of L0 to two identical outputs of
// one call (o older, n newer): whether they are one observation, else the
// reason (l0Refusal says why, built only when a verdict needs it).
func (c *Core) l0Allowed(o, n *call) (bool, events.Reason) {
	switch toolspec.MaxClass(o.class, n.class) {
	case events.DeterminismPure, events.DeterminismVersioned:
		return true, ""
	case events.DeterminismSideEffect:
		return false, events.ReasonStateChanged
	}
	if o.sideAtCall == n.sideAtResult {
		return true, ""
	}
	if !o.known || !n.known {
		return false, events.ReasonUnknownTool
	}
	return false, events.ReasonStateChanged
}

// l0Refusal is the detail of l0Allowed's refusal of o and n.
func l0Refusal(o, n *call) string {
	if toolspec.MaxClass(o.class, n.class) == events.DeterminismSideEffect {
		return "side-effecting tool: each call is itself a state change"
	}
	return "state-dependent tool: a state change (fact " + strconv.Itoa(n.sideAtResult) + ") is recorded or possible between the copies"
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
