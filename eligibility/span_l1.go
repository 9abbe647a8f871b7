package eligibility

import (
	"hash/fnv"
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/placeholder"
)

// spanProposal is an L1 span proposal: the runs of a read rendered as
// references to an earlier read, and what they save in all.
type spanProposal struct {
	spans []placeholder.Span
	net   int
}

// maxSpanCandidates bounds the positions of one line hash tried as the
// start of a run (blank lines and braces repeat), so matching stays
// linear in practice.
const maxSpanCandidates = 16

// l1Span is L1 span (opt-in: eligibility.span_refs), reason
// SPAN_REFERENCE. A content read n of a versioned source whose lines
// repeat a contiguous run of at least span_min_lines lines of an earlier
// read o of the same source version — o still in context and not pruned,
// the version proven as L1 proves it (equal source content hashes, or one
// path read with no write recorded or possible between, see sameVersion) —
// is rendered with each such run replaced by one reference line naming o,
// both line ranges and the sha256 of the run (placeholder.RenderSpan);
// the rest of n stays verbatim. Lines are compared by their FNV-64a
// hashes and the run's sha256 is of n's own lines; projections checks it
// before splicing.
//
// Of the earlier reads of the path the one whose runs save most is
// referenced (the earliest on a tie), and only runs that save tokens
// (placeholder.SpanSaving > 0) are kept. The proposal ranks last: a whole
// removal (L0 to L4) wins over it. o is the proposal's survivor, so when
// o is pruned or leaves the context the proposal is refused
// (UNIQUE_EVIDENCE) and n is rendered whole again.
func (c *Core) l1Span(n *item, p *events.ToolResult) {
	cl := n.call
	if cl.readPath == "" || cl.class != events.DeterminismVersioned || n.errored {
		return
	}
	text, ok := c.outputText(p)
	if !ok {
		return
	}
	lines := strings.Split(text, "\n")
	cl.lines = hashLines(lines)
	min := c.el.SpanMin()
	if len(lines) < min || wholeCopy(n) {
		return
	}
	var best *spanProposal
	var surv *item
	for _, o := range c.readsByPath[cl.readPath] {
		oc := o.call
		if o == n || o.gone || o.curPrune || o.errored || oc == nil || oc.lines == nil {
			continue
		}
		if !(oc.srcHash != "" && oc.srcHash == cl.srcHash) && !c.sameVersion(oc, cl) {
			continue
		}
		sp := &spanProposal{}
		for _, r := range matchRuns(cl.lines, oc.lines, min) {
			s := placeholder.Span{
				From: r.i + 1, To: r.i + r.n, Item: placeholder.Handle(int(o.idx)),
				SrcFrom: r.j + 1, SrcTo: r.j + r.n,
			}
			run := lines[r.i : r.i+r.n]
			s.Hash = placeholder.RunHash(run)
			if save := placeholder.SpanSaving(s, run); save > 0 {
				sp.spans = append(sp.spans, s)
				sp.net += save
			}
		}
		if sp.net > 0 && (best == nil || sp.net > best.net) {
			best, surv = sp, o
		}
	}
	if best == nil {
		return
	}
	ev := make([]events.Evidence, 0, len(best.spans))
	for _, s := range best.spans {
		ev = append(ev, events.Evidence{Kind: placeholder.SpanEvidenceKind, Item: surv.id, Hash: s.Hash, Value: placeholder.SpanRanges(s)})
	}
	source := ""
	switch {
	case cl.srcHash != "":
		source = cl.readPath + "@" + cl.srcHash
	case cl.srcVersion != "":
		source = cl.readPath + "@" + cl.srcVersion
	}
	c.setVerdict(n, sSpan, &verdict{
		decision: events.Prune, rung: events.L1, reason: events.ReasonSpanReference,
		survivor: surv, source: source, evidence: ev, span: best,
	})
}

// wholeCopy reports whether a rung already proposes removing n whole as a
// copy (L0 or L1): then no span is needed.
func wholeCopy(n *item) bool {
	for _, s := range [...]int{sL0, sL1} {
		if v := n.v[s]; v != nil && v.decision == events.Prune {
			return true
		}
	}
	return false
}

// outputText is a result's output: inline, or fetched by content address
// through SetContent's getter.
func (c *Core) outputText(p *events.ToolResult) (string, bool) {
	switch {
	case p.Output != nil:
		return *p.Output, true
	case p.OutputRef != nil && c.content != nil:
		b, err := c.content(p.OutputRef.Hash)
		if err != nil {
			return "", false
		}
		return string(b), true
	}
	return "", false
}

func hashLines(lines []string) []uint64 {
	out := make([]uint64, len(lines))
	h := fnv.New64a()
	for i, l := range lines {
		h.Reset()
		h.Write([]byte(l))
		out[i] = h.Sum64()
	}
	return out
}

// lineRun is a run of n lines at line i (0-based) of the new read and line j
// of the earlier one.
type lineRun struct{ i, j, n int }

// matchRuns finds, greedily from the top of the new read, the longest run
// of at least min lines starting at each line that repeats a contiguous
// run of the old read; runs do not overlap. Deterministic: candidates are
// tried in increasing position, the first longest wins.
func matchRuns(nw, old []uint64, min int) []lineRun {
	pos := make(map[uint64][]int, len(old))
	for j, h := range old {
		if l := pos[h]; len(l) < maxSpanCandidates {
			pos[h] = append(l, j)
		}
	}
	var out []lineRun
	for i := 0; i+min <= len(nw); {
		bestN, bestJ := 0, 0
		for _, j := range pos[nw[i]] {
			k := 0
			for i+k < len(nw) && j+k < len(old) && nw[i+k] == old[j+k] {
				k++
			}
			if k > bestN {
				bestN, bestJ = k, j
			}
		}
		if bestN >= min {
			out = append(out, lineRun{i: i, j: bestJ, n: bestN})
			i += bestN
			continue
		}
		i++
	}
	return out
}
