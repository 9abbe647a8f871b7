package placeholder

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"

	"github.com/prunesched/prunesched/events"
)

// Span is one run of a read's lines rendered as a reference to the same
// lines of an earlier read still in context (L1 span, reason
// SPAN_REFERENCE). Lines are numbered from 1 in the item's text split at
// "\n"; ranges are inclusive.
type Span struct {
	// From and To are the lines of the read that the reference replaces.
	From, To int
	// Item is the earlier read's handle (see Handle); SrcFrom and SrcTo
	// are the same lines there.
	Item           string
	SrcFrom, SrcTo int
	// Hash is RunHash of the replaced lines.
	Hash string
	// Renumbered is set when both outputs carry line numbers (a numbered
	// read: Claude Code's "   12→", OpenCode's "12: " or "00012| ") and the run sits
	// at other line numbers here than there, as after an edit above it:
	// the replaced lines are the earlier item's lines with their numbers
	// counting from Renumbered instead. Zero when the lines are the same
	// bytes.
	Renumbered int
}

// SpanEvidenceKind is the Evidence.Kind of one span in a SPAN_REFERENCE
// mark: Evidence.Item is the earlier read's item id, Evidence.Hash the
// run's hash and Evidence.Value the ranges as SpanRanges formats them.
const SpanEvidenceKind = "span"

// RunHash is the content address of a run of lines: sha256 of the lines
// joined with "\n", as "sha256:<hex>".
func RunHash(lines []string) string {
	var h RunHasher
	for _, l := range lines {
		h.Line(l)
	}
	return h.Sum()
}

// RunHashOf is RunHash of the lines of run, a run's text (its lines
// joined with "\n"): for a caller that holds the run's bytes whole, as
// the proxy does when it decodes a run from a client's JSON string.
func RunHashOf(run []byte) string { return events.HashBytes(run) }

// RunHasher computes RunHash a line at a time, so a run of a stored
// output can be hashed as the output streams by. The zero value is ready.
type RunHasher struct {
	h     hash.Hash
	lines int
}

// Line adds the run's next line (without its line break).
func (r *RunHasher) Line(l string) {
	if r.h == nil {
		r.h = sha256.New()
	}
	if r.lines > 0 {
		r.h.Write([]byte{'\n'})
	}
	io.WriteString(r.h, l)
	r.lines++
}

// Sum is RunHash of the lines added.
func (r *RunHasher) Sum() string {
	if r.h == nil {
		r.h = sha256.New()
	}
	return events.HashSum(r.h)
}

// SpanRanges formats a span's ranges as the evidence value "10-57=3-50":
// lines 10-57 of the read are lines 3-50 of the earlier read; with
// "@130" appended when they are renumbered to count from 130.
func SpanRanges(s Span) string {
	v := strconv.Itoa(s.From) + "-" + strconv.Itoa(s.To) + "=" + strconv.Itoa(s.SrcFrom) + "-" + strconv.Itoa(s.SrcTo)
	if s.Renumbered > 0 {
		v += "@" + strconv.Itoa(s.Renumbered)
	}
	return v
}

// ParseSpanRanges decodes SpanRanges' format into s's ranges. Both ranges
// must be non-empty, of equal length, and start at line 1 or later.
func ParseSpanRanges(v string, s *Span) error {
	a, b, ok := strings.Cut(v, "=")
	if !ok {
		return errors.New("span ranges: no '='")
	}
	var err error
	if s.From, s.To, err = parseRange(a); err != nil {
		return fmt.Errorf("span ranges %q: %w", v, err)
	}
	s.Renumbered = 0
	if bb, num, ok := strings.Cut(b, "@"); ok {
		b = bb
		if s.Renumbered, err = atoiStrict(num); err != nil || s.Renumbered < 1 || s.Renumbered > maxLine {
			return fmt.Errorf("span ranges %q: bad renumbering %q", v, num)
		}
	}
	if s.SrcFrom, s.SrcTo, err = parseRange(b); err != nil {
		return fmt.Errorf("span ranges %q: %w", v, err)
	}
	if s.To-s.From != s.SrcTo-s.SrcFrom {
		return fmt.Errorf("span ranges %q: lengths differ", v)
	}
	return nil
}

// maxLine bounds a line number, so that no range arithmetic overflows.
const maxLine = 1 << 30

func parseRange(r string) (int, int, error) {
	x, y, ok := strings.Cut(r, "-")
	if !ok {
		return 0, 0, errors.New("range without '-'")
	}
	from, err := atoiStrict(x)
	if err != nil {
		return 0, 0, err
	}
	to, err := atoiStrict(y)
	if err != nil {
		return 0, 0, err
	}
	if from < 1 || to < from || to > maxLine {
		return 0, 0, fmt.Errorf("bad range %d-%d", from, to)
	}
	return from, to, nil
}

