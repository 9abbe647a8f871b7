package toolspec

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
)

// CanonicalJSON renders a JSON value (a tool call's arguments) with sorted
// object keys, numbers as written and no insignificant whitespace, so that
// two argument objects that differ only in key order or spacing compare
// equal. It returns the canonical text, the decoded value (numbers as
// json.Number) and ok. Invalid JSON gives the input trimmed of white space,
// a nil value and ok false. Only the first JSON value of raw is read.
//
// The text is byte for byte what encoding/json's Encoder (HTML escaping
// off) writes for the decoded value; appendCanonical writes it without
// reflection, falling back to encoding/json for strings that need escaping.
func CanonicalJSON(raw []byte) (canon string, v any, ok bool) {
	v, err := DecodeJSON(raw)
	if err != nil {
		return string(bytes.TrimSpace(raw)), nil, false
	}
	buf, fast := appendCanonical(make([]byte, 0, len(raw)), v)
	if !fast {
		return canonicalJSONSlow(raw, v)
	}
	return string(buf), v, true
}

// DecodeJSON decodes the first JSON value of raw (a call's arguments) with
// numbers kept as written (json.Number): the form CanonicalJSON renders and
// ExtractArgs reads.
func DecodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// canonicalJSONSlow is the reference encoding (encoding/json), used when
// appendCanonical meets a value it does not handle.
func canonicalJSONSlow(raw []byte, v any) (string, any, bool) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return string(bytes.TrimSpace(raw)), v, false
	}
	return strings.TrimSuffix(buf.String(), "\n"), v, true
}

// appendCanonical appends the canonical encoding of a decoded JSON value
// (maps with sorted keys). It reports false for anything it does not
// handle exactly like encoding/json.
func appendCanonical(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		if x {
			return append(b, "true"...), true
		}
		return append(b, "false"...), true
	case json.Number:
		if x == "" || !json.Valid([]byte(x)) || x[0] == '"' || x[0] == '{' || x[0] == '[' || x[0] == 't' || x[0] == 'f' || x[0] == 'n' {
			return b, false
		}
		return append(b, x...), true
	case string:
		return appendJSONString(b, x), true
	case []any:
		if x == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendCanonical(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		if x == nil {
			return append(b, "null"...), true
		}
		var small [16]string
		keys := small[:0]
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			var ok bool
			if b, ok = appendCanonical(b, x[k]); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return b, false
}

// appendJSONString quotes s as encoding/json does with HTML escaping off:
// printable ASCII other than '"' and '\\' verbatim, anything else through
// encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s) // a string always encodes
			return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
