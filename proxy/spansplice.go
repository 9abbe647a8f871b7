package proxy

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/prunesched/prunesched/internal/jsonplain"
	"github.com/prunesched/prunesched/placeholder"
	"github.com/prunesched/prunesched/projections"
)

// Span references (L1, partial prunes) are rendered from the client's own
// output at every request, since the client resends the conversation. The
// rule is projections.BundleItem.RenderSpans: the output with each run
// replaced by its reference line, or whole when the runs do not match.
// The slow way to follow it decodes the client's JSON string, splits and
// hashes its lines and quotes the result. The fast way (spanRuns) reads
// the JSON string as it is. quote writes a string a character at a time,
// so quote(RenderSpans(text)) is the client's bytes with each run's bytes
// replaced by its quoted reference line and, outside the runs, each
// escape or character the client wrote otherwise than quote does
// (\u003c for '<', \/, upper-case hex) replaced by quote's form. So
// the proxy replaces the runs' bytes in the body and copies nothing else
// (spanEdits), or, when the client wrote some character otherwise than
// quote, writes the value again in one pass over its escaped bytes
// (appendRendered); the body it forwards is byte for byte the slow
// way's. The runs are hashed once per item and client bytes:
// sessState.spans keeps the verdict and the runs' offsets, keyed by item
// and a fingerprint of the bytes and the spans. FuzzSpanRuns checks the
// fast way against the slow one.

// spanVerdict is what the proxy keeps of one span item between requests:
// for the client's value and the item's spans with fingerprint fp,
// whether the spans apply and, when the fast way read the value, where
// each run sits in it.
type spanVerdict struct {
	fp      uint64
	applies bool
	// fast is true when spanRuns read the value; at then holds, when
	// applies, each span's run as start and end offsets in the value (the
	// JSON string literal with its quotes), and fixes says whether the
	// value holds escapes quote writes otherwise (then the value is
	// written again, appendRendered; else only the runs are replaced).
	fast  bool
	fixes bool
	at    []int
}

// maxSpanVerdicts bounds a session's span verdicts: past it they are
// dropped and found again (a cache of the client's bytes, not state).
const maxSpanVerdicts = 1 << 13

// rememberSpan keeps item's verdict. Caller holds st.mu.
func (st *sessState) rememberSpan(item string, v spanVerdict) {
	if st.spans == nil || len(st.spans) >= maxSpanVerdicts {
		st.spans = make(map[string]spanVerdict)
	}
	st.spans[item] = v
}

// spanFingerprint identifies a client's value and the spans applied to
// it: the verdict on them holds as long as both are the same. The seed is
// the proxy's, so a client cannot choose values that collide.
func spanFingerprint(seed maphash.Seed, val []byte, spans []placeholder.Span) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], maphash.Bytes(seed, val))
	h.Write(w[:])
	for _, s := range spans {
		binary.LittleEndian.PutUint64(w[:], uint64(s.From)<<32|uint64(uint32(s.To)))
		h.Write(w[:])
		h.WriteString(s.Hash)
		h.WriteByte(0)
	}
	return h.Sum64()
}

// spanEdits returns the edits that render tool result b, pruned by span
// references (bi.Spans), in pl's body, where its value sits at
// [start,end): the rule of projections.BundleItem.RenderSpans. It returns
// false when the spans do not apply and the output goes whole. Caller
// holds pl.st.mu.
func (p *Proxy) spanEdits(pl *plan, b *block, bi *projections.BundleItem, start, end int) ([]edit, bool) {
	val := pl.conv.body[start:end]
	fp := spanFingerprint(p.spanSeed, val, bi.Spans)
	v, hit := pl.st.spans[b.item]
	var slow []byte // the value the slow way, when a miss took it
	if !hit || v.fp != fp {
		v = spanVerdict{fp: fp}
		if b.raw != nil && !b.rawArr && bytes.Equal(b.raw, val) {
			v.at, v.fixes, v.applies, v.fast = spanRuns(val, bi.Spans)
		}
		if !v.fast {
			slow, v.applies = spanSlow(b, bi)
		}
		pl.st.rememberSpan(b.item, v)
	}
	if !v.applies {
		return nil, false
	}
	if !v.fast {
		if slow == nil {
			var ok bool
			if slow, ok = spanSlow(b, bi); !ok {
				return nil, false
			}
		}
		return []edit{{start: start, end: end, repl: slow}}, true
	}
	if v.fixes {
		return []edit{{start: start, end: end, repl: appendRendered(make([]byte, 0, len(val)), val, bi.Spans, v.at)}}, true
	}
	return runEdits(bi.Spans, v.at, start), true
}

// runEdits are the edits that replace each span's run, at offsets at of
// a value that starts at start in the body, by its quoted reference line.
func runEdits(spans []placeholder.Span, at []int, start int) []edit {
	es := make([]edit, len(spans))
	for i, s := range spans {
		es[i] = edit{start: start + at[2*i], end: start + at[2*i+1], repl: quotedInner(placeholder.RenderSpan(s))}
	}
	return es
}

