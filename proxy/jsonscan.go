package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/prunesched/prunesched/internal/jsonplain"
)

// The proxy never re-encodes a client's request: it finds the byte spans of
// the few values it may replace and splices new bytes in, so every other
// byte (key order, number formatting, thinking signatures, escapes) reaches
// the upstream exactly as the client wrote it. This file is the small,
// allocation-light scanner that finds those spans.

// member is one member of a JSON object: its decoded key and the raw bytes
// of its value, with the value's offset in the scanned buffer.
type member struct {
	key []byte // raw key bytes between the quotes (escapes not decoded)
	val []byte
	off int
}

// elem is one element of a JSON array.
type elem struct {
	val []byte
	off int
}

var errJSON = errors.New("malformed JSON")

func jsonErr(i int, what string) error { return fmt.Errorf("%w at byte %d: %s", errJSON, i, what) }

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
// It jumps from quote to quote (bytes.IndexByte is vectorised) and counts
// the backslashes before each: an odd run escapes it.
func skipString(b []byte, i int) (int, error) {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return 0, jsonErr(i, "unterminated string")
		}
		i += j
		k := i - 1
		for k >= 0 && b[k] == '\\' {
			k--
		}
		if (i-1-k)%2 == 0 {
			return i + 1, nil
		}
		i++
	}
}

// skipValue returns the index after the JSON value starting at b[i]
// (whitespace before it skipped).
func skipValue(b []byte, i int) (int, error) {
	i = skipWS(b, i)
	if i >= len(b) {
		return 0, jsonErr(i, "unexpected end")
	}
	switch c := b[i]; c {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				j, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = j
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, jsonErr(i, "unterminated "+string(c))
	default:
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if j == i {
					return 0, jsonErr(i, "unexpected character")
				}
				return j, nil
			}
			j++
		}
		if j == i {
			return 0, jsonErr(i, "unexpected end")
		}
		return j, nil
	}
}

// scanObject splits the object b (whitespace around it allowed) into its
// members. base is added to every offset.
func scanObject(b []byte, base int) ([]member, error) {
	return scanObjectHook(b, base, "", nil)
}

// scanObjectHook is scanObject where the value of the first member named
// hookKey is skipped by hook instead of skipValue: hook gets the value's
// index in b and returns the index after it (the request parsers scan the
// messages array once, reusing a cached parse of its prefix).
func scanObjectHook(b []byte, base int, hookKey string, hook func(i int) (int, error)) ([]member, error) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, jsonErr(base+i, "want object")
	}
	i = skipWS(b, i+1)
	var out []member
	if i < len(b) && b[i] == '}' {
		return out, nil
	}
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return nil, jsonErr(base+i, "want key")
		}
		j, err := skipString(b, i)
		if err != nil {
			return nil, err
		}
		key := b[i+1 : j-1]
		i = skipWS(b, j)
		if i >= len(b) || b[i] != ':' {
			return nil, jsonErr(base+i, "want ':'")
		}
		i = skipWS(b, i+1)
		var end int
		if hook != nil && string(key) == hookKey {
			end, err = hook(i)
			hook = nil
		} else {
			end, err = skipValue(b, i)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, member{key: key, val: b[i:end], off: base + i})
		i = skipWS(b, end)
		if i >= len(b) {
			return nil, jsonErr(base+i, "unterminated object")
		}
		if b[i] == '}' {
			return out, nil
		}
		if b[i] != ',' {
			return nil, jsonErr(base+i, "want ',' or '}'")
		}
		i++
	}
}

// scanArray splits the array b into its elements.
func scanArray(b []byte, base int) ([]elem, error) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, jsonErr(base+i, "want array")
	}
	out, _, err := scanElems(b, i+1, true, base)
	return out, err
}

// scanElems splits the rest of an array from b[i]: right after its '['
// when first, else right after one of its elements. It returns the
// elements that follow and the index after the closing ']'.
func scanElems(b []byte, i int, first bool, base int) ([]elem, int, error) {
	var out []elem
	if first {
		if j := skipWS(b, i); j < len(b) && b[j] == ']' {
			return out, j + 1, nil
		}
	}
	for ; ; first = false {
		if !first {
			done, next, err := arrayNext(b, skipWS(b, i), base)
			if err != nil {
				return nil, 0, err
			}
			if done {
				return out, next, nil
			}
			i = next
		}
		i = skipWS(b, i)
		end, err := skipValue(b, i)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, elem{val: b[i:end], off: base + i})
		i = end
	}
}

// arrayNext reads what follows an array element at i: the array's end
// (done) or a comma, and returns the position after it.
func arrayNext(b []byte, i, base int) (done bool, next int, err error) {
	if i >= len(b) {
		return false, 0, jsonErr(base+i, "unterminated array")
	}
	switch b[i] {
	case ']':
		return true, i + 1, nil
	case ',':
		return false, i + 1, nil
	}
	return false, 0, jsonErr(base+i, "want ',' or ']'")
}

