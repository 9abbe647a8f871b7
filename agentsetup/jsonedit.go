package agentsetup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tailscale/hujson"
)

// The JSON editor parses the file with hujson (JSON with comments and
// trailing commas, as opencode.jsonc and VS Code-style settings files use),
// whose syntax tree holds every byte of the input and packs back to the
// same bytes. An edit changes one node of that tree, the string it sets or
// a member it adds first in its object, indented like its siblings, so
// every other key, its order, the indentation and the comments stay.
// hujson's Patch is not used: its paths pick the first of duplicate keys
// (JSON.parse, and so the agents, keep the last), and it appends a new
// member with no whitespace around it, leaving the layout to Format, which
// reformats the whole file.

// maxBrackets bounds the '{' and '[' a file may hold: hujson's parser
// recurses once per nesting level without a limit, and a stack overflow
// cannot be recovered, so hostile input must not reach it.
const maxBrackets = 10000

// SyntaxError is a malformed config file: where and what.
type SyntaxError struct {
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

// position returns the 1-based line and column of offset in src.
func position(src []byte, offset int) (line, col int) {
	offset = min(max(offset, 0), len(src))
	before := src[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = offset - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

func syntaxErrorAt(src []byte, offset int, format string, args ...any) *SyntaxError {
	l, c := position(src, offset)
	return &SyntaxError{Line: l, Col: c, Msg: fmt.Sprintf(format, args...)}
}

// jsonDoc is a parsed config file.
type jsonDoc struct {
	src  []byte       // what was parsed: the file, maybe with "{}\n" before it and "\n" after it
	nl   bool         // a "\n" was added after the file
	root hujson.Value // an object
}

// parseJSONC parses the JSON(C) file src, whose top level must be an
// object. An empty file (or one of only comments) reads as {} before them.
func parseJSONC(src []byte) (*jsonDoc, error) {
	brackets := 0
	for i, c := range src {
		if c == '{' || c == '[' {
			if brackets++; brackets > maxBrackets {
				return nil, syntaxErrorAt(src, i, "more than %d '{' and '[': setup does not edit a file this large or deeply nested", maxBrackets)
			}
		}
	}
	d := &jsonDoc{src: src}
	// hujson ends a // comment only at a newline; one ending the file is
	// read with a newline added, removed again when packing.
	if !bytes.HasSuffix(src, []byte("\n")) {
		d.src, d.nl = append(slices.Clip(src), '\n'), true
	}
	if hujson.Extra(d.src).IsValid() {
		d.src = append([]byte("{}\n"), d.src...)
	}
	root, err := hujson.Parse(d.src)
	if err != nil {
		var l, c int
		if n, _ := fmt.Sscanf(err.Error(), "hujson: line %d, column %d:", &l, &c); n != 2 || errors.Unwrap(err) == nil {
			return nil, err
		}
		// An error at the added newline is at the end of the file.
		if el, ec := position(src, len(src)); l > el || l == el && c > ec {
			l, c = el, ec
		}
		return nil, &SyntaxError{Line: l, Col: c, Msg: errors.Unwrap(err).Error()}
	}
	if root.Value.Kind() != '{' {
		return nil, syntaxErrorAt(d.src, root.StartOffset, "the top level is not a JSON object")
	}
	d.root = root
	return d, nil
}

// pack returns the document's bytes, as the file holds them.
func (d *jsonDoc) pack() []byte {
	out := d.root.Pack()
	if d.nl {
		out = out[:len(out)-1]
	}
	return out
}

// jsonChange is one value set in a JSON document.
type jsonChange struct {
	path []string
	val  string
}

// encodeJSON encodes v without HTML escaping (URLs keep their &).
func encodeJSON(v any, prefix, indent string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, indent)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// lineIndent returns the whitespace that starts the line holding offset at.
func lineIndent(src []byte, at int) string {
	start := bytes.LastIndexByte(src[:at], '\n') + 1
	end := start
	for end < len(src) && (src[end] == ' ' || src[end] == '\t') {
		end++
	}
	return string(src[start:end])
}

// indentUnit guesses the file's indentation step from the first member of
// the top-level object on a line of its own (default two spaces).
func indentUnit(root *hujson.Object) string {
	if len(root.Members) > 0 {
		before := root.Members[0].Name.BeforeExtra
		if i := bytes.LastIndexByte(before, '\n'); i >= 0 {
			if in := before[i+1:]; len(in) > 0 && len(bytes.Trim(in, " \t")) == 0 {
				return string(in)
			}
		}
	}
	return "  "
}

// nested returns the value of path[i:] = val as nested objects.
func nested(path []string, val string) any {
	if len(path) == 0 {
		return val
	}
	return map[string]any{path[0]: nested(path[1:], val)}
}

// lastMember returns the member named key of obj; of duplicates, the last,
// the one JSON parsers keep.
func lastMember(obj *hujson.Object, key string) *hujson.ObjectMember {
	for i := len(obj.Members) - 1; i >= 0; i-- {
		if name, ok := obj.Members[i].Name.Value.(hujson.Literal); ok && name.String() == key {
			return &obj.Members[i]
		}
	}
	return nil
}

// setJSON sets the string at path in the JSON(C) document src, adding the
// objects on the way when missing, and returns the new document and the
// value it replaced (old, had). Only the bytes of the value (or of the
// inserted member) change. A path element that exists but is not an object
// is an error naming it and its line.
func setJSON(src []byte, path []string, val string) (out []byte, old string, had bool, err error) {
	d, err := parseJSONC(src)
	if err != nil {
		return nil, "", false, err
	}
	unit := indentUnit(d.root.Value.(*hujson.Object))
	v := &d.root
	for i, key := range path {
		obj := v.Value.(*hujson.Object)
		m := lastMember(obj, key)
		if m == nil {
			if err := insertMember(d.src, v, unit, key, nested(path[i+1:], val)); err != nil {
				return nil, "", false, err
			}
			return d.pack(), "", false, nil
		}
		if i == len(path)-1 {
			old = string(hujson.Value{Value: m.Value.Value}.Pack())
			if lit, ok := m.Value.Value.(hujson.Literal); ok {
				if old = lit.String(); lit.Kind() == '"' && old == val {
					return src, old, true, nil // already set: not a byte changes
				}
			}
			m.Value.Value = hujson.Literal(encodeJSON(val, "", ""))
			return d.pack(), old, true, nil
		}
		if m.Value.Value.Kind() != '{' {
			return nil, "", false, syntaxErrorAt(d.src, m.Value.StartOffset, "%q is not an object; setup needs to set %s in it", strings.Join(path[:i+1], "."), strings.Join(path[i+1:], "."))
		}
		v = &m.Value
	}
	return src, "", false, nil
}

// insertMember adds "key": val as the first member of the object objVal
// (parsed from src). In a multi-line object it goes on a line of its own,
// indented like the object's members; in a one-line object it stays on
// that line. Putting it first keeps every existing member, and any comment
// after it, where it was.
func insertMember(src []byte, objVal *hujson.Value, unit, key string, val any) error {
	obj := objVal.Value.(*hujson.Object)
	name := hujson.Value{Value: hujson.Literal(encodeJSON(key, "", ""))}
	var enc []byte
	switch {
	case len(obj.Members) == 0:
		// {} or {\n}: the object gets one member on its own line; whitespace
		// already between the braces goes so that {\n} does not grow.
		outer := lineIndent(src, objVal.StartOffset)
		inner := outer + unit
		name.BeforeExtra = hujson.Extra("\n" + inner)
		enc = encodeJSON(val, inner, unit)
		after := hujson.Extra("\n" + outer)
		if len(bytes.TrimSpace(obj.AfterExtra)) > 0 {
			after = append(after, obj.AfterExtra...)
		}
		obj.AfterExtra = after
	case bytes.IndexByte(obj.Members[0].Name.BeforeExtra, '\n') >= 0:
		inner := lineIndent(src, obj.Members[0].Name.StartOffset)
		name.BeforeExtra = hujson.Extra("\n" + inner)
		enc = encodeJSON(val, inner, unit)
	default:
		// {"a":1} stays compact: {"k": v, "a":1}.
		name.BeforeExtra, obj.Members[0].Name.BeforeExtra = obj.Members[0].Name.BeforeExtra, hujson.Extra(" ")
		enc = encodeJSON(val, "", "")
	}
	v, err := hujson.Parse(enc)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	v.BeforeExtra = hujson.Extra(" ")
	obj.Members = slices.Insert(obj.Members, 0, hujson.ObjectMember{Name: name, Value: v})
	return nil
}
