package agentsetup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
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

// jsonChange is one value set in a JSON document: a string, or any
// value encoding/json encodes (a struct keeps its field order).
type jsonChange struct {
	path []string
	val  any
	// after names the top-level member a new top-level member goes right
	// after, when there is one (else it goes first, as every new member).
	after string
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
func nested(path []string, val any) any {
	if len(path) == 0 {
		return val
	}
	return map[string]any{path[0]: nested(path[1:], val)}
}

// lastMember returns the member named key of obj; of duplicates, the last,
// the one JSON parsers keep.
func lastMember(obj *hujson.Object, key string) *hujson.ObjectMember {
	if i := lastIndex(obj, key); i >= 0 {
		return &obj.Members[i]
	}
	return nil
}

// lastIndex returns the index of the last member named key of obj, or -1.
func lastIndex(obj *hujson.Object, key string) int {
	for i := len(obj.Members) - 1; i >= 0; i-- {
		if name, ok := obj.Members[i].Name.Value.(hujson.Literal); ok && name.String() == key {
			return i
		}
	}
	return -1
}

// decoded returns the value v holds as encoding/json decodes it
// (comments and trailing commas dropped), to compare values whatever
// their layout.
func decoded(v hujson.Value) (any, error) {
	v = v.Clone()
	v.Standardize()
	var out any
	if err := json.Unmarshal(v.Pack(), &out); err != nil {
		return nil, err
	}
	return out, nil
}

// normalized returns val as encoding/json decodes its encoding.
func normalized(val any) any {
	var out any
	_ = json.Unmarshal(encodeJSON(val, "", ""), &out)
	return out
}

// display returns how a change shows a value: a string as it is,
// anything else as compact JSON.
func display(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return string(encodeJSON(v, "", ""))
}

// setJSON sets the value at path in the JSON(C) document src, adding the
// objects on the way when missing, and returns the new document, the
// value it replaced (as display shows it; "" when there was none) and
// whether anything changed. Only the bytes of the value (or of the
// inserted member) change; a value already equal to val (whatever its
// layout) changes nothing. A path element that exists but is not an
// object is an error naming it and its line.
func setJSON(src []byte, path []string, val any) (out []byte, old string, changed bool, err error) {
	return setJSONAfter(src, path, val, "")
}

// setJSONAfter is setJSON putting a new top-level member right after the
// top-level member named after, when there is one.
func setJSONAfter(src []byte, path []string, val any, after string) (out []byte, old string, changed bool, err error) {
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
			at := 0
			if i == 0 && after != "" {
				at = lastIndex(obj, after) + 1
			}
			if err := insertMember(d.src, v, unit, key, nested(path[i+1:], val), at); err != nil {
				return nil, "", false, err
			}
			return d.pack(), "", true, nil
		}
		if i == len(path)-1 {
			cur, err := decoded(hujson.Value{Value: m.Value.Value})
			if err != nil {
				return nil, "", false, syntaxErrorAt(d.src, m.Value.StartOffset, "%q: %v", strings.Join(path, "."), err)
			}
			old = display(cur)
			if reflect.DeepEqual(cur, normalized(val)) {
				return src, old, false, nil // already set: not a byte changes
			}
			if s, ok := val.(string); ok {
				m.Value.Value = hujson.Literal(encodeJSON(s, "", ""))
				return d.pack(), old, true, nil
			}
			// A value on several lines is replaced by one laid out the
			// same way, a one-line value by a one-line one, as insertMember
			// lays them out.
			enc := encodeJSON(val, "", "")
			if bytes.IndexByte(hujson.Value{Value: m.Value.Value}.Pack(), '\n') >= 0 {
				enc = encodeJSON(val, lineIndent(d.src, m.Name.StartOffset), unit)
			}
			nv, err := hujson.Parse(enc)
			if err != nil {
				return nil, "", false, fmt.Errorf("encode %s: %w", key, err)
			}
			m.Value.Value = nv.Value
			return d.pack(), old, true, nil
		}
		if m.Value.Value.Kind() != '{' {
			return nil, "", false, syntaxErrorAt(d.src, m.Value.StartOffset, "%q is not an object; setup needs to set %s in it", strings.Join(path[:i+1], "."), strings.Join(path[i+1:], "."))
		}
		v = &m.Value
	}
	return src, "", false, nil
}

// replaceJSON replaces the value at path in the JSON(C) document src by
// the value at the same path in orig, byte for byte, and reports whether
// both were there.
func replaceJSON(src, orig []byte, path []string) ([]byte, bool, error) {
	find := func(b []byte) (*jsonDoc, *hujson.ObjectMember, error) {
		d, err := parseJSONC(b)
		if err != nil {
			return nil, nil, err
		}
		v := &d.root
		var m *hujson.ObjectMember
		for _, key := range path {
			obj, ok := v.Value.(*hujson.Object)
			if !ok {
				return d, nil, nil
			}
			if m = lastMember(obj, key); m == nil {
				return d, nil, nil
			}
			v = &m.Value
		}
		return d, m, nil
	}
	d, m, err := find(src)
	if err != nil || m == nil {
		return src, false, err
	}
	_, om, err := find(orig)
	if err != nil || om == nil {
		return src, false, err
	}
	m.Value.Value = om.Value.Value
	return d.pack(), true, nil
}

