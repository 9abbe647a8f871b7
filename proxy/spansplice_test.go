package proxy

import (
	"bytes"
	"hash/maphash"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/placeholder"
	"github.com/prunesched/prunesched/projections"
)

// checkSpanRuns compares spanRuns on raw with the slow way (unquote,
// BundleItem.RenderSpans, quote): raw is read the fast way at least when
// quote gives it back from its text, never when it does not decode, and
// then the verdict and the spliced bytes are the slow way's. It returns
// what the fast way did.
func checkSpanRuns(t testing.TB, raw []byte, spans []placeholder.Span) (applies, fast bool) {
	t.Helper()
	at, fixes, applies, fast := spanRuns(raw, spans)
	text, err := unquote(raw)
	canonical := err == nil && len(raw) > 0 && raw[0] == '"' && bytes.Equal(quote(text), raw)
	if canonical && !fast || fast && (err != nil || raw[0] != '"') {
		t.Fatalf("spanRuns(%q): fast %v; quote gives the value back: %v, decodes: %v", raw, fast, canonical, err)
	}
	if canonical && fixes {
		t.Fatalf("spanRuns(%q): fixes in a value quote gives back", raw)
	}
	if !fast {
		return false, false
	}
	bi := &projections.BundleItem{Spans: spans}
	want, ok := bi.RenderSpans(text)
	if applies != ok {
		t.Fatalf("spanRuns(%q, %+v): applies %v, RenderSpans %v", raw, spans, applies, ok)
	}
	if !applies {
		return false, true
	}
	w := quote(want)
	if got := appendRendered(nil, raw, spans, at); !bytes.Equal(got, w) {
		t.Fatalf("appendRendered(%q, %+v):\n got %s\nwant %s", raw, spans, got, w)
	}
	if !fixes {
		got, err := splice(raw, runEdits(spans, at, 0))
		testutil.NoError(t, err)
		if !bytes.Equal(got, w) {
			t.Fatalf("runEdits(%q, %+v):\n got %s\nwant %s", raw, spans, got, w)
		}
	}
	return true, true
}

// spanOf is a span over lines from-to of text, its hash taken from text
// (or "sha256:x" when the lines are not there).
func spanOf(text string, from, to int) placeholder.Span {
	s := placeholder.Span{From: from, To: to, Item: "#1", SrcFrom: from, SrcTo: to, Hash: "sha256:x"}
	if lines := strings.Split(text, "\n"); from >= 1 && to >= from && to <= len(lines) {
		s.Hash = placeholder.RunHash(lines[from-1 : to])
	}
	return s
}

