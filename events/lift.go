package events

import (
	"bytes"
	"encoding/json"
)

// liftBytes is the input size from which DecodeInput lifts a tool output
// out of the input before decoding the rest (see liftOutput).
const liftBytes = 1 << 20

// decodeLifted decodes b, whose data.output string raw was lifted out of
// it leaving rest (the same input with "" in its place): the rest is
// decoded as usual, and raw once, into the output. Decoding b whole would
// hold several copies of a large output at once (the strict decoder
// buffers its input, then the data object again, then the string); this
// holds the output once. ok is false when the lifted decode does not give
// a tool result with an output: the caller decodes b whole, which also
// gives the usual error for a bad input.
func decodeLifted(rest, raw []byte) (Event, bool) {
	e, err := Decode(rest)
	if err != nil {
		return Event{}, false
	}
	tr, ok := e.Data.(*ToolResult)
	if !ok || tr.Output == nil || *tr.Output != "" {
		return Event{}, false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return Event{}, false
	}
	*tr.Output = s
	if e.Validate() != nil {
		return Event{}, false
	}
	return e, true
}

// liftOutput finds, in an input event b, the string value of data.output
// and returns b with "" in its place (rest, a copy without the string) and
// the string's raw JSON. ok is false unless the place is unambiguous: the
// top-level object has one "data" member, an object, whose one "output"
// member is a string, and no key of either object is escaped or spelled
// like "data" or "output" in another case (encoding/json would match those
// too). The scan does not validate the JSON: decoding does.
func liftOutput(b []byte) (rest, raw []byte, ok bool) {
	i := skipWS(b, 0)
	ds, _, ok := member(b, i, `"data"`)
	if !ok || ds < 0 || b[ds] != '{' {
		return nil, nil, false
	}
	vs, ve, ok := member(b, ds, `"output"`)
	if !ok || vs < 0 || b[vs] != '"' {
		return nil, nil, false
	}
	rest = make([]byte, 0, len(b)-(ve-vs)+2)
	rest = append(rest, b[:vs]...)
	rest = append(rest, `""`...)
	rest = append(rest, b[ve:]...)
	return rest, b[vs:ve], true
}

// member scans the object at b[i] for the member named key (quoted, as in
// the input) and returns its value's span (-1, -1 when absent). ok is
// false for a malformed object or an ambiguous key (see liftOutput).
func member(b []byte, i int, key string) (vs, ve int, ok bool) {
	vs, ve = -1, -1
	if i >= len(b) || b[i] != '{' {
		return vs, ve, false
	}
	j := skipWS(b, i+1)
	if j < len(b) && b[j] == '}' {
		return vs, ve, true
	}
	for {
		if j >= len(b) || b[j] != '"' {
			return -1, -1, false
		}
		ke := skipString(b, j)
		if ke < 0 {
			return -1, -1, false
		}
		k := b[j:ke]
		j = skipWS(b, ke)
		if j >= len(b) || b[j] != ':' {
			return -1, -1, false
		}
		s := skipWS(b, j+1)
		e := skipValue(b, s)
		if e < 0 {
			return -1, -1, false
		}
		switch {
		case bytes.IndexByte(k, '\\') >= 0:
			return -1, -1, false
		case string(k) == key && vs < 0:
			vs, ve = s, e
		case bytes.EqualFold(k, []byte(key)):
			return -1, -1, false // a second one, or another spelling
		}
		j = skipWS(b, e)
		if j >= len(b) {
			return -1, -1, false
		}
		switch b[j] {
		case ',':
			j = skipWS(b, j+1)
		case '}':
			return vs, ve, true
		default:
			return -1, -1, false
		}
	}
}

// skipWS returns the index of the first byte at or after i that is not
// JSON white space.
func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the JSON string starting at b[i]
// (a '"'), or -1 when it does not end.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index after the JSON value starting at b[i], or
// -1 when it does not end. Objects and arrays are skipped by bracket depth
// (not validated); other values end at a delimiter or white space.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				k := skipString(b, j)
				if k < 0 {
					return -1
				}
				j = k - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && bytes.IndexByte([]byte(",]} \t\r\n"), b[j]) < 0 {
		j++
	}
	if j == i {
		return -1
	}
	return j
}
