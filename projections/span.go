package projections

import (
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/placeholder"
)

// Span references (L1 span, reason SPAN_REFERENCE) are partial prunes: the
// read is rendered with each referenced run of lines replaced by one
// reference line (placeholder.RenderSpan) and the rest verbatim
// (placeholder.ApplySpans). The mark's evidence carries everything the
// rendering needs: one entry of kind placeholder.SpanEvidenceKind per run,
// naming the earlier read, both line ranges and the run's hash. A
// reference applies only while the earlier read is rendered as it was (in
// the context, not pruned, not host-pruned or compacted away); otherwise
// the read is rendered whole and does not count as pruned.

// isSpanMark reports whether m is a span reference.
func isSpanMark(m *events.Mark) bool {
	return m.Decision == events.Prune && m.Reason == events.ReasonSpanReference
}

// spansOf returns the spans of an item with an applied span reference,
// with the earlier read named by its handle, or nil when the reference
// does not apply (the earlier read is not rendered as it was, or the
// evidence does not decode).
func (s *Session) spansOf(it *itemState) []placeholder.Span {
	m := it.applied.mark.m
	var out []placeholder.Span
	for _, e := range m.Evidence {
		if e.Kind != placeholder.SpanEvidenceKind {
			continue
		}
		i, ok := s.itemIndex(e.Item)
		if !ok || i < s.compactedBefore || i >= it.Index {
			return nil
		}
		sv := s.items[i]
		if sv.HostPruned || sv.HostCompacted || sv.pruned() {
			return nil
		}
		sp := placeholder.Span{Item: placeholder.Handle(sv.Index), Hash: e.Hash}
		if err := placeholder.ParseSpanRanges(e.Value, &sp); err != nil {
			return nil
		}
		if n := len(out); n > 0 && sp.From <= out[n-1].To {
			return nil
		}
		out = append(out, sp)
	}
	return out
}

// spanKey identifies a rendering of spans (render cache key).
func spanKey(spans []placeholder.Span) string {
	var b strings.Builder
	for _, sp := range spans {
		b.WriteString(placeholder.RenderSpan(sp))
	}
	return b.String()
}
