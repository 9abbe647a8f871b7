package eligibility

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unsafe"

	"github.com/cespare/xxhash/v2"

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
// compared by their 64-bit hashes (lineHasher); the run's sha256 is of
// n's own lines and projections checks it before splicing. Recovery
// returns n whole.
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
	if p.Output == nil && (p.OutputRef == nil || p.OutputRef.Bytes < min || c.content == nil) {
		return // nothing readOutput could read: spare the hasher
	}
	// The output is read as a stream, never held whole: once to hash its
	// lines, and again, only when runs match, for the runs' hashes and
	// tokens.
	lh := lineHasher{size: outputSize(p)}
	if !c.readOutput(p, lh.readFrom) || lh.n < min {
		return
	}
	cl.lines, cl.nums = lh.result()
	// Indexed later (IndexSpans), in order: only a later output's
	// candidates read the index, never n's own or a decision.
	defer func() { c.unindexed = append(c.unindexed, n) }()
	if wholeCopy(n) {
		return
	}
	var cands []*spanCand
	var shared map[uint64]struct{}
	for _, o := range c.spanCandidates(n) {
		if shared == nil {
			shared = make(map[uint64]struct{}, len(cl.lines))
			for _, h := range cl.lines {
				shared[h] = struct{}{}
			}
		}
		oc := o.call
		sc := &spanCand{o: o}
		for _, r := range matchRuns(cl.lines, oc.lines, cl.nums, oc.nums, min, shared) {
			s := placeholder.Span{
				From: r.i + 1, To: r.i + r.n, Item: c.handle(o),
				SrcFrom: r.j + 1, SrcTo: r.j + r.n,
			}
			if cl.nums != nil && cl.nums[r.i] > 0 && cl.nums[r.i] != oc.nums[r.j] {
				s.Renumbered = int(cl.nums[r.i])
			}
			sc.runs = append(sc.runs, s)
		}
		if len(sc.runs) > 0 {
			cands = append(cands, sc)
		}
	}
	if len(cands) == 0 || !c.readOutput(p, func(r io.Reader) error { return measureRuns(r, lh.size, cands) }) {
		return
	}
	var best *spanProposal
	var surv *item
	for _, sc := range cands {
		sp := &spanProposal{}
		for i, s := range sc.runs {
			if save := placeholder.SpanSavingOf(s, sc.tokens[i]); save > 0 {
				sp.spans = append(sp.spans, s)
				sp.net += save
			}
		}
		if o := sc.o; sp.net > 0 && (best == nil || sp.net > best.net || sp.net == best.net && o.idx < surv.idx) {
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
		if v := o.slot(s); v != nil && v.decision == events.Prune && v.survivor == n {
			return true
		}
	}
	return false
}

// IndexSpans adds the lines of the outputs observed since the last call
// to the span-reference index. Observing the next output does it first
// anyway; a caller with idle time after a request is answered (the proxy,
// after forwarding) calls it so that the next request does not pay it.
// It changes no mark and no decision.
func (c *Core) IndexSpans() {
	for _, n := range c.unindexed {
		c.indexSpanLines(n)
	}
	clear(c.unindexed)
	c.unindexed = c.unindexed[:0]
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
	c.IndexSpans()
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
		if v := n.slot(s); v != nil && v.decision == events.Prune {
			return true
		}
	}
	return false
}

// outputText is a result's output: inline, or fetched whole by content
// address through the content getter.
func (c *Core) outputText(p *events.ToolResult) (string, bool) {
	if p.Output != nil {
		return *p.Output, true
	}
	var b strings.Builder
	if !c.readOutput(p, func(r io.Reader) error { _, err := io.Copy(&b, r); return err }) {
		return "", false
	}
	return b.String(), true
}

// readOutput calls read with a result's output: inline, or streamed by
// content address through the content getter (SetContent,
// SetContentReader). It reports false when there is no output to read or
// reading it failed; the first failure is kept for ContentErr.
func (c *Core) readOutput(p *events.ToolResult, read func(io.Reader) error) bool {
	var err error
	switch {
	case p.Output != nil:
		err = read(strings.NewReader(*p.Output))
	case p.OutputRef != nil && c.content != nil:
		var rc io.ReadCloser
		if rc, err = c.content(p.OutputRef.Hash); err == nil {
			err = read(rc)
			if cerr := rc.Close(); err == nil && cerr != nil {
				err = cerr
			}
			if err != nil {
				err = fmt.Errorf("read output %s: %w", p.OutputRef.Hash, err)
			}
		}
	default:
		return false
	}
	if err != nil {
		if c.contentErr == nil {
			c.contentErr = err
		}
		return false
	}
	return true
}