func TestSpanRunsEscapes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		raw     string
		spans   [][2]int
		fast    bool
		applies bool
	}{
		{"plain", `"a\nb\nc"`, [][2]int{{2, 2}}, true, true},
		{"arrows", `"     1→x\n     2→y\n     3→z"`, [][2]int{{1, 2}}, true, true},
		{"escaped backslash then n", `"a\\nb\nc"`, [][2]int{{1, 1}}, true, true},
		{"escaped backslash then newline", `"a\\\nb"`, [][2]int{{2, 2}}, true, true},
		{"two spans adjacent", `"a\nb\nc\nd"`, [][2]int{{1, 2}, {3, 4}}, true, true},
		{"last line, trailing newline", `"a\nb\n"`, [][2]int{{3, 3}}, true, true},
		{"empty", `""`, [][2]int{{1, 1}}, true, true},
		{"past the end", `"a\nb"`, [][2]int{{2, 3}}, true, false},
		{"out of order", `"a\nb\nc"`, [][2]int{{2, 2}, {1, 1}}, true, false},
		{"control escapes", `"\u001b[1mx\u001b[0m\n\t\r\b\f\"\\"`, [][2]int{{1, 1}}, true, true},
		{"line separators escaped", `"\u2028\n\u2029"`, [][2]int{{2, 2}}, true, true},
		{"newline as \\u000a", `"a\u000ab\u000Ac"`, [][2]int{{2, 2}}, true, true},
		{"newline as \\u000a in a run", `"a\u000ab\u000Ac\nd\u003c"`, [][2]int{{1, 2}}, true, true},
		{"empty run before \\u000A", `"\u000A"`, [][2]int{{1, 1}}, true, true},
		{"surrogate pair", `"\ud83d\ude00\nx"`, [][2]int{{2, 2}}, false, false},
		{"lone surrogate", `"\udc00\nx"`, [][2]int{{2, 2}}, false, false},
		{"python ascii", `"     1\u2192a\n     2\u2192b\n     3\u2192\u00e9"`, [][2]int{{2, 2}}, true, true},
		{"upper-case hex", `"\u001B\nx\u001B"`, [][2]int{{1, 1}}, true, true},
		{"escaped slash", `"a\/b\nc\/"`, [][2]int{{1, 1}}, true, true},
		{"escaped letter", `"\u0041\nc\u0041"`, [][2]int{{1, 1}}, true, true},
		{"escaped quote and backslash", `"\u0022\u005c\nc\u0022\u005C"`, [][2]int{{1, 1}}, true, true},
		{"tab as \\u0009", `"\u0009\nc\u0009"`, [][2]int{{1, 1}}, true, true},
		{"literal U+2028", "\"a\u2028b\\nc\u2029\"", [][2]int{{1, 1}}, true, true},
		{"replacement char escaped", `"\ufffd\nc\ufffd"`, [][2]int{{1, 1}}, true, true},
		{"invalid UTF-8", "\"a\xff\\nc\"", [][2]int{{1, 1}}, false, false},
		{"html kept", `"<a href=\"x\">&amp;</a>\nz"`, [][2]int{{1, 1}}, true, true},
		{"html escaped", `"\u003ca\u003e\nz\u0026"`, [][2]int{{1, 1}}, true, true},
		{"bad escape", `"a\x\nb"`, [][2]int{{2, 2}}, false, false},
		{"short \\u", `"a\u12"`, [][2]int{{1, 1}}, false, false},
		{"control byte", "\"a\x01\\nb\"", [][2]int{{2, 2}}, false, false},
		{"not a string", `[{"type":"text","text":"a"}]`, [][2]int{{1, 1}}, false, false},
		{"lone backslash", `"a\"`, [][2]int{{1, 1}}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			text, _ := unquote([]byte(c.raw))
			var spans []placeholder.Span
			for _, r := range c.spans {
				spans = append(spans, spanOf(text, r[0], r[1]))
			}
			applies, fast := checkSpanRuns(t, []byte(c.raw), spans)
			testutil.True(t, fast == c.fast && applies == c.applies, "fast %v applies %v, want %v %v", fast, applies, c.fast, c.applies)
			if applies {
				spans[0].Hash = placeholder.RunHash([]string{"not these lines"})
				applies, _ := checkSpanRuns(t, []byte(c.raw), spans)
				testutil.True(t, !applies, "applies with a wrong run hash")
			}
		})
	}
}

// FuzzSpanRuns: on any value and spans, spanRuns reads the value the
// fast way exactly when quote gives it back, and then its verdict and
// splice are the slow way's (checkSpanRuns).
func FuzzSpanRuns(f *testing.F) {
	for _, s := range []string{`"a\nb\nc"`, `"a\\nb\nc"`, `"\u001b\n\u2028\nx"`, `"a\u000ab"`, `"\/\n"`, "\"\xff\\n\"", `"     1→x\n     2→y\n"`, `"\u003c\u000A\u2192\n\ud83d\ude00"`, "\"\u2028\\n\u2029\""} {
		f.Add([]byte(s), uint8(1), uint8(0), uint8(0), uint8(1), false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, from, n1, gap, n2 uint8, wrong bool) {
		text, _ := unquote(raw)
		a := int(from)
		b := a + int(n1)
		spans := []placeholder.Span{spanOf(text, a, b)}
		if n2 > 0 {
			c := b + int(gap)
			spans = append(spans, spanOf(text, c, c+int(n2)-1))
		}
		if wrong {
			spans[len(spans)-1].Hash = placeholder.RunHash([]string{text})
		}
		checkSpanRuns(t, raw, spans)
	})
}

