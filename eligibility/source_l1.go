package eligibility

import (
	"github.com/prunesched/prunesched/events"
)

// L1, same immutable or versioned source. Two observations with the same
// source identity — the same file path (normalised, relative to the session
// cwd) and the same line range, or the same URL — that are not already an L0
// pair are one observation when one of these proofs holds between the newer
// and the latest earlier one (the copies of one version form a run; which
// copy stays follows keep_copy, see keepCopy):
//
//  1. content hash: both carry Source.ContentHash and the hashes are equal
//     (the importer hashed the source content: proof regardless of class or
//     writes between);
//  2. source version: both carry Source.Version, the versions are equal, and
//     no write of the path is recorded or possible between them (a version
//     such as a commit id does not cover uncommitted edits);
//  3. identical output of a versioned-by-source read (both calls versioned)
//     with no write of the path recorded or possible between them, both
//     observations stable (no write between each call and its result).
//
// Ranges are part of the identity: whole-file reads compare across tools
// (Read, cat, str_replace_editor view); partial ranges only between reads of
// one tool, since tools count lines differently. Same call with different
// output and equal versions (a rendering difference such as an appended
// reminder) is L1, not L0. Nothing else is L1; a URL is L1 only by content
// hash (rule 1).
//
// src is n's source identity (the zero key: none).
func (c *Core) l1(n *item, src srcKey) {
	cl := n.call
	if src.kind == 0 {
		return
	}
	run := runOf(c.srcRuns, src)
	prev := run.latest
	run.latest = n
	if prev == nil || prev.gone {
		run.first = n
		return
	}
	pc := prev.call
	if pc.key == cl.key && prev.hash == n.hash {
		return // an L0 pair: the run goes on
	}
	var ev events.Evidence
	source := ""
	switch {
	case pc.srcHash != "" && pc.srcHash == cl.srcHash:
		ev = events.Evidence{Kind: "source_content_hash", Item: n.id, Hash: cl.srcHash, Value: sourceName(cl)}
		source = sourceName(cl) + "@" + cl.srcHash
	case pc.srcVersion != "" && pc.srcVersion == cl.srcVersion && c.sameVersion(pc, cl):
		ev = events.Evidence{Kind: "source_version", Item: n.id, Value: sourceName(cl) + "@" + cl.srcVersion, Detail: "no write of the path recorded between"}
		source = sourceName(cl) + "@" + cl.srcVersion
	case prev.hash == n.hash && prev.hash != "" && pc.class == events.DeterminismVersioned && cl.class == events.DeterminismVersioned && c.sameVersion(pc, cl):
		ev = events.Evidence{Kind: "content_hash", Item: n.id, Hash: n.hash, Value: sourceName(cl), Detail: "identical output of a versioned read, no write of the path recorded between"}
	default:
		run.first = n // a new version: a new run
		return
	}
	victim, survivor, kc := c.keepCopy(prev, n, run.first, events.L1)
	if survivor == n {
		run.first = n
	}
	ev.Item = survivor.id
	c.setVerdict(victim, sL1, c.runVerdict(run, verdict{
		decision: events.Prune, rung: events.L1, reason: events.ReasonSameSource,
		survivor: survivor, source: source,
	}, ev, events.Evidence{Kind: "source_range", Value: cl.rng.String()}, kc))
}

// sameVersion reports whether two content reads of one path provably saw
// one version: both stable and no write of the path recorded or possible
// between them.
func (c *Core) sameVersion(o, n *call) bool {
	return o.readPath != "" && o.readPath == n.readPath && o.stable && n.stable && o.chgAtResult == n.chgAtResult
}

func sourceName(cl *call) string {
	if cl.readPath != "" {
		return cl.readPath
	}
	return cl.url
}
