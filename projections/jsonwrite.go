package projections

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The hand-written encoder below produces the bytes marshalJSON would
// produce for the Anthropic and OpenAI requests (encoding/json, no HTML
// escaping, raw inputs compacted) without reflection: the render path sits
// in front of every model call. Strings with nothing but printable ASCII, quotes,
// backslashes, newlines, carriage returns and tabs are escaped here; any
// other string (non-ASCII, other control bytes) goes through
// encoding/json itself, so the output is identical by construction.

// appendJSONString appends s as a JSON string, as encoding/json does with
// HTML escaping off, for s holding only printable ASCII, '\n', '\r' and
// '\t' (checked by appendJSONStringSafe).
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c < 0x80 && c != '"' && c != '\\' {
			continue
		}
		var esc string
		switch c {
		case '"':
			esc = `\"`
		case '\\':
			esc = `\\`
		case '\n':
			esc = `\n`
		case '\r':
			esc = `\r`
		case '\t':
			esc = `\t`
		default:
			// Unreachable through appendJSONStringSafe, which checked s.
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = append(dst, esc...)
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendJSONStringSlow appends s encoded by encoding/json.
func appendJSONStringSlow(dst []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// appendJSONStringSafe appends s, falling back to encoding/json for strings
// the fast path does not handle.
func appendJSONStringSafe(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c >= 0x80 {
			return appendJSONStringSlow(dst, s)
		}
	}
	return appendJSONString(dst, s)
}

// appendRawJSON appends a raw JSON value compacted, as encoding/json does
// for a json.RawMessage (null when empty).
func appendRawJSON(dst []byte, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return append(dst, "null"...), nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, raw); err != nil {
		return nil, fmt.Errorf("json: error calling MarshalJSON for type json.RawMessage: %w", err)
	}
	return buf.Bytes(), nil
}

func appendText(b []byte, t anthropicText) []byte {
	b = append(b, `{"type":`...)
	b = appendJSONStringSafe(b, t.Type)
	b = append(b, `,"text":`...)
	b = appendJSONStringSafe(b, t.Text)
	return append(b, '}')
}

func appendBlock(b []byte, blk any) ([]byte, error) {
	switch v := blk.(type) {
	case anthropicText:
		return appendText(b, v), nil
	case anthropicThinking:
		b = append(b, `{"type":`...)
		b = appendJSONStringSafe(b, v.Type)
		b = append(b, `,"thinking":`...)
		b = appendJSONStringSafe(b, v.Thinking)
		b = append(b, `,"signature":`...)
		b = appendJSONStringSafe(b, v.Signature)
		return append(b, '}'), nil
	case anthropicToolUse:
		b = append(b, `{"type":`...)
		b = appendJSONStringSafe(b, v.Type)
		b = append(b, `,"id":`...)
		b = appendJSONStringSafe(b, v.ID)
		b = append(b, `,"name":`...)
		b = appendJSONStringSafe(b, v.Name)
		b = append(b, `,"input":`...)
		b, err := appendRawJSON(b, v.Input)
		if err != nil {
			return nil, err
		}
		return append(b, '}'), nil
	case anthropicToolResult:
		b = append(b, `{"type":`...)
		b = appendJSONStringSafe(b, v.Type)
		b = append(b, `,"tool_use_id":`...)
		b = appendJSONStringSafe(b, v.ToolUseID)
		b = append(b, `,"content":`...)
		b = appendJSONStringSafe(b, v.Content)
		if v.IsError {
			b = append(b, `,"is_error":true`...)
		}
		return append(b, '}'), nil
	}
	// Not a block this file knows: let encoding/json write it.
	raw, err := marshalJSON(blk)
	if err != nil {
		return nil, err
	}
	return append(b, raw...), nil
}