// spanCand is an earlier output o with the runs of it a new output
// repeats and, once measureRuns has read the new output, each run's
// tokens (and its Hash set).
type spanCand struct {
	o      *item
	runs   []placeholder.Span
	tokens []int
}

// readBuf is the largest buffer an output is read through; a smaller
// output is read through a buffer of its size (bufSize), at least
// minReadBuf.
const (
	readBuf    = 64 << 10
	minReadBuf = 512
)

// outputSize is the size of a result's output in bytes (0: unknown).
func outputSize(p *events.ToolResult) int {
	switch {
	case p.Output != nil:
		return len(*p.Output)
	case p.OutputRef != nil:
		return p.OutputRef.Bytes
	}
	return 0
}

// bufSize is the read buffer for an output of size bytes (0: unknown):
// the whole output and one byte more (so the read that finds its end
// needs no second buffer), between minReadBuf and readBuf.
func bufSize(size int) int {
	if size <= 0 {
		return readBuf
	}
	return min(max(size+1, minReadBuf), readBuf)
}

// errRunsDone ends measureRuns' read past the last run.
var errRunsDone = errors.New("runs measured")

// measureRuns reads an output's lines from r, holding one line of a run
// at a time, and sets each candidate run's Hash (placeholder.RunHash) and
// tokens (placeholder.LineTokens added up, for SpanSavingOf): what
// SpanSaving needs, without the output held whole. size is the output's
// size in bytes (0: unknown), for the read buffer.
func measureRuns(r io.Reader, size int, cands []*spanCand) error {
	last := 0
	next := make([]int, len(cands)) // each candidate's first run not yet ended
	hs := make([]placeholder.RunHasher, len(cands))
	for _, sc := range cands {
		sc.tokens = make([]int, len(sc.runs))
		last = max(last, sc.runs[len(sc.runs)-1].To)
	}
	inRun := func(k int) bool {
		for ci, sc := range cands {
			if j := next[ci]; j < len(sc.runs) && sc.runs[j].From <= k {
				return true
			}
		}
		return false
	}
	err := eachLine(r, size, inRun, func(k int, line string) error {
		tok := -1
		for ci, sc := range cands {
			j := next[ci]
			if j >= len(sc.runs) || sc.runs[j].From > k {
				continue
			}
			if tok < 0 {
				tok = placeholder.LineTokens(line)
			}
			hs[ci].Line(line)
			sc.tokens[j] += tok
			if sc.runs[j].To == k {
				sc.runs[j].Hash = hs[ci].Sum()
				hs[ci] = placeholder.RunHasher{}
				next[ci]++
			}
		}
		if k >= last {
			return errRunsDone
		}
		return nil
	})
	switch {
	case err == errRunsDone:
		return nil
	case err == nil:
		return fmt.Errorf("span references: output ended before line %d", last)
	}
	return err
}

