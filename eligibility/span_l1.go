package eligibility

import (
	"cmp"
	"hash/fnv"
	"slices"
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

// maxSpanCandidates bounds the items one line hash lists in the span index
// (blank lines and braces repeat), so indexing and matching stay linear in
// practice.
const maxSpanCandidates = 16

// maxSpanSurvivors bounds the earlier outputs a new output is matched
// against run by run: those sharing the most lines with it.
const maxSpanSurvivors = 8

// l1Span is L1 span (eligibility.span_refs, on by default), reason
// SPAN_REFERENCE. A successful tool output n whose lines repeat a
// contiguous run of at least span_min_lines lines of an earlier successful
// tool output o still in context and not pruned is rendered with each
// such run replaced by one reference line naming o, both line ranges and
// the sha256 of the run (placeholder.RenderSpan); the rest of n stays
// verbatim.
//
// The proof is the content itself, not a source version: each run is the
// same bytes, line for line, as the lines of o it names, so the reference
// states a fact about text that is true whatever happened to the source
// in between (a re-read after an edit repeats the lines the edit did not
// touch; a re-run repeats the lines that did not change). Lines are
// compared by their FNV-64a hashes; the run's sha256 is of n's own lines
// and projections checks it before splicing. Recovery returns n whole.
//
// Of the earlier outputs sharing lines with n, the one whose runs save
// most is referenced (the earliest on a tie), and only runs that save
// tokens (placeholder.SpanSaving > 0) are kept. The proposal ranks last: a
// whole removal (L0 to L4) wins over it. o is the proposal's survivor, so
// when o is pruned or leaves the context the proposal is refused
// (UNIQUE_EVIDENCE) and n is rendered whole again.
func (c *Core) l1Span(n *item, p *events.ToolResult) {
	cl := n.call
	if n.errored {
		return
	}
	min := c.el.SpanMin()
	if p.Output == nil && (p.OutputRef == nil || p.OutputRef.Bytes < min) {
		return
	}
	text, ok := c.outputText(p)
	if !ok {
		return
	}
	lines := strings.Split(text, "\n")
	if len(lines) < min {
		return
	}
	cl.lines, cl.nums = hashLines(lines)
	defer c.indexSpanLines(n)
	if wholeCopy(n) {
		return
	}
	var best *spanProposal
	var surv *item
	var shared map[uint64]struct{}
	for _, o := range c.spanCandidates(n) {
		if shared == nil {
			shared = make(map[uint64]struct{}, len(cl.lines))
			for _, h := range cl.lines {
				shared[h] = struct{}{}
			}
		}
		oc := o.call
		sp := &spanProposal{}
		for _, r := range matchRuns(cl.lines, oc.lines, cl.nums, oc.nums, min, shared) {
			s := placeholder.Span{
				From: r.i + 1, To: r.i + r.n, Item: c.handle(o),
				SrcFrom: r.j + 1, SrcTo: r.j + r.n,
			}
			if cl.nums != nil && cl.nums[r.i] > 0 && cl.nums[r.i] != oc.nums[r.j] {
				s.Renumbered = int(cl.nums[r.i])
			}
			run := lines[r.i : r.i+r.n]
			s.Hash = placeholder.RunHash(run)
			if save := placeholder.SpanSaving(s, run); save > 0 {
				sp.spans = append(sp.spans, s)
				sp.net += save
			}
		}
		if sp.net > 0 && (best == nil || sp.net > best.net || sp.net == best.net && o.idx < surv.idx) {
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
	sc := surv.call
	source := sourceName(sc)
	switch {
	case source == "":
		source = sc.tool
	case sc.srcHash != "":
		source += "@" + sc.srcHash
	case sc.srcVersion != "":
		source += "@" + sc.srcVersion
	}
	c.setVerdict(n, sSpan, &verdict{
		decision: events.Prune, rung: events.L1, reason: events.ReasonSpanReference,
		survivor: surv, source: source, evidence: ev, span: best,
	})
}

// copyOf reports whether a rung proposes removing o whole because of n: as
// a copy of n (L0 or L1 under keep_copy last) or as superseded by n (L2).
// n must then stay whole, the observation that survives, and cannot refer
// to o.
func copyOf(o, n *item) bool {
	for _, s := range [...]int{sL0, sL1, sL2} {
		if v := o.v[s]; v != nil && v.decision == events.Prune && v.survivor == n {
			return true
		}
	}
	return false
}

// indexSpanLines adds n's lines to the span index, each line hash listing
// at most maxSpanCandidates items (the earliest), each item once.
func (c *Core) indexSpanLines(n *item) {
	for _, h := range n.call.lines {
		l := c.spanIdx[h]
		if len(l) >= maxSpanCandidates || len(l) > 0 && l[len(l)-1] == n {
			continue
		}
		c.spanIdx[h] = append(l, n)
	}
}

// spanCandidates lists the earlier outputs that may hold runs of n: in
// context, not pruned, not errored, sharing lines with n; at most
// maxSpanSurvivors of them, those sharing the most lines first (the
// earliest on a tie). Deterministic.
func (c *Core) spanCandidates(n *item) []*item {
	hits := map[*item]int{}
	for _, h := range n.call.lines {
		for _, o := range c.spanIdx[h] {
			if o != n {
				hits[o]++
			}
		}
	}
	min := c.el.SpanMin()
	out := make([]*item, 0, len(hits))
	for o, k := range hits {
		if k < min || o.gone || o.curPrune || o.errored || o.call == nil || o.call.lines == nil || copyOf(o, n) {
			continue
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *item) int {
		if d := hits[b] - hits[a]; d != 0 {
			return d
		}
		return cmp.Compare(a.idx, b.idx)
	})
	if len(out) > maxSpanSurvivors {
		out = out[:maxSpanSurvivors]
	}
	return out
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
			if c.contentErr == nil {
				c.contentErr = err
			}
			return "", false
		}
		return string(b), true
	}
	return "", false
}

// hashLines hashes an output's lines for span matching. A numbered read's
// line (placeholder.LineNumber) is hashed without its number, which nums
// holds (0 for a line without one; nums is nil when no line has one), so
// a run that moved, as after an edit above it, still matches and is
// rendered renumbered.
func hashLines(lines []string) (hashes []uint64, nums []int32) {
	hashes = make([]uint64, len(lines))
	h := fnv.New64a()
	for i, l := range lines {
		h.Reset()
		if num, rest, ok := placeholder.LineNumber(l); ok {
			if nums == nil {
				nums = make([]int32, len(lines))
			}
			nums[i] = int32(num)
			h.Write([]byte{0})                                                     // numbered: never equal to an unnumbered line
			h.Write([]byte(strings.TrimLeft(l[:len(l)-len(rest)], " 0123456789"))) // the separator
			h.Write([]byte(rest))
		} else {
			h.Write([]byte(l))
		}
		hashes[i] = h.Sum64()
	}
	return hashes, nums
}

// lineRun is a run of n lines at line i (0-based) of the new read and line j
// of the earlier one.
type lineRun struct{ i, j, n int }

// numAt is line i's number, 0 when unnumbered.
func numAt(nums []int32, i int) int32 {
	if nums == nil {
		return 0
	}
	return nums[i]
}

// matchRuns finds, greedily from the top of the new output, the longest run
// of at least min lines starting at each line that repeats a contiguous
// run of the old one; runs do not overlap. Numbered lines match when their
// text does and their numbers keep one offset through the run, counting
// up by one (a moved block of a numbered read); unnumbered lines match
// only unnumbered ones. inNew is the set of nw's hashes. Deterministic:
// candidates are tried in increasing position, the first longest wins.
func matchRuns(nw, old []uint64, nwNums, oldNums []int32, min int, inNew map[uint64]struct{}) []lineRun {
	// Only old lines that the new output holds can start a run: the map
	// stays as small as what the two share.
	pos := make(map[uint64][]int)
	for j, h := range old {
		if _, ok := inNew[h]; !ok {
			continue
		}
		if l := pos[h]; len(l) < maxSpanCandidates {
			pos[h] = append(l, j)
		}
	}
	var out []lineRun
	for i := 0; i+min <= len(nw); {
		bestN, bestJ := 0, 0
		for _, j := range pos[nw[i]] {
			n0, o0 := numAt(nwNums, i), numAt(oldNums, j)
			k := 0
			for i+k < len(nw) && j+k < len(old) && nw[i+k] == old[j+k] {
				if n0 != 0 && (numAt(nwNums, i+k) != n0+int32(k) || numAt(oldNums, j+k) != o0+int32(k)) {
					break
				}
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