// getJSON returns the value at path in the JSON(C) document src as
// encoding/json decodes it, and whether it is there.
func getJSON(src []byte, path []string) (any, bool, error) {
	d, err := parseJSONC(src)
	if err != nil {
		return nil, false, err
	}
	v := &d.root
	for _, key := range path {
		obj, ok := v.Value.(*hujson.Object)
		if !ok {
			return nil, false, nil
		}
		m := lastMember(obj, key)
		if m == nil {
			return nil, false, nil
		}
		v = &m.Value
	}
	val, err := decoded(*v)
	return val, err == nil, err
}

// deleteJSON removes the member at path from the JSON(C) document src
// (of duplicate keys, the last), and then each object on the way that
// removing it left empty and that keep does not hold (keep: a path
// prefix that must stay, as the original file had it). The commas and the
// whitespace around the other members stay as they were.
func deleteJSON(src []byte, path []string, keep func(prefix []string) bool) ([]byte, error) {
	d, err := parseJSONC(src)
	if err != nil {
		return nil, err
	}
	// The objects on the way, outermost first.
	objs := []*hujson.Object{d.root.Value.(*hujson.Object)}
	for _, key := range path[:len(path)-1] {
		m := lastMember(objs[len(objs)-1], key)
		if m == nil {
			return src, nil
		}
		o, ok := m.Value.Value.(*hujson.Object)
		if !ok {
			return src, nil
		}
		objs = append(objs, o)
	}
	for i := len(path) - 1; i >= 0; i-- {
		obj := objs[i]
		j := lastIndex(obj, path[i])
		if j < 0 {
			return src, nil
		}
		if i < len(path)-1 && (len(objs[i+1].Members) > 0 || keep(path[:i+1])) {
			break
		}
		deleteMember(obj, j)
	}
	return d.pack(), nil
}

// deleteMember removes member i of obj, moving what stood around it so
// that the other members keep their layout: the first member inherits
// the whitespace before the removed first one, and a removed last member
// takes its comma with it (a trailing comma stays if it had one).
func deleteMember(obj *hujson.Object, i int) {
	m := obj.Members[i]
	n := len(obj.Members)
	switch {
	case n == 1:
		// {"k": v} becomes {} with what stood before the closing brace.
	case i == 0:
		obj.Members[1].Name.BeforeExtra = m.Name.BeforeExtra
	case i == n-1:
		prev := &obj.Members[i-1].Value
		if m.Value.AfterExtra == nil {
			// No trailing comma: prev becomes last without one; what
			// stood between it and its comma moves before the brace.
			obj.AfterExtra = append(append(hujson.Extra{}, prev.AfterExtra...), obj.AfterExtra...)
			prev.AfterExtra = nil
		} else if prev.AfterExtra == nil {
			prev.AfterExtra = hujson.Extra{}
		}
	}
	obj.Members = slices.Delete(obj.Members, i, i+1)
}

// insertMember adds "key": val to the object objVal (parsed from src) as
// its member at (0: the first). In a multi-line object it goes on a line
// of its own, indented like the object's members; in a one-line object it
// stays on that line. Putting it first (or right after a member) keeps
// every existing member, and any comment before one, where it was.
func insertMember(src []byte, objVal *hujson.Value, unit, key string, val any, at int) error {
	obj := objVal.Value.(*hujson.Object)
	name := hujson.Value{Value: hujson.Literal(encodeJSON(key, "", ""))}
	var enc []byte
	if at > 0 {
		prev := &obj.Members[at-1]
		name.BeforeExtra = hujson.Extra(" ")
		enc = encodeJSON(val, "", "")
		if bytes.IndexByte(prev.Name.BeforeExtra, '\n') >= 0 {
			inner := lineIndent(src, prev.Name.StartOffset)
			name.BeforeExtra = hujson.Extra("\n" + inner)
			enc = encodeJSON(val, inner, unit)
		}
		v, err := hujson.Parse(enc)
		if err != nil {
			return fmt.Errorf("encode %s: %w", key, err)
		}
		v.BeforeExtra = hujson.Extra(" ")
		if at == len(obj.Members) && prev.Value.AfterExtra != nil {
			v.AfterExtra = hujson.Extra{} // the trailing comma stays
		}
		obj.Members = slices.Insert(obj.Members, at, hujson.ObjectMember{Name: name, Value: v})
		return nil
	}
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