// eachLine reads r's lines, split at "\n" as strings.Split splits them,
// and calls fn with line k (from 1) when need(k), holding that line only
// then; the other lines are skipped, never held. fn's error ends the
// read and is returned. size is r's size in bytes (0: unknown), for the
// read buffer.
func eachLine(r io.Reader, size int, need func(k int) bool, fn func(k int, line string) error) error {
	br := bufio.NewReaderSize(r, bufSize(size))
	var acc []byte
	for k := 1; ; k++ {
		want := need(k)
		acc = acc[:0]
		for {
			frag, err := br.ReadSlice('\n')
			if want {
				acc = append(acc, frag...)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF {
				if want {
					return fn(k, string(acc))
				}
				return nil
			}
			if err != nil {
				return err
			}
			break
		}
		if want {
			if err := fn(k, string(acc[:len(acc)-1])); err != nil {
				return err
			}
		}
	}
}

// lineHasher hashes an output's lines for span matching from its bytes,
// written in pieces of any size: each line's 64-bit xxHash (XXH64, seed
// 0), except that a numbered read's line (placeholder.LineNumber) is
// hashed without its number, which nums holds (0 for a line without one;
// nums is nil when no line has one), so a run that moved, as after an
// edit above it, still matches and is rendered renumbered (lineHash
// says how the two kinds of line are told apart). Only equality of the
// hashes matters: they live in the core's memory for its matching, and
// are never written anywhere or compared across processes.
//
// A line that ends in the piece it starts in, as every line of an output
// handed over whole does, is found with strings.IndexByte and hashed in
// one call (placeholder.NumberedLine, then xxhash.Sum64String). A line
// that goes on into the next piece is decided a byte at a time until its
// number's prefix (spaces, at most eight digits, a separator) is settled,
// then fed to a streaming digest, which gives the one call's hash: no
// line is held. The hashes are kept in blocks as they come (doubling from
// firstBlock lines, so a short output allocates little), and copied into
// one slice of the exact size at the end (result): what is allocated is
// at most about three times the hashes, not the five times of a slice
// grown by append. An output handed over whole has its lines counted
// first and takes one block of the exact size, handed over as it is.
type lineHasher struct {
	d      xxhash.Digest // a line cut by a piece's end, once decided
	phase  uint8
	spaces int      // leading spaces while undecided
	pre    [12]byte // digits, then separator bytes, while undecided
	digits int      // digits in pre
	npre   int      // bytes in pre
	sep    string   // the separator being matched (lhSep)
	num    int32    // the digits' value; the line's number once numbered

	size int // the output's size in bytes, for the read buffer (0: unknown)

	n        int        // lines ended
	numbered bool       // a line was numbered
	blocks   [][]uint64 // full blocks of hashes, then cur
	nblocks  [][]int32  // the same for numbers
	cur      []uint64
	ncur     []int32
}

// hashBlock is the most lines a block of lineHasher's holds; the first
// holds firstBlock.
const (
	hashBlock  = 4096
	firstBlock = 64
)

// lineHasher phases: a new line (nothing of it seen), then, for a line
// a piece's end cuts, undecided (leading spaces, digits, separator), then
// decided (numbered: the digest has the rest; plain: the line as is).
const (
	lhStart uint8 = iota
	lhSpaces
	lhDigits
	lhSep
	lhRest
	lhPlain
)

// lineHash is a line's hash from the XXH64 of its text: for a plain line
// (sep == "") the line's, with the lowest bit cleared; for a numbered
// line the rest's after the separator, the separator's bytes xored in
// above the lowest bit and the lowest bit set. So a numbered line never
// equals a plain one, two numbered lines with the same rest are equal
// whatever their numbers, and never with different separators.
func lineHash(h uint64, sep string) uint64 {
	if sep == "" {
		return h &^ 1
	}
	var s uint64
	for i := 0; i < len(sep); i++ { // at most three bytes
		s = s<<8 | uint64(sep[i])
	}
	return (h ^ s<<1) | 1
}

// readFrom hashes the lines of everything r holds, ending the last line
// at its end (an empty last line after a final "\n", as strings.Split).
// A reader that can write itself out (a strings.Reader, a bytes.Reader:
// an output held in memory) hands its bytes over without a copy into a
// read buffer.
func (lh *lineHasher) readFrom(r io.Reader) error {
	if wt, ok := r.(io.WriterTo); ok {
		if _, err := wt.WriteTo(lhWriter{lh}); err != nil {
			return err
		}
		lh.end()
		return nil
	}
	buf := make([]byte, bufSize(lh.size))
	for {
		n, err := r.Read(buf)
		lh.write(buf[:n])
		if err == io.EOF {
			lh.end()
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// spaceRun is a run of spaces to hash leading spaces from.
var spaceRun = [64]byte{' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '}

// lhWriter writes an output's bytes to a lineHasher, as an io.Writer
// and an io.StringWriter (so that io.WriteString hands a string over
// without converting it).
type lhWriter struct{ lh *lineHasher }

func (w lhWriter) Write(b []byte) (int, error) {
	w.lh.write(b)
	return len(b), nil
}

func (w lhWriter) WriteString(s string) (int, error) {
	w.lh.writeString(s)
	return len(s), nil
}

// write hashes the next bytes of the output. They are read as a string
// where they lie, not copied: writeString keeps none of them (the
// digest and pre copy what they keep) and b is not changed during the
// call.
func (lh *lineHasher) write(b []byte) {
	lh.writeString(unsafe.String(unsafe.SliceData(b), len(b)))
}

// writeString hashes the next bytes of the output.
func (lh *lineHasher) writeString(s string) {
	if lh.cur == nil && lh.size > 0 && len(s) == lh.size {
		// The whole output in one piece (held in memory): its lines are
		// counted first, so the hashes take one block of the exact size
		// and result hands it over without a copy.
		k := strings.Count(s, "\n") + 1
		lh.cur, lh.ncur = make([]uint64, 0, k), make([]int32, 0, k)
	}
	for len(s) > 0 {
		switch {
		case lh.phase == lhStart:
			if i := strings.IndexByte(s, '\n'); i >= 0 {
				lh.line(s[:i])
				s = s[i+1:]
				continue
			}
			// The line goes on in the next piece: decided a byte at a
			// time, below.
			lh.d.Reset()
			lh.phase = lhSpaces
		case lh.phase >= lhRest:
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				_, _ = lh.d.WriteString(s)
				return
			}
			_, _ = lh.d.WriteString(s[:i])
			lh.end()
			s = s[i+1:]
			continue
		}
		c := s[0]
		s = s[1:]
		if c == '\n' {
			lh.end()
			continue
		}
		switch lh.phase {
		case lhSpaces:
			switch {
			case c == ' ':
				lh.spaces++
			case c >= '0' && c <= '9':
				lh.pre[0], lh.npre, lh.digits, lh.phase = c, 1, 1, lhDigits
				lh.num = int32(c - '0')
			default:
				lh.plain(c)
			}
		case lhDigits:
			switch {
			case c >= '0' && c <= '9' && lh.digits < 8:
				lh.pre[lh.npre] = c
				lh.npre++
				lh.digits++
				lh.num = lh.num*10 + int32(c-'0')
			case c == '\t':
				lh.sep = "\t"
				lh.sepByte(c)
			case c == ':':
				lh.sep = ": "
				lh.sepByte(c)
			case c == '|':
				lh.sep = "| "
				lh.sepByte(c)
			case c == "→"[0]:
				lh.sep = "→"
				lh.sepByte(c)
			default: // a ninth digit, or no separator
				lh.plain(c)
			}
		case lhSep:
			lh.sepByte(c)
		}
	}
}

// line hashes a whole line (without its "\n"), held in one piece.
func (lh *lineHasher) line(s string) {
	if num, sep, rest, ok := placeholder.NumberedLine(s); ok {
		lh.push(lineHash(xxhash.Sum64String(rest), sep), int32(num))
		return
	}
	lh.push(lineHash(xxhash.Sum64String(s), ""), 0)
}

// sepByte matches c against the separator's next byte.
func (lh *lineHasher) sepByte(c byte) {
	at := lh.npre - lh.digits
	if c != lh.sep[at] {
		lh.plain(c)
		return
	}
	lh.pre[lh.npre] = c
	lh.npre++
	lh.phase = lhSep
	if at+1 < len(lh.sep) {
		return
	}
	if lh.num < 1 {
		lh.phase, lh.num = lhPlain, 0
		lh.prefix()
		return
	}
	lh.phase = lhRest // numbered: the digest takes the rest
}

// plain decides the line is not numbered: its prefix so far, then c, are
// hashed as they are.
func (lh *lineHasher) plain(c byte) {
	lh.phase, lh.num = lhPlain, 0
	lh.prefix()
	lh.pre[0] = c
	_, _ = lh.d.Write(lh.pre[:1])
}

// prefix hashes the undecided prefix as it is: the spaces, then pre.
func (lh *lineHasher) prefix() {
	for n := lh.spaces; n > 0; {
		k := min(n, len(spaceRun))
		_, _ = lh.d.Write(spaceRun[:k])
		n -= k
	}
	_, _ = lh.d.Write(lh.pre[:lh.npre])
}

// end ends the line: a line cut by a piece's end, from the digest, or an
// empty line (nothing of it seen).
func (lh *lineHasher) end() {
	switch lh.phase {
	case lhStart:
		lh.push(lineHash(xxhash.Sum64String(""), ""), 0)
		return
	case lhRest:
		lh.push(lineHash(lh.d.Sum64(), lh.sep), lh.num)
	default:
		if lh.phase < lhRest {
			lh.prefix()
		}
		lh.push(lineHash(lh.d.Sum64(), ""), 0)
	}
	lh.phase, lh.spaces, lh.npre, lh.digits, lh.num = lhStart, 0, 0, 0, 0
}

// push adds a line's hash and number (0: not numbered).
func (lh *lineHasher) push(h uint64, num int32) {
	if len(lh.cur) == cap(lh.cur) {
		// Blocks double from firstBlock up to hashBlock lines: a short
		// output allocates little.
		size := firstBlock
		if lh.cur != nil {
			lh.blocks, lh.nblocks = append(lh.blocks, lh.cur), append(lh.nblocks, lh.ncur)
			size = min(2*cap(lh.cur), hashBlock)
		}
		lh.cur, lh.ncur = make([]uint64, 0, size), make([]int32, 0, size)
	}
	lh.cur = append(lh.cur, h)
	lh.ncur = append(lh.ncur, num)
	lh.numbered = lh.numbered || num > 0
	lh.n++
}

// result returns the lines' hashes and numbers (nil when no line is
// numbered).
func (lh *lineHasher) result() (hashes []uint64, nums []int32) {
	if len(lh.blocks) == 0 && len(lh.cur) == cap(lh.cur) {
		// One block of the exact size (writeString): handed over.
		if lh.numbered {
			nums = lh.ncur
		}
		return lh.cur, nums
	}
	hashes = make([]uint64, 0, lh.n)
	for _, b := range lh.blocks {
		hashes = append(hashes, b...)
	}
	hashes = append(hashes, lh.cur...)
	if lh.numbered {
		nums = make([]int32, 0, lh.n)
		for _, b := range lh.nblocks {
			nums = append(nums, b...)
		}
		nums = append(nums, lh.ncur...)
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
