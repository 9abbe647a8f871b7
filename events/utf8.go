package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// TextError locates a JSON string that cannot be decoded without changing
// it: raw bytes that are not valid UTF-8, or an escaped lone surrogate
// (\ud800 without its pair). encoding/json silently replaces both with
// U+FFFD; prunesched keeps text byte-exact or refuses it.
type TextError struct {
	// Path is the string's JSON path ("data.output", "messages[3].content").
	Path string
	// Offset is the byte offset of the bad sequence in the input.
	Offset int
	// Surrogate is true for an escaped lone surrogate.
	Surrogate bool
}

func (e *TextError) Error() string { return e.Path + ": " + textMsg(e) }

// CheckText reports the first JSON string in b (a JSON text) that
// encoding/json would change when decoding it: raw bytes that are not
// valid UTF-8 or an escaped lone surrogate, as a *TextError naming its
// path. It returns nil when every string decodes unchanged, or when b is
// not valid JSON (the decoder reports that). Valid UTF-8 without
// surrogate escapes, the common case, costs one scan.
func CheckText(b []byte) error {
	if PlainText(b) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		object    bool
		key       string
		index     int
		expectKey bool
	}
	var stack []frame
	path := func(leaf string) string {
		var p []byte
		for _, f := range stack {
			switch {
			case f.object && f.key != "":
				if len(p) > 0 {
					p = append(p, '.')
				}
				p = append(p, f.key...)
			case !f.object:
				p = append(p, '[')
				p = strconv.AppendInt(p, int64(f.index), 10)
				p = append(p, ']')
			}
		}
		if leaf != "" {
			if len(p) > 0 {
				p = append(p, '.')
			}
			p = append(p, leaf...)
		}
		if len(p) == 0 {
			return "(top level)"
		}
		return string(p)
	}
	// valueDone advances the enclosing frame past one value.
	valueDone := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].expectKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
	prev := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		off := int(dec.InputOffset())
		raw := b[prev:off]
		prev = off
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, frame{object: t == '{', expectKey: t == '{'})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			isKey := len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].expectKey
			if at, sur, bad := badText(raw); bad {
				p := path("")
				if isKey {
					p = "a key in " + p
				}
				return &TextError{Path: p, Offset: off - len(raw) + at, Surrogate: sur}
			}
			if isKey {
				stack[len(stack)-1].key = t
				stack[len(stack)-1].expectKey = false
			} else {
				valueDone()
			}
		default:
			valueDone()
		}
	}
}

// surrogateEscape reports whether b may hold an escaped surrogate
// (\uD800-\uDFFF); a false positive only costs the exact check.
func surrogateEscape(b []byte) bool {
	for {
		i := bytes.Index(b, []byte(`\u`))
		if i < 0 || i+3 >= len(b) {
			return false
		}
		if c, d := b[i+2], b[i+3]; (c == 'd' || c == 'D') && (d >= '8' && d <= '9' || d >= 'a' && d <= 'f' || d >= 'A' && d <= 'F') {
			return true
		}
		b = b[i+2:]
	}
}

// PlainText reports whether b is valid UTF-8 without an escaped surrogate
// (\uD800-\uDFFF, paired or not): CheckText's one-scan fast path. Plain
// text always passes CheckText, and so does every piece of it cut between
// JSON tokens, which lets a caller that checked a text skip a
// byte-identical part of it later.
func PlainText(b []byte) bool { return utf8.Valid(b) && !surrogateEscape(b) }

// badText finds, in the raw bytes of one JSON string token (with what
// precedes it since the last token), invalid UTF-8 or an escaped lone
// surrogate, and returns its offset in raw.
func badText(raw []byte) (at int, surrogate, bad bool) {
	q := bytes.IndexByte(raw, '"')
	if q < 0 {
		return 0, false, false
	}
	for i := q + 1; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			if i+1 < len(raw) && raw[i+1] == 'u' {
				r, ok := hex4(raw[i+2:])
				if ok && r >= 0xD800 && r < 0xDC00 {
					// A high surrogate must be followed by an escaped low one.
					if i+11 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
						if r2, ok := hex4(raw[i+8:]); ok && r2 >= 0xDC00 && r2 < 0xE000 {
							i += 12
							continue
						}
					}
					return i, true, true
				}
				if ok && r >= 0xDC00 && r < 0xE000 {
					return i, true, true
				}
				i += 6
				continue
			}
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				return i, false, true
			}
			i += size
		}
	}
	return 0, false, false
}

// DecodeInput decodes one event of outside input (an API body, a native
// JSONL file): Decode, after refusing any string that decoding would
// change (CheckText), with a *FieldError naming the field. Tool output
// that is not UTF-8 travels as data.output_base64.
func DecodeInput(b []byte) (Event, error) {
	if err := CheckText(b); err != nil {
		te := err.(*TextError)
		hint := ""
		if te.Path == "data.output" {
			hint = " (send output that is not UTF-8 as data.output_base64)"
		}
		return Event{}, fieldErr(te.Path, "%s%s", textMsg(te), hint)
	}
	if len(b) >= liftBytes {
		// A large input is a large tool output: decode it holding one copy.
		if rest, raw, ok := liftOutput(b); ok {
			if e, ok := decodeLifted(rest, raw); ok {
				return e, nil
			}
		}
	}
	return Decode(b)
}

// textMsg is a TextError's message without the path (FieldError adds it).
func textMsg(te *TextError) string {
	what := "not valid UTF-8"
	if te.Surrogate {
		what = "an escaped lone surrogate (not a Unicode character)"
	}
	return fmt.Sprintf("%s at byte %d; text is stored byte-exact, never replaced", what, te.Offset)
}