// get returns the value of key, or nil.
func get(ms []member, key string) []byte {
	for i := range ms {
		if string(ms[i].key) == key {
			return ms[i].val
		}
	}
	return nil
}

// getMember returns the member named key, or nil.
func getMember(ms []member, key string) *member {
	for i := range ms {
		if string(ms[i].key) == key {
			return &ms[i]
		}
	}
	return nil
}

// unquote decodes a JSON string literal; the common case without escapes
// costs one allocation. A literal with escapes (every tool output has its
// newlines escaped) is decoded by jsontext, about 4x faster than
// encoding/json on a 200 KiB output, which matters on the request path.
// jsontext refuses what encoding/json repairs (invalid UTF-8, a lone
// surrogate escape, both replaced by U+FFFD); those go to encoding/json,
// so a literal with escapes always decodes to what encoding/json gives
// (FuzzUnquote).
func unquote(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", jsonErr(0, "want string")
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner), nil
	}
	if s, ok := unquoteSimple(inner); ok {
		return s, nil
	}
	// AppendUnquote grows its buffer to len(raw) first: one allocation
	// that size, not a second one and a copy.
	if out, err := jsontext.AppendUnquote(make([]byte, 0, len(raw)), raw); err == nil {
		return string(out), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("decode string: %w", err)
	}
	return s, nil
}

// unquoteSimple decodes the inside of a JSON string literal when it
// holds only valid UTF-8 text and the escapes that stand for one ASCII
// byte (\" \\ \/ \b \f \n \r \t): what a tool output is. ok is false
// for anything else (a \u escape, a control byte, a bare quote, invalid
// UTF-8), which the caller decodes the general way; where ok, the string
// is what encoding/json decodes (FuzzUnquote). It is the cost of a new
// output before forwarding that grows with its size: runs of plain
// ASCII are found eight bytes at a time (jsonplain.Skip) and copied
// whole, into the string's own buffer (strings.Builder: no second copy).
func unquoteSimple(inner []byte) (string, bool) {
	var sb strings.Builder
	sb.Grow(len(inner))
	for i := 0; i < len(inner); {
		j := jsonplain.Skip(inner, i)
		sb.Write(inner[i:j])
		if i = j; i == len(inner) {
			break
		}
		switch c := inner[i]; {
		case c == '\\':
			if i+1 == len(inner) {
				return "", false
			}
			e := simpleEscape(inner[i+1])
			if e == 0 {
				return "", false
			}
			sb.WriteByte(e)
			i += 2
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(inner[i:])
			if r == utf8.RuneError && n <= 1 {
				return "", false
			}
			sb.Write(inner[i : i+n])
			i += n
		default: // a control byte or a bare quote: not a valid literal
			return "", false
		}
	}
	return sb.String(), true
}

// simpleEscape is the byte the escape \e stands for, 0 when e is not one
// of the one-byte escapes (a \u escape or an invalid one).
func simpleEscape(e byte) byte {
	switch e {
	case '"', '\\', '/':
		return e
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return 0
}

// str decodes raw as a string, returning "" for anything else.
func str(raw []byte) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	s, _ := unquote(raw)
	return s
}

// isTrue reports whether raw is the literal true.
func isTrue(raw []byte) bool { return string(raw) == "true" }

// quote encodes s as a JSON string without HTML escaping.
func quote(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// edit replaces body[start:end] with repl.
type edit struct {
	start, end int
	repl       []byte
}

// splice applies non-overlapping edits to body and returns a new buffer.
// An insertion (start == end) goes before an edit that starts where it is.
func splice(body []byte, edits []edit) ([]byte, error) {
	sort.Slice(edits, func(i, j int) bool {
		a, b := edits[i], edits[j]
		return a.start < b.start || a.start == b.start && a.end < b.end
	})
	size := len(body)
	for i, e := range edits {
		if e.start > e.end || e.end > len(body) || (i > 0 && e.start < edits[i-1].end) {
			return nil, fmt.Errorf("splice: overlapping or out-of-range edit [%d,%d)", e.start, e.end)
		}
		size += len(e.repl) - (e.end - e.start)
	}
	out := make([]byte, 0, size)
	at := 0
	for _, e := range edits {
		out = append(out, body[at:e.start]...)
		out = append(out, e.repl...)
		at = e.end
	}
	return append(out, body[at:]...), nil
}

// atoiPrefix parses the decimal number at the start of s.
func atoiPrefix(s string) (int, bool) {
	j := 0
	for j < len(s) && (s[j] >= '0' && s[j] <= '9' || j == 0 && s[j] == '-') {
		j++
	}
	n, err := strconv.Atoi(s[:j])
	return n, err == nil
}
