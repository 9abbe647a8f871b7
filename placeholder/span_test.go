package placeholder

import (
	"strconv"
	"strings"
	"testing"
)

func TestRenderSpan(t *testing.T) {
	s := Span{From: 10, To: 57, Item: "#12", SrcFrom: 3, SrcTo: 50, Hash: "sha256:abcd1234ef"}
	if got, want := RenderSpan(s), "[prunesched: lines 10-57 = #12 lines 3-50, sha256:abcd1234]"; got != want {
		t.Errorf("RenderSpan = %q, want %q", got, want)
	}
	if got := SpanRanges(s); got != "10-57=3-50" {
		t.Errorf("SpanRanges = %q", got)
	}
	s.Renumbered = 130
	if got, want := RenderSpan(s), "[prunesched: lines 10-57 = #12 lines 3-50 numbered from 130, sha256:abcd1234]"; got != want {
		t.Errorf("RenderSpan renumbered = %q, want %q", got, want)
	}
	if got := SpanRanges(s); got != "10-57=3-50@130" {
		t.Errorf("SpanRanges renumbered = %q", got)
	}
}

func TestLineNumber(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		rest string
		ok   bool
	}{
		{"    12→func A() {", 12, "func A() {", true},
		{"     1\tpackage a", 1, "package a", true},
		{"12: {", 12, "{", true},
		{"00012| x", 12, "x", true},
		{"     7→", 7, "", true},
		{"func A() {", 0, "", false},
		{"12 apples", 0, "", false},
		{"0→x", 0, "", false},
		{"1234567890→x", 0, "", false},
		{"", 0, "", false},
		{"   ", 0, "", false},
	} {
		n, rest, ok := LineNumber(tc.in)
		if n != tc.n || rest != tc.rest || ok != tc.ok {
			t.Errorf("LineNumber(%q) = %d, %q, %v; want %d, %q, %v", tc.in, n, rest, ok, tc.n, tc.rest, tc.ok)
		}
	}
}

func TestParseSpanRanges(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"10-57=3-50", true}, {"1-1=9-9", true},
		{"", false}, {"10-57", false}, {"10-57=3-49", false}, {"0-5=1-6", false},
		{"5-4=5-4", false}, {"01-5=1-5", false}, {"+1-5=1-5", false}, {"1-5=1-5=1", false},
		{"1-2000000000=1-2000000000", false}, {"a-b=c-d", false},
		{"10-57=3-50@130", true}, {"10-57=3-50@0", false}, {"10-57=3-50@", false}, {"10-57=3-50@x", false},
		{"10-57=3-50@01", false}, {"10-57@3=3-50", false},
	} {
		var s Span
		err := ParseSpanRanges(tc.in, &s)
		if (err == nil) != tc.ok {
			t.Errorf("ParseSpanRanges(%q) error %v, want ok %v", tc.in, err, tc.ok)
		}
		if err == nil && SpanRanges(s) != tc.in {
			t.Errorf("round trip %q -> %q", tc.in, SpanRanges(s))
		}
	}
}

func TestApplySpans(t *testing.T) {
	lines := []string{"a", "b", "c", "d", "e"}
	text := strings.Join(lines, "\n") + "\n"
	span := func(from, to int) Span {
		return Span{From: from, To: to, Item: "#0", SrcFrom: from, SrcTo: to, Hash: RunHash(lines[from-1 : to])}
	}
	for _, tc := range []struct {
		name  string
		spans []Span
		want  string
	}{
		{"none", nil, text},
		{"middle", []Span{span(2, 3)}, "a\n" + RenderSpan(span(2, 3)) + "\nd\ne\n"},
		{"two", []Span{span(1, 2), span(4, 5)}, RenderSpan(span(1, 2)) + "\nc\n" + RenderSpan(span(4, 5)) + "\n"},
	} {
		got, err := ApplySpans(text, tc.spans)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	bad := span(2, 3)
	bad.Hash = RunHash([]string{"x"})
	for _, spans := range [][]Span{{bad}, {span(2, 3), span(3, 4)}, {{From: 5, To: 9, Hash: "h"}}} {
		if _, err := ApplySpans(text, spans); err == nil {
			t.Errorf("ApplySpans(%+v) applied", spans)
		}
	}
}

// FuzzParseSpanRanges decodes span evidence values as they come from the
// log: never panics, and what it accepts formats back to itself with
// ranges of equal length starting at line 1 or later.
func FuzzParseSpanRanges(f *testing.F) {
	for _, s := range []string{"10-57=3-50", "1-1=1-1", "0-0=0-0", "9-8=7-6", "-1-2=3-4", "1-2=3", "1-2=3-4@9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var s Span
		if err := ParseSpanRanges(v, &s); err != nil {
			return
		}
		if SpanRanges(s) != v || s.From < 1 || s.SrcFrom < 1 || s.To < s.From || s.To-s.From != s.SrcTo-s.SrcFrom {
			t.Fatalf("%q accepted as %+v", v, s)
		}
		_, _ = ApplySpans("a\nb\nc", []Span{s})
	})
}

func FuzzLineNumber(f *testing.F) {
	for _, s := range []string{"    12→x", "1\tx", "12: x", "00012| x", "x", "", "999999999→"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		n, rest, ok := LineNumber(line)
		if !ok {
			if _, _, _, ok2 := NumberedLine(line); ok2 {
				t.Fatalf("NumberedLine(%q) ok, LineNumber not", line)
			}
			return
		}
		if n < 1 || !strings.HasSuffix(line, rest) || len(rest) >= len(line) {
			t.Fatalf("LineNumber(%q) = %d, %q", line, n, rest)
		}
		// NumberedLine: the same, and the line is spaces, the number's
		// digits, sep and rest.
		n2, sep, rest2, ok2 := NumberedLine(line)
		head, found := strings.CutSuffix(line[:len(line)-len(rest)], sep)
		v, err := strconv.Atoi(strings.TrimLeft(head, " "))
		if !ok2 || n2 != n || rest2 != rest || sep == "" || !found || err != nil || v != n {
			t.Fatalf("NumberedLine(%q) = %d, %q, %q, %v; LineNumber %d, %q", line, n2, sep, rest2, ok2, n, rest)
		}
	})
}

// TestRunHashOf: a run's hash from its text is RunHash of its lines.
func TestRunHashOf(t *testing.T) {
	for _, lines := range [][]string{{""}, {"a"}, {"a", "", "b→c"}} {
		if got, want := RunHashOf([]byte(strings.Join(lines, "\n"))), RunHash(lines); got != want {
			t.Errorf("RunHashOf(%q) = %s, RunHash %s", lines, got, want)
		}
	}
}
