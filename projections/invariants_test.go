package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/prunesched/prunesched/internal/testutil"
)

// resultsInSession returns the call ids that have a rendered tool result.
func resultsInSession(b Bundle) map[string]bool {
	m := map[string]bool{}
	for _, it := range b.Items {
		if it.Kind == ItemToolResult {
			m[it.CallID] = true
		}
	}
	return m
}

func TestAnthropicInvariants(t *testing.T) {
	fx := loadFixture(t)
	b := feed(fx.events).Bundle()
	out, err := RenderAnthropic(context.Background(), b, fx.blobs, nil)
	testutil.NoError(t, err)
	var req struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		System    []struct {
			Type, Text string
		} `json:"system"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	testutil.NoError(t, json.Unmarshal(out, &req))
	testutil.Equal(t, req.Model, "claude-opus-4-1", "model (from the last model request)")
	testutil.Equal(t, req.MaxTokens, DefaultMaxTokens, "max_tokens")
	testutil.Equal(t, len(req.System), 1, "system blocks (host-compacted one dropped)")

	want := resultsInSession(b)
	seenUse := map[string]int{}
	results := map[string]int{}
	for i, m := range req.Messages {
		if i > 0 {
			testutil.True(t, m.Role != req.Messages[i-1].Role, "message %d repeats role %s", i, m.Role)
		}
		testutil.True(t, m.Role == "user" || m.Role == "assistant", "message %d role %q", i, m.Role)
		for _, blk := range m.Content {
			switch blk["type"] {
			case "tool_use":
				testutil.Equal(t, m.Role, "assistant", "tool_use role")
				_, isObj := blk["input"].(map[string]any)
				testutil.True(t, isObj, "tool_use %v input is not an object", blk["id"])
				seenUse[blk["id"].(string)] = i
			case "tool_result":
				testutil.Equal(t, m.Role, "user", "tool_result role")
				id := blk["tool_use_id"].(string)
				at, ok := seenUse[id]
				testutil.True(t, ok && at < i, "tool_result %s without an earlier tool_use", id)
				results[id]++
			case "thinking":
				testutil.True(t, blk["signature"] != "", "thinking without signature")
			}
		}
	}
	for id := range seenUse {
		if want[id] {
			testutil.Equal(t, results[id], 1, "tool_results for "+id)
		} else {
			testutil.Equal(t, results[id], 0, "tool_results for "+id+" (none in session)")
		}
	}
	testutil.Equal(t, len(seenUse), 10, "tool_use blocks")
}

func TestOpenAIInvariants(t *testing.T) {
	fx := loadFixture(t)
	b := feed(fx.events).Bundle()
	out, err := RenderOpenAI(context.Background(), b, fx.blobs, nil)
	testutil.NoError(t, err)
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role       string  `json:"role"`
			Content    *string `json:"content"`
			ToolCallID string  `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	testutil.NoError(t, json.Unmarshal(out, &req))
	want := resultsInSession(b)
	calls := map[string]int{}
	tools := map[string]int{}
	for i, m := range req.Messages {
		switch m.Role {
		case "assistant":
			testutil.True(t, m.Content != nil || len(m.ToolCalls) > 0, "empty assistant message %d", i)
			for _, c := range m.ToolCalls {
				testutil.Equal(t, c.Type, "function", "tool call type")
				testutil.True(t, json.Valid([]byte(c.Function.Arguments)), "arguments of %s not JSON", c.ID)
				calls[c.ID] = i
			}
		case "tool":
			at, ok := calls[m.ToolCallID]
			testutil.True(t, ok && at < i, "tool message %s without an earlier tool call", m.ToolCallID)
			testutil.True(t, m.Content != nil, "tool message without content")
			tools[m.ToolCallID]++
		case "system", "user":
			testutil.True(t, m.Content != nil, "%s message without content", m.Role)
		default:
			t.Fatalf("unexpected role %q", m.Role)
		}
	}
	for id := range calls {
		n := 0
		if want[id] {
			n = 1
		}
		testutil.Equal(t, tools[id], n, "tool messages for "+id)
	}
	testutil.Equal(t, len(calls), 10, "tool calls")
}

var textTotal = regexp.MustCompile(`── end: (\d+) items, (\d+) tok rendered`)

// TestTokenInvariants holds the ledger's definitions: Rendered is the sum
// over rendered items, and equals Raw minus what the host removed plus its
// placeholders, minus what we removed plus our placeholders.
func TestTokenInvariants(t *testing.T) {
	fx := loadFixture(t)
	s := feed(fx.events)
	st, err := s.Stats(context.Background(), nil, fx.tc)
	testutil.NoError(t, err)
	tk := st.Tokens
	testutil.Equal(t, tk.Rendered, tk.Raw-tk.HostCompacted-tk.HostPruned+tk.HostPlaceholder-tk.Removed+tk.Placeholder, "Rendered by definition")

	b := s.Bundle()
	sum, raw := 0, 0
	for _, it := range s.Items() {
		raw += it.Tokens
	}
	for _, bi := range b.Items {
		switch {
		case bi.Pruned && bi.Kind == ItemToolUse:
			in, _ := marshalJSON(prunedInput(&bi))
			sum += fx.tc.Count(string(in))
		case bi.Placeholder != "":
			sum += fx.tc.Count(bi.Placeholder)
		default:
			sum += bi.Tokens
		}
	}
	testutil.Equal(t, tk.Raw, raw, "Raw is the sum of stored counts")
	testutil.Equal(t, tk.Rendered, sum, "Rendered is the sum over rendered items")
	testutil.True(t, tk.Removed > 0 && tk.Placeholder > 0 && tk.HostCompacted > 0 && tk.HostPruned > 0, "fixture should exercise every part: %+v", tk)

	txt, err := RenderText(context.Background(), b, fx.blobs, fx.tc)
	testutil.NoError(t, err)
	m := textTotal.FindSubmatch(txt)
	testutil.True(t, m != nil, "text rendering has no total line")
	n, _ := strconv.Atoi(string(m[2]))
	testutil.Equal(t, n, tk.Rendered, "text total")
	testutil.Equal(t, string(m[1]), fmt.Sprint(st.RenderedItems), "text item count")
}

// Placeholders are counted once per distinct text.
func TestPlaceholderTokensCached(t *testing.T) {
	fx := loadFixture(t)
	s := feed(fx.events)
	tc := &wordCounter{}
	_, err := s.Stats(context.Background(), nil, tc)
	testutil.NoError(t, err)
	first := tc.Calls()
	testutil.Equal(t, first, 3, "distinct placeholder texts counted (two ours, one host)")
	_, err = s.Stats(context.Background(), nil, tc)
	testutil.NoError(t, err)
	_, err = RenderText(context.Background(), s.Bundle(), fx.blobs, tc)
	testutil.NoError(t, err)
	testutil.Equal(t, tc.Calls(), first, "counts after caching")
}