func atoiStrict(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || strconv.Itoa(n) != s {
		return 0, fmt.Errorf("bad line number %q", s)
	}
	return n, nil
}

// RenderSpan is the one line that stands for a referenced run:
// "[prunesched: lines 10-57 = #12 lines 3-50, sha256:abcd1234]" (the
// hash shortened to 8 hex digits), or for a renumbered run
// "[prunesched: lines 10-57 = #12 lines 3-50 numbered from 130,
// sha256:abcd1234]". It carries identity, never content.
func RenderSpan(s Span) string {
	h := strings.TrimPrefix(s.Hash, "sha256:")
	if len(h) > 8 {
		h = h[:8]
	}
	num := ""
	if s.Renumbered > 0 {
		num = " numbered from " + strconv.Itoa(s.Renumbered)
	}
	return "[prunesched: lines " + strconv.Itoa(s.From) + "-" + strconv.Itoa(s.To) + " = " + s.Item +
		" lines " + strconv.Itoa(s.SrcFrom) + "-" + strconv.Itoa(s.SrcTo) + num + ", sha256:" + h + "]"
}

// LineNumber splits a numbered read's line into its line number and the
// text after the number's separator: Claude Code's Read ("    12→text",
// older "    12\ttext") and OpenCode's read ("12: text", older
// "00012| text"), with leading spaces. ok is false for a line without such a prefix.
func LineNumber(line string) (n int, rest string, ok bool) {
	n, _, rest, ok = NumberedLine(line)
	return n, rest, ok
}

// NumberedLine is LineNumber with the number's separator ("→", "\t", ": "
// or "| "), for a caller that tells the formats apart (the span
// references' line hashes).
func NumberedLine(line string) (n int, sep, rest string, ok bool) {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	j := i
	for j < len(line) && j-i < 9 && line[j] >= '0' && line[j] <= '9' {
		j++
	}
	if j == i || j-i >= 9 {
		return 0, "", "", false
	}
	switch {
	case strings.HasPrefix(line[j:], "→"):
		sep = "→"
	case strings.HasPrefix(line[j:], "\t"):
		sep = "\t"
	case strings.HasPrefix(line[j:], ": "):
		sep = ": "
	case strings.HasPrefix(line[j:], "| "):
		sep = "| "
	default:
		return 0, "", "", false
	}
	n, err := strconv.Atoi(line[i:j])
	if err != nil || n < 1 {
		return 0, "", "", false
	}
	return n, sep, line[j+len(sep):], true
}

// SpanSaving is what replacing the run lines (one span) with its
// reference line saves, in tokens (Count): the run's tokens minus the
// reference line's, each with its line break. It may be <= 0.
func SpanSaving(s Span, run []string) int {
	n := 0
	for _, l := range run {
		n += LineTokens(l)
	}
	return SpanSavingOf(s, n)
}

// LineTokens is one line's tokens in a run (Count of the line with its
// line break), as SpanSaving adds them.
func LineTokens(l string) int { return Count(l + "\n") }

// SpanSavingOf is SpanSaving for a run whose lines' LineTokens add up to
// runTokens: for a run counted a line at a time as its output streams by.
func SpanSavingOf(s Span, runTokens int) int {
	return runTokens - Count(RenderSpan(s)+"\n")
}

// ApplySpans renders text with each span's lines replaced by its reference
// line (RenderSpan); the other lines stay verbatim. Spans must be in
// increasing, non-overlapping order, inside the text, and each run must
// hash to its span's Hash: otherwise it returns an error and the caller
// renders the text whole.
func ApplySpans(text string, spans []Span) (string, error) {
	lines := strings.Split(text, "\n")
	if err := CheckSpans(spans, len(lines)); err != nil {
		return "", err
	}
	var b strings.Builder
	b.Grow(len(text))
	next := 1
	for i, s := range spans {
		if RunHash(lines[s.From-1:s.To]) != s.Hash {
			return "", fmt.Errorf("span %d (lines %d-%d): run hash differs from %s", i, s.From, s.To, s.Hash)
		}
		for _, l := range lines[next-1 : s.From-1] {
			b.WriteString(l)
			b.WriteByte('\n')
		}
		b.WriteString(RenderSpan(s))
		next = s.To + 1
		if next <= len(lines) {
			b.WriteByte('\n')
		}
	}
	for i, l := range lines[next-1:] {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	return b.String(), nil
}

// CheckSpans is where ApplySpans lets spans sit in a text of n lines: in
// increasing, non-overlapping order, each at least one line long and
// inside the text. It returns an error naming the first span that is not;
// such spans never apply, whatever the text's bytes.
func CheckSpans(spans []Span, n int) error {
	next := 1
	for i, s := range spans {
		if s.From < next || s.To > n || s.To < s.From {
			return fmt.Errorf("span %d (lines %d-%d): out of order or past the %d lines", i, s.From, s.To, n)
		}
		next = s.To + 1
	}
	return nil
}
