package projections

import (
	"context"
	"fmt"

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
func RenderOpenAI(ctx context.Context, b Bundle, blobs BlobGetter, tc events.TokenCounter) ([]byte, error) {
	return renderOpenAI(ctx, &b, itemList{vals: b.Items}, blobs)
}

// renderOpenAI writes what marshalJSON(openaiRequest) would, from per-item
// fragments (cached, see render_cache.go): an assistant text is its
// escaped content (JSON escaping is per character, so the run's joined
// content is the fragments joined by an escaped blank line), an assistant
// tool call its tool_calls entry, any other item its whole message.
func renderOpenAI(ctx context.Context, b *Bundle, items itemList, blobs BlobGetter) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	frags := make([][]byte, items.len())
	size := 64 + len(b.Model)
	for i := range frags {
		f, err := items.at(i).openaiFragment(ctx, blobs, b.rc)
		if err != nil {
			return nil, err
		}
		frags[i] = f
		size += len(f) + 8
	}
	out := make([]byte, 0, size+len(frags)*48)
	out = append(out, `{"model":`...)
	out = appendJSONStringSafe(out, b.Model)
	out = append(out, `,"messages":[`...)
	first := true
	sep := func() {
		if !first {
			out = append(out, ',')
		}
		first = false
	}
	for i := 0; i < len(frags); {
		if items.at(i).Role != events.RoleAssistant {
			sep()
			out = append(out, frags[i]...)
			i++
			continue
		}
		// One message for the run of assistant items.
		end := i
		texts, calls := 0, 0
		for ; end < len(frags) && items.at(end).Role == events.RoleAssistant; end++ {
			switch items.at(end).Kind {
			case ItemText:
				texts++
			case ItemToolUse:
				calls++
			}
		}
		if texts+calls > 0 {
			sep()
			out = append(out, `{"role":"assistant","content":`...)
			if texts == 0 {
				out = append(out, "null"...)
			} else {
				out = append(out, '"')
				n := 0
				for j := i; j < end; j++ {
					if items.at(j).Kind == ItemText {
						if n > 0 {
							out = append(out, `\n\n`...)
						}
						n++
						out = append(out, frags[j]...)
					}
				}
				out = append(out, '"')
			}
			if calls > 0 {
				out = append(out, `,"tool_calls":[`...)
				n := 0
				for j := i; j < end; j++ {
					if items.at(j).Kind == ItemToolUse {
						if n > 0 {
							out = append(out, ',')
						}
						n++
						out = append(out, frags[j]...)
					}
				}
				out = append(out, ']')
			}
			out = append(out, '}')
		}
		i = end
	}
	return append(out, "]}"...), nil
}

// openaiFragment returns bi's part of the OpenAI rendering (see
// renderOpenAI), nil for an assistant item that adds nothing.
func (bi *BundleItem) openaiFragment(ctx context.Context, blobs BlobGetter, rc *renderCache) ([]byte, error) {
	if bi.Role == events.RoleAssistant && bi.Kind != ItemText && bi.Kind != ItemToolUse {
		return nil, nil
	}
	if f := bi.cached(openaiFragment); f != nil && f.sameContent(bi) {
		return f.b, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []byte
	switch {
	case bi.Role == events.RoleAssistant && bi.Kind == ItemText:
		q := appendJSONStringSafe(nil, bi.contentText())
		out = q[1 : len(q)-1]
	case bi.Role == events.RoleAssistant:
		in := bi.wireInput()
		args := string(in)
		if !bi.Pruned {
			args = canonicalArgs(in)
		}
		out = make([]byte, 0, 64+len(bi.CallID)+len(bi.Tool)+len(args)+len(args)/8)
		out = append(out, `{"id":`...)
		out = appendJSONStringSafe(out, bi.CallID)
		out = append(out, `,"type":"function","function":{"name":`...)
		out = appendJSONStringSafe(out, bi.Tool)
		out = append(out, `,"arguments":`...)
		out = appendJSONStringSafe(out, args)
		out = append(out, "}}"...)
	case bi.Kind == ItemText:
		c := bi.contentText()
		out = make([]byte, 0, 32+len(bi.Role)+len(c)+len(c)/16)
		out = append(out, `{"role":`...)
		out = appendJSONStringSafe(out, string(bi.Role))
		out = append(out, `,"content":`...)
		out = appendJSONStringSafe(out, c)
		out = append(out, '}')
	case bi.Kind == ItemToolResult:
		c, err := bi.content(ctx, blobs)
		if err != nil {
			return nil, err
		}
		out = make([]byte, 0, 48+len(bi.CallID)+len(c)+len(c)/16)
		out = append(out, `{"role":"tool","content":`...)
		out = appendJSONStringSafe(out, c)
		if bi.CallID != "" {
			out = append(out, `,"tool_call_id":`...)
			out = appendJSONStringSafe(out, bi.CallID)
		}
		out = append(out, '}')
	default:
		return nil, fmt.Errorf("item %s: kind %q with role %q", bi.ID, bi.Kind, bi.Role)
	}
	rc.keep(bi, openaiFragment, bi.contentFragment(out))
	return out, nil
}
