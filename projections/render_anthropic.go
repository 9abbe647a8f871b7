package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/prunesched/prunesched/events"
)

// anthropicRequest is a Messages API request body. Structs, not maps, keep
// the key order stable.
type anthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens int                `json:"max_tokens"`
	System    []anthropicText    `json:"system,omitempty"`
	Messages  []anthropicMessage `json:"messages"`
}

type anthropicMessage struct {
	Role    events.Role `json:"role"`
	Content []any       `json:"content"`
}

type anthropicText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicThinking struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type anthropicToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anthropicToolResult struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error,omitempty"`
}

// RenderAnthropic renders the bundle as an Anthropic Messages API request
// body: {"model","max_tokens","system":[text blocks],"messages":[...]}.
// System items (wherever they occur) go into "system" in order; consecutive
// items of the same role merge into one message so roles alternate
// (assistant text, thinking and tool_use blocks; tool_result blocks and the
// user text after them). Thinking blocks are passed through with their
// signature. A pruned output keeps its tool_result block, tool_use_id and
// is_error with the placeholder as content; a pruned input becomes the
// object {"prunesched_pruned": placeholder, residue fields}. max_tokens is
// the bundle's (DefaultMaxTokens by default); no cache_control is written.
// The output is deterministic. tc is not needed and may be nil.
func RenderAnthropic(ctx context.Context, b Bundle, blobs BlobGetter, tc events.TokenCounter) ([]byte, error) {
	return renderAnthropic(ctx, nil, &b, itemList{vals: b.Items}, blobs)
}

// renderAnthropic appends the rendering to dst (nil: a new buffer).
func renderAnthropic(ctx context.Context, dst []byte, b *Bundle, items itemList, blobs BlobGetter) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Each item is one block (a system item one "system" text block),
	// cached per item (render_cache.go); the framing is written here, in
	// two passes over the items (system blocks first), straight into dst.
	out := dst
	if out == nil {
		// No buffer to reuse: size one exactly (the fragments are cached,
		// so this pass is cheap next to growing a megabyte by doubling).
		size := 64 + len(b.Model)
		for i := range items.len() {
			f, err := items.at(i).anthropicBlock(ctx, blobs, b.rc)
			if err != nil {
				return nil, err
			}
			size += len(f) + 32
		}
		out = make([]byte, 0, size)
	}
	out = append(out, `{"model":`...)
	out = appendJSONStringSafe(out, b.Model)
	out = append(out, `,"max_tokens":`...)
	out = strconv.AppendInt(out, int64(b.maxTokens()), 10)
	first := true
	for i := range items.len() {
		bi := items.at(i)
		if bi.Role != events.RoleSystem {
			continue
		}
		f, err := bi.anthropicBlock(ctx, blobs, b.rc)
		if err != nil {
			return nil, err
		}
		if first {
			out = append(out, `,"system":[`...)
			first = false
		} else {
			out = append(out, ',')
		}
		out = append(out, f...)
	}
	if !first {
		out = append(out, ']')
	}
	out = append(out, `,"messages":[`...)
	var role events.Role
	open := false
	for i := range items.len() {
		bi := items.at(i)
		if bi.Role == events.RoleSystem {
			continue
		}
		f, err := bi.anthropicBlock(ctx, blobs, b.rc)
		if err != nil {
			return nil, err
		}
		switch {
		case open && bi.Role == role:
			out = append(out, ',')
		default:
			if open {
				out = append(out, "]},"...)
			}
			out = append(out, `{"role":`...)
			out = appendJSONStringSafe(out, string(bi.Role))
			out = append(out, `,"content":[`...)
			open, role = true, bi.Role
		}
		out = append(out, f...)
	}
	if open {
		out = append(out, "]}"...)
	}
	return append(out, "]}"...), nil
}

// anthropicBlock returns bi's block as RenderAnthropic writes it (a system
// item's as its "system" text block), from the cache when bi's content is
// unchanged since it was rendered.
func (bi *BundleItem) anthropicBlock(ctx context.Context, blobs BlobGetter, rc *renderCache) ([]byte, error) {
	if f := bi.cached(anthropicFragment); f != nil && f.sameContent(bi) {
		return f.b, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var block any
	n := 64 + len(bi.CallID) + len(bi.Tool)
	switch {
	case bi.Role == events.RoleSystem:
		block = anthropicText{Type: "text", Text: bi.contentText()}
		n += len(bi.Text) + len(bi.Placeholder)
	case bi.Kind == ItemText:
		block = anthropicText{Type: "text", Text: bi.contentText()}
		n += len(bi.Text) + len(bi.Placeholder)
	case bi.Kind == ItemThinking:
		block = anthropicThinking{Type: "thinking", Thinking: bi.Text, Signature: bi.Signature}
		n += len(bi.Text) + len(bi.Signature)
	case bi.Kind == ItemToolUse:
		in := bi.wireInput()
		block = anthropicToolUse{Type: "tool_use", ID: bi.CallID, Name: bi.Tool, Input: in}
		n += len(in)
	case bi.Kind == ItemToolResult:
		text, err := bi.content(ctx, blobs)
		if err != nil {
			return nil, err
		}
		block = anthropicToolResult{Type: "tool_result", ToolUseID: bi.CallID, Content: text, IsError: bi.IsError}
		n += len(text) + len(text)/16
	default:
		return nil, fmt.Errorf("item %s: unknown kind %q", bi.ID, bi.Kind)
	}
	out, err := appendBlock(make([]byte, 0, n), block)
	if err != nil {
		return nil, err
	}
	rc.keep(bi, anthropicFragment, bi.contentFragment(out))
	return out, nil
}

// contentText is a message item's text, or its placeholder when pruned.
func (bi *BundleItem) contentText() string {
	if bi.Placeholder != "" {
		return bi.Placeholder
	}
	return bi.Text
}