// TestSpanVerdictKept: the runs of a value are hashed once; a request
// resending the same bytes reuses the verdict (here a verdict planted
// for bytes whose runs do not match is trusted), and other bytes or other
// spans are judged again.
func TestSpanVerdictKept(t *testing.T) {
	t.Parallel()
	p := &Proxy{spanSeed: maphash.MakeSeed()}
	st := &sessState{}
	text := "     1→a\n     2→b\n     3→c"
	raw := quote(text)
	body := append(append([]byte(`{"content":`), raw...), '}')
	start, end := len(`{"content":`), len(`{"content":`)+len(raw)
	b := &block{kind: bToolResult, item: "t1", raw: raw, valStart: start, valEnd: end}
	bi := &projections.BundleItem{Spans: []placeholder.Span{spanOf(text, 2, 3)}}
	pl := &plan{conv: &conversation{body: body}, st: st}

	es, ok := p.spanEdits(pl, b, bi, start, end)
	testutil.True(t, ok && len(es) == 1, "spans do not apply: %v %v", ok, es)
	got, err := splice(body, es)
	testutil.NoError(t, err)
	r, _ := bi.RenderSpans(text)
	testutil.True(t, string(got) == `{"content":`+string(quote(r))+`}`, "spliced %s", got)
	v := st.spans["t1"]
	testutil.True(t, v.fast && v.applies, "verdict %+v", v)

	// Same bytes, same spans: the verdict is used as it is.
	bad := &projections.BundleItem{Spans: []placeholder.Span{spanOf(text, 2, 3)}}
	bad.Spans[0].Item = "#2"
	_, ok = p.spanEdits(pl, b, bad, start, end)
	testutil.True(t, ok, "the same bytes and runs were judged again")
	wrong := &projections.BundleItem{Spans: []placeholder.Span{spanOf(text, 2, 3)}}
	wrong.Spans[0].Hash = spanOf(text, 1, 1).Hash
	st.spans["t1"] = spanVerdict{fp: spanFingerprint(p.spanSeed, raw, wrong.Spans), applies: true, fast: true, at: v.at}
	_, ok = p.spanEdits(pl, b, wrong, start, end)
	testutil.True(t, ok, "a kept verdict was not used")

	// Other spans: judged again.
	delete(st.spans, "t1")
	_, ok = p.spanEdits(pl, b, wrong, start, end)
	testutil.True(t, !ok && !st.spans["t1"].applies, "a wrong run hash applied")
	// Other bytes: judged again.
	text2 := "     1→a\n     2→B\n     3→c"
	raw2 := quote(text2)
	body2 := append(append([]byte(`{"content":`), raw2...), '}')
	b2 := &block{kind: bToolResult, item: "t1", raw: raw2, valStart: start, valEnd: start + len(raw2)}
	pl2 := &plan{conv: &conversation{body: body2}, st: st}
	_, ok = p.spanEdits(pl2, b2, bi, start, start+len(raw2))
	testutil.True(t, !ok, "spans applied to other lines")
	// A value whose other lines hold escapes quote writes otherwise:
	// re-escaped at every use, the runs hashed once.
	raw4 := []byte(`"     1\u2192\u003ca\u003e\n     2\u2192b\n     3\u2192c"`)
	body4 := append(append([]byte(`{"content":`), raw4...), '}')
	b4 := &block{kind: bToolResult, item: "t4", raw: raw4, valStart: start, valEnd: start + len(raw4)}
	pl4 := &plan{conv: &conversation{body: body4}, st: st}
	text4, err := unquote(raw4)
	testutil.NoError(t, err)
	bi4 := &projections.BundleItem{Spans: []placeholder.Span{spanOf(text4, 2, 3)}}
	r4, _ := bi4.RenderSpans(text4)
	for range 2 {
		es, ok = p.spanEdits(pl4, b4, bi4, start, start+len(raw4))
		testutil.True(t, ok, "spans do not apply")
		got, err := splice(body4, es)
		testutil.NoError(t, err)
		testutil.True(t, string(got) == `{"content":`+string(quote(r4))+`}`, "spliced %s", got)
		testutil.True(t, st.spans["t4"].fast && st.spans["t4"].fixes, "verdict %+v", st.spans["t4"])
	}

	// A value the fast way does not read: the slow way, same rule.
	raw3 := []byte(`[{"type":"text","text":"     1\u2192a\n     2\u2192b"},{"type":"text","text":"     3\u2192c"}]`)
	body3 := append(append([]byte(`{"content":`), raw3...), '}')
	b3 := &block{kind: bToolResult, item: "t3", raw: raw3, rawArr: true, valStart: start, valEnd: start + len(raw3)}
	pl3 := &plan{conv: &conversation{body: body3}, st: st}
	es, ok = p.spanEdits(pl3, b3, bi, start, start+len(raw3))
	testutil.True(t, ok && len(es) == 1 && string(es[0].repl) == string(quote(r)), "content array: %v %v", ok, es)
	testutil.True(t, !st.spans["t3"].fast && st.spans["t3"].applies, "verdict %+v", st.spans["t3"])
}
