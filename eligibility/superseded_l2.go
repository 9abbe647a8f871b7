package eligibility

import (
	"github.com/prunesched/prunesched/events"
)

// L2, superseded observation. Only content reads of one file (versioned
// class, with a path) are ever superseded, and only by a newer read N of the
// same path that is stable (no write of the path between its call and its
// result). An older read O of the path is superseded by N when:
//
//  1. after-edit: N reads the whole file (no offset/limit, not a window) and
//     a write naming the path (Edit/Write/apply_patch of it, or a shell side
//     effect naming it or a directory above it) is recorded after O's result:
//     N shows the file as it now is, all of it;
//  2. coverage at one version: O and N provably saw one version (both stable,
//     no write of the path recorded or possible between them) and N's range
//     strictly covers O's: N reads the whole file and O a part, or both are
//     ranges of the same tool and N's includes O's.
//
// Not superseded: two whole-file reads at one version (those are L0/L1 when
// the bytes or versions agree, and the "same file read twice, different
// output" trap otherwise); reads across an unscoped or inferred change
// without a recorded edit; windows and tail reads (their extent is unknown);
// test logs and every other state observation: a later run of the same test
// command is not provably a superset of an earlier log (the earlier failures
// may be the only record), so those stay as ABSTAIN SAME_CALL_DIFFERENT_OUTPUT
// from L0. The subsumption check is written into the certificate (evidence
// kind "subsumption").
//
// Plans are the one other superseded observation (l2Plan): a call of a plan
// tool whose contract is a full replacement (Claude Code TodoWrite, OpenCode
// todowrite, Codex update_plan, with the plan list present and not empty)
// supersedes the input and the output of the previous successful full plan
// call of the same tool. The latest plan is never superseded and stays
// protected as the active plan; a failed plan call replaces nothing; plan
// tools that change one task (TaskCreate, TaskUpdate) are not full plans.
func (c *Core) l2(n *item) {
	cl := n.call
	if cl.readPath == "" || cl.class != events.DeterminismVersioned {
		return
	}
	rs := c.readsByPath[cl.readPath]
	if rs == nil {
		rs = &reads{}
		c.readsByPath[cl.readPath] = rs
	}
	list := rs.list
	kept := list
	if cl.stable {
		// Filtered in place: each kept read is written at or before the
		// index it is read from, and only once one was dropped (a read
		// kept where it is needs no store, nor the store's write barrier).
		w := 0
		for i, r := range list {
			switch {
			case r.key == cl.key && r.hash == n.hash:
				// Identical to n: L0's business, never superseded (what
				// supersedes says first), compared without reaching o. A
				// listed read is never gone (a compaction empties the
				// lists; a result the host pruned is never listed).
			case r.it.gone:
				continue
			default:
				if detail, ok := c.supersedes(n, r.it); ok {
					c.setVerdict(r.it, sL2, c.withEvidence(verdict{
						decision: events.Prune, rung: events.L2, reason: events.ReasonSuperseded,
						survivor: n,
					}, events.Evidence{Kind: "subsumption", Item: n.id, Value: cl.readPath, Detail: detail}))
					continue
				}
			}
			if w != i {
				list[w] = r
			}
			w++
		}
		kept = list[:w]
	}
	kept = append(kept, readRef{it: n, key: cl.key, hash: n.hash})
	if len(kept) > maxReadsPerPath {
		n := copy(kept, kept[len(kept)-maxReadsPerPath:])
		clear(kept[n:])
		kept = kept[:n]
	}
	rs.list = kept
}

// readRef is a listed read (reads) with its call key and output hash, so
// that the common comparison, with an identical read, reaches neither the
// item nor its call.
type readRef struct {
	it        *item
	key, hash string
}

// supersedes applies the L2 rule to a newer read n and an older read o of one
// path, and returns the subsumption check in words.
func (c *Core) supersedes(n, o *item) (string, bool) {
	nc, oc := n.call, o.call
	if nc.key == oc.key && n.hash == o.hash {
		return "", false // identical: L0's business
	}
	if nc.srcHash != "" && nc.srcHash == oc.srcHash {
		return "", false // one source content: L1's business
	}
	if nc.rng.Full && nc.scopedAtRes > oc.scopedAtRes && nc.scopedAtRes > int(o.factIdx) {
		w := c.scopedWrite(nc.readPath)
		return "read " + nc.readPath + " lines " + nc.rng.String() + " (" + n.eventID + ") after the recorded edit " + w.ev +
			" covers read " + oc.readPath + " lines " + oc.rng.String() + " (" + o.eventID + ") from before it", true
	}
	if c.sameVersion(oc, nc) && !(nc.rng.Full && oc.rng.Full) && nc.rng != oc.rng && nc.rng.Covers(oc.rng, nc.tool == oc.tool) {
		return "read " + nc.readPath + " lines " + nc.rng.String() + " (" + n.eventID + ") covers read " +
			oc.readPath + " lines " + oc.rng.String() + " (" + o.eventID + ") at the same version: no write of the path recorded or possible between", true
	}
	return "", false
}

// l2Plan applies the plan rule for n, a successful full plan call: the
// previous successful full plan call of the same tool, input and output, is
// superseded by n's.
func (c *Core) l2Plan(n *call) {
	prev := c.lastPlan[n.tool]
	c.lastPlan[n.tool] = n
	if prev == nil || prev == n || n.in == nil {
		return
	}
	detail := n.tool + " replaces the whole plan: call " + prev.id + " (" + prev.in.eventID + ") is superseded by the full plan of call " +
		n.id + " (" + n.in.eventID + ")"
	for _, p := range [2][2]*item{{prev.in, n.in}, {prev.out, n.out}} {
		o, s := p[0], p[1]
		if o == nil || s == nil || o.gone || o.errored {
			continue
		}
		c.setVerdict(o, sL2, c.withEvidence(verdict{
			decision: events.Prune, rung: events.L2, reason: events.ReasonSuperseded,
			survivor: s,
		}, events.Evidence{Kind: "subsumption", Item: s.id, Value: n.tool, Detail: detail}))
	}
}