// appendRendered appends val, a JSON string literal scanSpans read, with
// each span's run (at) replaced by its quoted reference line and the
// rest as quote writes its text.
func appendRendered(dst, val []byte, spans []placeholder.Span, at []int) []byte {
	dst = append(dst, '"')
	pos := 1
	for i, s := range spans {
		dst = appendQuoteForm(dst, val[pos:at[2*i]])
		dst = append(dst, quotedInner(placeholder.RenderSpan(s))...)
		pos = at[2*i+1]
	}
	dst = appendQuoteForm(dst, val[pos:len(val)-1])
	return append(dst, '"')
}

// appendQuoteForm appends seg, a part of a JSON string literal that
// scanSpans read (whole escapes, valid UTF-8), as quote writes the text
// it stands for: what quote writes is copied in stretches, the rest
// written again.
func appendQuoteForm(dst, seg []byte) []byte {
	from := 0
	for i := 0; ; {
		if i = jsonplain.Skip(seg, i); i == len(seg) {
			return append(dst, seg[from:]...)
		}
		if seg[i] == '\\' {
			if n, _ := quotedEscape(seg[i:]); n > 0 {
				i += n
				continue
			}
			n, r := otherEscape(seg[i:])
			dst = appendQuotedRune(append(dst, seg[from:i]...), r)
			i += n
			from = i
			continue
		}
		// A character of two to four bytes (valid: scanSpans read it);
		// quote writes it as it is but for U+2028 and U+2029.
		c := seg[i]
		switch {
		case c < 0xe0:
			i += 2
		case c < 0xf0:
			if c == 0xe2 && seg[i+1] == 0x80 && seg[i+2]&0xfe == 0xa8 {
				dst = appendQuotedRune(append(dst, seg[from:i]...), rune(0x2028+int(seg[i+2]&1)))
				from = i + 3
			}
			i += 3
		default:
			i += 4
		}
	}
}

// appendQuotedRune appends r as quote writes it (r is not a surrogate):
// the short escapes, \u00xx for the other control characters, \u2028 and
// \u2029, and every other character as it is.
func appendQuotedRune(dst []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	switch {
	case r == '"' || r == '\\':
		return append(dst, '\\', byte(r))
	case r < 0x20:
		switch r {
		case '\b':
			return append(dst, '\\', 'b')
		case '\t':
			return append(dst, '\\', 't')
		case '\n':
			return append(dst, '\\', 'n')
		case '\f':
			return append(dst, '\\', 'f')
		case '\r':
			return append(dst, '\\', 'r')
		}
		return append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
	case r == '\u2028' || r == '\u2029':
		return append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
	}
	return utf8.AppendRune(dst, r)
}

// spanSlow is the value of tool result b with bi's span references
// applied, decoded, rendered and quoted; false when they do not apply.
func spanSlow(b *block, bi *projections.BundleItem) ([]byte, bool) {
	out, ok := b.spanText()
	if !ok {
		return nil, false
	}
	r, ok := bi.RenderSpans(out)
	if !ok {
		return nil, false
	}
	return quote(r), true
}

// spanRuns reads val, a JSON string literal, for spans as
// placeholder.ApplySpans reads the text it holds, without decoding it
// (scanSpans). fast is false when it cannot (the caller then decodes it:
// spanSlow). Otherwise applies says whether the spans apply
// (placeholder.CheckSpans, and each run's decoded bytes hash to its
// span's Hash); when they do, at holds each run's start and end offsets
// in val, and fixes says whether val holds escapes or characters that
// quote writes otherwise. quote(RenderSpans(text)) is then
// appendRendered of val, or, without fixes, val with runEdits applied.
func spanRuns(val []byte, spans []placeholder.Span) (at []int, fixes, applies, fast bool) {
	at, lines, fixes, fast := scanSpans(val, spans)
	if !fast {
		return nil, false, false, false
	}
	if placeholder.CheckSpans(spans, lines) != nil {
		return nil, false, false, true
	}
	if at == nil && len(spans) > 0 {
		return nil, false, false, false // not reached: spans in order are all found
	}
	longest := 0
	for i := range spans {
		longest = max(longest, at[2*i+1]-at[2*i])
	}
	run := make([]byte, 0, longest) // a run's text is never longer than its literal
	for i, s := range spans {
		run = appendUnquoted(run[:0], val[at[2*i]:at[2*i+1]])
		if placeholder.RunHashOf(run) != s.Hash {
			return nil, false, false, true
		}
	}
	return at, fixes, true, true
}

