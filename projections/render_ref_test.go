package projections

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/prunesched/prunesched/events"
)

// The renderers as they were before fragment caching, kept as the
// reference the cached renderers must match byte for byte.

func refRenderAnthropic(ctx context.Context, b Bundle, blobs BlobGetter, tc events.TokenCounter) ([]byte, error) {
	req := anthropicRequest{Model: b.Model, MaxTokens: b.maxTokens(), Messages: []anthropicMessage{}}
	size := 0
	for i := range b.Items {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		bi := &b.Items[i]
		if bi.Role == events.RoleSystem {
			req.System = append(req.System, anthropicText{Type: "text", Text: bi.contentText()})
			continue
		}
		var block any
		switch bi.Kind {
		case ItemText:
			block = anthropicText{Type: "text", Text: bi.contentText()}
		case ItemThinking:
			block = anthropicThinking{Type: "thinking", Thinking: bi.Text, Signature: bi.Signature}
		case ItemToolUse:
			block = anthropicToolUse{Type: "tool_use", ID: bi.CallID, Name: bi.Tool, Input: bi.wireInput()}
		case ItemToolResult:
			text, err := bi.content(ctx, blobs)
			if err != nil {
				return nil, err
			}
			size += len(text)
			block = anthropicToolResult{Type: "tool_result", ToolUseID: bi.CallID, Content: text, IsError: bi.IsError}
		default:
			return nil, fmt.Errorf("item %s: unknown kind %q", bi.ID, bi.Kind)
		}
		role := bi.Role
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == role {
			req.Messages[n-1].Content = append(req.Messages[n-1].Content, block)
			continue
		}
		req.Messages = append(req.Messages, anthropicMessage{Role: role, Content: []any{block}})
	}
	return encodeAnthropic(&req, size+len(b.Items)*64)
}

func refRenderOpenAI(ctx context.Context, b Bundle, blobs BlobGetter, tc events.TokenCounter) ([]byte, error) {
	req := openaiRequest{Model: b.Model, Messages: []openaiMessage{}}
	var texts []string
	var calls []openaiToolCall
	inRun := false
	flush := func() {
		if !inRun {
			return
		}
		inRun = false
		if len(texts) == 0 && len(calls) == 0 {
			return
		}
		m := openaiMessage{Role: "assistant", ToolCalls: calls}
		if len(texts) > 0 {
			c := strings.Join(texts, "\n\n")
			m.Content = &c
		}
		req.Messages = append(req.Messages, m)
		texts, calls = nil, nil
	}
	for i := range b.Items {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		bi := &b.Items[i]
		if bi.Role == events.RoleAssistant {
			inRun = true
			switch bi.Kind {
			case ItemText:
				texts = append(texts, bi.contentText())
			case ItemToolUse:
				args := string(bi.wireInput())
				if !bi.Pruned {
					args = canonicalArgs(bi.wireInput())
				}
				calls = append(calls, openaiToolCall{
					ID: bi.CallID, Type: "function",
					Function: openaiFunction{Name: bi.Tool, Arguments: args},
				})
			}
			continue
		}
		flush()
		switch bi.Kind {
		case ItemText:
			c := bi.contentText()
			req.Messages = append(req.Messages, openaiMessage{Role: string(bi.Role), Content: &c})
		case ItemToolResult:
			c, err := bi.content(ctx, blobs)
			if err != nil {
				return nil, err
			}
			req.Messages = append(req.Messages, openaiMessage{Role: "tool", Content: &c, ToolCallID: bi.CallID})
		default:
			return nil, fmt.Errorf("item %s: kind %q with role %q", bi.ID, bi.Kind, bi.Role)
		}
	}
	flush()
	return marshalJSON(req)
}

func refRenderText(ctx context.Context, b Bundle, blobs BlobGetter, tc events.TokenCounter) ([]byte, error) {
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
		w.WriteString(refTextHeader(bi, n))
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

func refTextHeader(bi *BundleItem, tokens int) string {
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

// encodeAnthropic writes req as marshalJSON(req) would (the whole
// request at once, as RenderAnthropic did before fragments).
func encodeAnthropic(req *anthropicRequest, sizeHint int) ([]byte, error) {
	b := make([]byte, 0, sizeHint+1024)
	b = append(b, `{"model":`...)
	b = appendJSONStringSafe(b, req.Model)
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, int64(req.MaxTokens), 10)
	if len(req.System) > 0 {
		b = append(b, `,"system":[`...)
		for i, t := range req.System {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendText(b, t)
		}
		b = append(b, ']')
	}
	b = append(b, `,"messages":[`...)
	for i, m := range req.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = appendJSONStringSafe(b, string(m.Role))
		b = append(b, `,"content":`...)
		if m.Content == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for j, blk := range m.Content {
				if j > 0 {
					b = append(b, ',')
				}
				var err error
				if b, err = appendBlock(b, blk); err != nil {
					return nil, err
				}
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	return b, nil
}
