package projections

import (
	"context"
	"fmt"
	"strings"

	"github.com/prunesched/prunesched/events"
)

type openaiRequest struct {
	Model    string          `json:"model"`
	Messages []openaiMessage `json:"messages"`
}

// openaiMessage is one Chat Completions message. Content is null only on an
// assistant message that carries tool calls and no text.
type openaiMessage struct {
	Role       string           `json:"role"`
	Content    *string          `json:"content"`
	ToolCalls  []openaiToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

type openaiToolCall struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Function openaiFunction `json:"function"`
}

type openaiFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// RenderOpenAI renders the bundle as an OpenAI Chat Completions request
// body: {"model","messages"}. System items become role "system" messages in
// place; user text role "user"; a run of consecutive assistant items becomes
// one assistant message whose content is its texts joined by a blank line
// (null when none) and whose tool_calls carry each call with arguments as
// the canonical JSON string (sorted keys; a pruned input is the
// {"prunesched_pruned": ...} object); tool results become role "tool"
// messages. Thinking blocks are omitted (Chat Completions has no field for
// them), and so is is_error (no field either: the output text stands). An
// assistant run of thinking only yields no message. The output is
// deterministic. tc is not needed and may be nil.
func RenderOpenAI(ctx context.Context, b Bundle, blobs BlobGetter, tc TokenCounter) ([]byte, error) {
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
					args = canonicalJSON(bi.wireInput())
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