// scanSpans reads val, a JSON string literal, for its lines: their number
// and where the lines spans name start and end (at: for each span, the
// start of its first line and the end of its last, offsets in val; nil
// when a span is not found in order). Its line breaks are the \n escapes
// and those \u escapes that stand for one. fixes is true when val holds
// escapes or characters that quote writes otherwise (\/, \u escapes of
// characters quote writes as they are or with another escape, upper-case
// hex, a literal U+2028 or U+2029). ok is false when val is not a string
// literal or holds what scanSpans does not read (a surrogate escape,
// invalid UTF-8).
func scanSpans(val []byte, spans []placeholder.Span) (at []int, lines int, fixes, ok bool) {
	if len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
		return nil, 0, false, false
	}
	inner := val[1 : len(val)-1]
	at = make([]int, 2*len(spans))
	line := 1
	k := enterLine(spans, at, 0, line, 1)
	for i := 0; ; {
		if i = jsonplain.Skip(inner, i); i == len(inner) {
			break
		}
		var n int
		var nl bool
		switch c := inner[i]; {
		case c == '\\':
			if n, nl = quotedEscape(inner[i:]); n == 0 {
				var r rune
				if n, r = otherEscape(inner[i:]); n == 0 {
					return nil, 0, false, false
				}
				nl, fixes = r == '\n', true
			}
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(inner[i:])
			if r == utf8.RuneError && size <= 1 {
				return nil, 0, false, false
			}
			n = size
			fixes = fixes || r == '\u2028' || r == '\u2029'
		default: // a control byte or a bare quote: not a valid literal
			return nil, 0, false, false
		}
		if nl {
			k = endLine(spans, at, k, line, 1+i)
			line++
			k = enterLine(spans, at, k, line, 1+i+n)
		}
		i += n
	}
	if k = endLine(spans, at, k, line, 1+len(inner)); k != len(at) {
		at = nil
	}
	return at, line, fixes, true
}

// enterLine records off as the start of line when the span at k/2
// starts there (k even); it returns the next k.
func enterLine(spans []placeholder.Span, at []int, k, line, off int) int {
	if k < len(at) && k%2 == 0 && spans[k/2].From == line {
		at[k] = off
		k++
	}
	return k
}

// endLine records off as the end of line when the span at k/2 ends
// there (k odd); it returns the next k.
func endLine(spans []placeholder.Span, at []int, k, line, off int) int {
	if k < len(at) && k%2 == 1 && spans[k/2].To == line {
		at[k] = off
		k++
	}
	return k
}

// quotedEscape is the length of the escape at the start of b (b[0] is a
// backslash) when it is one quote writes, 0 otherwise; nl is true for \n.
// quote writes \" \\ \b \f \n \r \t, \u00xx (lower-case hex) for the
// other control bytes, and \u2028 and \u2029; never \/, \u for another
// character or upper-case hex.
func quotedEscape(b []byte) (n int, nl bool) {
	if len(b) < 2 {
		return 0, false
	}
	switch b[1] {
	case 'n':
		return 2, true
	case '"', '\\', 'b', 'f', 'r', 't':
		return 2, false
	case 'u':
		if len(b) < 6 {
			return 0, false
		}
		h := b[2:6]
		if string(h) == "2028" || string(h) == "2029" {
			return 6, false
		}
		if h[0] != '0' || h[1] != '0' || (h[2] != '0' && h[2] != '1') {
			return 0, false
		}
		lo, ok := lowerHex(h[3])
		if !ok {
			return 0, false
		}
		switch (h[2]-'0')<<4 | lo {
		case '\b', '\t', '\n', '\f', '\r':
			return 0, false // quote writes these short
		}
		return 6, false
	}
	return 0, false
}

// lowerHex is the value of a lower-case hex digit.
func lowerHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// otherEscape reads an escape at the start of b (b[0] is a backslash)
// that quotedEscape does not accept: \/ or a \u escape of a character
// that is not a surrogate. n is its length (0: neither) and r what it
// stands for.
func otherEscape(b []byte) (n int, r rune) {
	if len(b) >= 2 && b[1] == '/' {
		return 2, '/'
	}
	if len(b) < 6 || b[1] != 'u' {
		return 0, 0
	}
	for _, c := range b[2:6] {
		v, ok := hexDigit(c)
		if !ok {
			return 0, 0
		}
		r = r<<4 | rune(v)
	}
	if utf16.IsSurrogate(r) {
		return 0, 0
	}
	return 6, r
}

// hexDigit is the value of a hex digit of either case.
func hexDigit(c byte) (byte, bool) {
	if c >= 'A' && c <= 'F' {
		return c - 'A' + 10, true
	}
	return lowerHex(c)
}

// appendUnquoted appends the text of seg, a part of a JSON string literal
// that scanSpans read (whole escapes, only those it accepts).
func appendUnquoted(dst, seg []byte) []byte {
	for {
		j := bytes.IndexByte(seg, '\\')
		if j < 0 {
			return append(dst, seg...)
		}
		dst = append(dst, seg[:j]...)
		if seg[j+1] == 'u' {
			_, r := otherEscape(seg[j:])
			dst = utf8.AppendRune(dst, r)
			seg = seg[j+6:]
			continue
		}
		dst = append(dst, simpleEscape(seg[j+1]))
		seg = seg[j+2:]
	}
}

// quotedInner is s as quote writes it, without the quotes.
func quotedInner(s string) []byte {
	b := []byte(s)
	if jsonplain.Skip(b, 0) == len(b) {
		return b
	}
	q := quote(s)
	return q[1 : len(q)-1]
}
