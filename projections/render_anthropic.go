package projections

import (
	"context"
	"encoding/json"
	"fmt"

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
func RenderAnthropic(ctx context.Context, b Bundle, blobs BlobGetter, tc TokenCounter) ([]byte, error) {
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

// contentText is a message item's text, or its placeholder when pruned.
func (bi *BundleItem) contentText() string {
	if bi.Placeholder != "" {
		return bi.Placeholder
	}
	return bi.Text
}
