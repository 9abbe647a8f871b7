package projections

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/placeholder"
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
func RenderText(ctx context.Context, b Bundle, blobs BlobGetter, tc events.TokenCounter) ([]byte, error) {
	return renderText(ctx, &b, itemList{vals: b.Items}, blobs, tc)
}

func renderText(ctx context.Context, b *Bundle, items itemList, blobs BlobGetter, tc events.TokenCounter) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	frags := make([][]byte, items.len())
	size, total := 256, 0
	for i := range frags {
		f, err := items.at(i).textFragment(ctx, b, blobs, tc)
		if err != nil {
			return nil, err
		}
		frags[i] = f.b
		size += len(f.b)
		total += f.tokens
	}
	w := bytes.NewBuffer(make([]byte, 0, size))
	fmt.Fprintf(w, "prunesched bundle  tenant=%s session=%s model=%s\n", b.Tenant, b.Session, orDash(b.Model))
	if hc := b.HostCompacted; hc.Items > 0 {
		fmt.Fprintf(w, "── %d items (%d tok) before the last host compaction (%s): not rendered\n", hc.Items, hc.Tokens, orDash(hc.Host))
	}
	for _, f := range frags {
		w.Write(f)
	}
	fmt.Fprintf(w, "── end: %d items, %d tok rendered\n", len(frags), total)
	return w.Bytes(), nil
}

// textFragment returns bi's block of the transcript (header line and
// content) with its rendered token count, cached per view of the item
// (its generation) and whether tokens were counted.
func (bi *BundleItem) textFragment(ctx context.Context, b *Bundle, blobs BlobGetter, tc events.TokenCounter) (*fragment, error) {
	if f := bi.cached(textFragment); f != nil && bi.gen != 0 && f.gen == bi.gen && f.counted == (tc != nil) {
		return f, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := bi.renderedTokens(b.tokens, tc)
	text, err := bi.content(ctx, blobs)
	if err != nil {
		return nil, err
	}
	h := textHeader(bi, n)
	out := make([]byte, 0, len(h)+len(text)+2)
	out = append(out, h...)
	out = append(out, '\n')
	out = append(out, text...)
	if !strings.HasSuffix(text, "\n") {
		out = append(out, '\n')
	}
	f := &fragment{gen: bi.gen, counted: tc != nil, tokens: n, b: out}
	b.rc.keep(bi, textFragment, f)
	return f, nil
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
		placeholder.WriteRule(&h, a.Rung, a.Reason)
		fmt.Fprintf(&h, ", applied at request %s by %s)", a.Request, a.Trigger)
	case bi.Restored:
		h.WriteString("  (restored)")
	}
	if m := bi.LatestMark; m != nil && !m.Applied && m.Decision == events.Prune {
		h.WriteString("  (pending PRUNE ")
		placeholder.WriteRule(&h, m.Rung, m.Reason)
		h.WriteByte(')')
	}
	return h.String()
}
