package projections

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/prunesched/prunesched/events"
)

// RenderText renders the bundle as a readable transcript: a title line, a
// line for what the host compacted, then one block per rendered item with a
// header line
//
//	── [3] assistant tool_use Read (toolu_01)  123 tok
//
// followed by its content: the placeholder when pruned (for a pruned tool
// input, the {"prunesched_pruned": ...} object the model sees). The header's
// token count is what the item renders as (tc counts placeholders, cached);
// pruned items add "(pruned L0 DUPLICATE_OUTPUT, applied at request r5 by
// next_request)", and pending marks, restores and host-pruned outputs are
// noted too (notes only: a pending mark changes no content). A closing line
// gives the totals.
func RenderText(ctx context.Context, b Bundle, blobs BlobGetter, tc TokenCounter) ([]byte, error) {
	var w bytes.Buffer
	fmt.Fprintf(&w, "prunesched bundle  tenant=%s session=%s model=%s\n", b.Tenant, b.Session, orDash(b.Model))
	if hc := b.HostCompacted; hc.Items > 0 {
		fmt.Fprintf(&w, "── %d items (%d tok) before the last host compaction (%s): not rendered\n", hc.Items, hc.Tokens, orDash(hc.Host))
	}
	total := 0
	for i := range b.Items {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		bi := &b.Items[i]
		n := bi.renderedTokens(b.tokens, tc)
		total += n
		w.WriteString(textHeader(bi, n))
		w.WriteByte('\n')
		text, err := bi.content(ctx, blobs)
		if err != nil {
			return nil, err
		}
		w.WriteString(text)
		if !strings.HasSuffix(text, "\n") {
			w.WriteByte('\n')
		}
	}
	fmt.Fprintf(&w, "── end: %d items, %d tok rendered\n", len(b.Items), total)
	return w.Bytes(), nil
}

func textHeader(bi *BundleItem, tokens int) string {
	var h strings.Builder
	fmt.Fprintf(&h, "── [%d] %s %s", bi.Index, bi.Role, bi.Kind)
	if bi.Tool != "" {
		h.WriteByte(' ')
		h.WriteString(bi.Tool)
	}
	id := bi.ID
	if bi.CallID != "" {
		id = bi.CallID
	}
	fmt.Fprintf(&h, " (%s)", id)
	if bi.IsError {
		h.WriteString(" error")
	}
	fmt.Fprintf(&h, "  %d tok", tokens)
	switch {
	case bi.HostPruned:
		fmt.Fprintf(&h, "  (host-pruned, %d tok originally)", bi.Tokens)
	case bi.Pruned:
		a := bi.Applied
		h.WriteString("  (pruned ")
		if a.Rung != events.RungNone {
			h.WriteString(string(a.Rung))
			h.WriteByte(' ')
		}
		fmt.Fprintf(&h, "%s, applied at request %s by %s)", a.Reason, a.Request, a.Trigger)
	case bi.Restored:
		h.WriteString("  (restored)")
	}
	if m := bi.LatestMark; m != nil && !m.Applied && m.Decision == events.Prune {
		h.WriteString("  (pending PRUNE ")
		if m.Rung != events.RungNone {
			h.WriteString(string(m.Rung))
			h.WriteByte(' ')
		}
		h.WriteString(string(m.Reason))
		h.WriteByte(')')
	}
	return h.String()
}
