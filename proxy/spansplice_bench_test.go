package proxy

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/placeholder"
	"github.com/prunesched/prunesched/projections"
)

// BenchmarkSpanRender renders the span references of one request of a
// session that read a 200-line file 40 times, each read after the first
// pruned to a reference for 150 of its lines (Claude Code's numbered
// Read lines, with arrows and tabs): what the render stage does for span
// items at every request, since the client resends them all. "slow"
// decodes, applies and quotes each output (spanSlow, the render before
// the fast way), "first" reads the values the fast way with no verdicts
// kept (a session's first request after a load), "again" resends the
// same bytes (every later request). Each op also splices the edits into
// the body.
func BenchmarkSpanRender(b *testing.B) {
	for _, enc := range []struct {
		name  string
		quote func(string) []byte
	}{
		// As quote writes it (JavaScript clients: Claude Code, Codex).
		{"", quote},
		// As Go's json.Marshal writes it, \u003c for '<' (the bench's
		// replayed bodies): every such escape outside the runs is an edit.
		{"-htmlescaped", func(s string) []byte { b, _ := json.Marshal(s); return b }},
	} {
		benchSpanRender(b, enc.name, enc.quote)
	}
}

func benchSpanRender(b *testing.B, name string, enc func(string) []byte) {
	const reads, lines, run = 40, 200, 150
	var body strings.Builder
	body.WriteString(`{"messages":[`)
	type item struct {
		b     *block
		bi    *projections.BundleItem
		start int
		end   int
	}
	var items []item
	for r := range reads {
		var sb strings.Builder
		for i := 1; i <= lines; i++ {
			fmt.Fprintf(&sb, "%6d→\tif n < %d && r != nil { serve(w, r, %d) } // read %d\n", i, i, i, r%3)
		}
		text := sb.String()
		raw := enc(text)
		fmt.Fprintf(&body, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":`, r)
		start := body.Len()
		body.Write(raw)
		end := body.Len()
		body.WriteString(`}]},`)
		s := spanOf(text, 20, 20+run-1)
		s.Item = placeholder.Handle(1)
		items = append(items, item{
			b:  &block{kind: bToolResult, item: fmt.Sprintf("t%d", r), raw: raw, valStart: start, valEnd: end},
			bi: &projections.BundleItem{Spans: []placeholder.Span{s}}, start: start, end: end,
		})
	}
	body.WriteString(`{"role":"user","content":"go on"}]}`)
	conv := &conversation{body: []byte(body.String())}
	p := &Proxy{spanSeed: maphash.MakeSeed()}
	render := func(b *testing.B, st *sessState, slow bool) {
		pl := &plan{conv: conv, st: st}
		var edits []edit
		for _, it := range items {
			if slow {
				r, ok := spanSlow(it.b, it.bi)
				if !ok {
					b.Fatal("spans do not apply")
				}
				edits = append(edits, edit{start: it.start, end: it.end, repl: r})
				continue
			}
			es, ok := p.spanEdits(pl, it.b, it.bi, it.start, it.end)
			if !ok {
				b.Fatal("spans do not apply")
			}
			edits = append(edits, es...)
		}
		if _, err := splice(conv.body, edits); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("slow"+name, func(b *testing.B) {
		b.SetBytes(int64(len(conv.body)))
		for b.Loop() {
			render(b, &sessState{}, true)
		}
	})
	b.Run("first"+name, func(b *testing.B) {
		b.SetBytes(int64(len(conv.body)))
		for b.Loop() {
			render(b, &sessState{}, false)
		}
	})
	b.Run("again"+name, func(b *testing.B) {
		st := &sessState{}
		render(b, st, false)
		b.SetBytes(int64(len(conv.body)))
		for b.Loop() {
			render(b, st, false)
		}
	})
}
