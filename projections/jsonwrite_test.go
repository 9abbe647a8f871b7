package projections

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The hand-written Anthropic encoder must produce exactly what
// encoding/json produces.
func TestEncodeAnthropicMatchesEncodingJSON(t *testing.T) {
	strs := []string{"", "plain", "quote \" and \\ backslash", "new\nline\r\ttab", "<html> & é ü 日本",
		"ctrl \x00\x01\b\f\x1f", "sep \u2028 \u2029", "bad utf8 \xff\xfe", "del \x7f"}
	for _, s := range strs {
		req := anthropicRequest{Model: s, MaxTokens: 7, System: []anthropicText{{Type: "text", Text: s}},
			Messages: []anthropicMessage{
				{Role: "assistant", Content: []any{
					anthropicText{Type: "text", Text: s},
					anthropicThinking{Type: "thinking", Thinking: s, Signature: s},
					anthropicToolUse{Type: "tool_use", ID: "c1", Name: s, Input: json.RawMessage("{ \"a\" : [1, 2],\n \"b\": \"<x>\" }")},
				}},
				{Role: "user", Content: []any{
					anthropicToolResult{Type: "tool_result", ToolUseID: "c1", Content: s, IsError: true},
					anthropicToolResult{Type: "tool_result", ToolUseID: "c2", Content: s},
				}},
			}}
		want, err := marshalJSON(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeAnthropic(&req, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("string %q:\n got %s\nwant %s", s, got, want)
		}
	}
	req := anthropicRequest{Messages: []anthropicMessage{}}
	want, _ := marshalJSON(req)
	if got, _ := encodeAnthropic(&req, 0); !bytes.Equal(got, want) {
		t.Fatalf("empty request: got %s, want %s", got, want)
	}
	bad := anthropicRequest{Messages: []anthropicMessage{{Role: "assistant", Content: []any{anthropicToolUse{Type: "tool_use", Input: json.RawMessage("{bad")}}}}}
	if _, err := encodeAnthropic(&bad, 0); err == nil {
		t.Fatal("invalid input encoded without error")
	}
}
