package agentsetup

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The JSON editor works on the bytes of the file: it finds the span of the
// one value it changes (or the object it adds a member to) and rewrites only
// that span, so every other key, its order, the indentation and the
// comments stay byte for byte. Decoding into a map and encoding it again
// would sort the keys, reformat the file and drop the comments OpenCode's
// JSONC allows. The scanner accepts JSON plus // and /* */ comments and
// trailing commas (JSONC, as opencode.jsonc and VS Code-style settings
// files use), and reports the line and column of the first error.

// maxDepth bounds the nesting the scanner follows, so hostile input cannot
// exhaust the stack.
const maxDepth = 1000

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

// member is one "key": value of an object, as byte offsets.
type member struct {
	key                        string
	keyStart, valStart, valEnd int
}

// object is an object's span and members.
type object struct {
	open, close int // offsets of '{' and '}'
	members     []member
}

type scanner struct {
	src []byte
	pos int
}

func (s *scanner) errf(at int, format string, args ...any) error {
	l, c := position(s.src, at)
	return &SyntaxError{Line: l, Col: c, Msg: fmt.Sprintf(format, args...)}
}

// space skips whitespace and comments.
func (s *scanner) space() error {
	for s.pos < len(s.src) {
		switch c := s.src[s.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			s.pos++
		case c == '/' && s.pos+1 < len(s.src) && s.src[s.pos+1] == '/':
			if i := bytes.IndexByte(s.src[s.pos:], '\n'); i >= 0 {
				s.pos += i + 1
			} else {
				s.pos = len(s.src)
			}
		case c == '/' && s.pos+1 < len(s.src) && s.src[s.pos+1] == '*':
			i := bytes.Index(s.src[s.pos+2:], []byte("*/"))
			if i < 0 {
				return s.errf(s.pos, "unterminated /* comment")
			}
			s.pos += 2 + i + 2
		default:
			return nil
		}
	}
	return nil
}

// value scans one value starting at s.pos (after space).
func (s *scanner) value(depth int) error {
	if depth > maxDepth {
		return s.errf(s.pos, "nested more than %d levels deep", maxDepth)
	}
	if s.pos >= len(s.src) {
		return s.errf(s.pos, "unexpected end of file, want a value")
	}
	switch c := s.src[s.pos]; {
	case c == '{':
		_, err := s.object(depth)
		return err
	case c == '[':
		return s.array(depth)
	case c == '"':
		_, err := s.str()
		return err
	default:
		start := s.pos
		for s.pos < len(s.src) && strings.IndexByte("+-.0123456789eEtrufalsn", s.src[s.pos]) >= 0 {
			s.pos++
		}
		lit := s.src[start:s.pos]
		if len(lit) == 0 {
			return s.errf(start, "unexpected %q, want a value", rune(c))
		}
		var v any
		if json.Unmarshal(lit, &v) != nil {
			return s.errf(start, "invalid literal %q", lit)
		}
		return nil
	}
}

// str scans a string and returns it decoded.
func (s *scanner) str() (string, error) {
	start := s.pos
	s.pos++
	for s.pos < len(s.src) {
		switch c := s.src[s.pos]; {
		case c == '\\':
			s.pos += 2
		case c == '"':
			s.pos++
			var out string
			if err := json.Unmarshal(s.src[start:s.pos], &out); err != nil {
				return "", s.errf(start, "invalid string: %v", err)
			}
			return out, nil
		case c < 0x20:
			return "", s.errf(s.pos, "control character in string")
		default:
			s.pos++
		}
	}
	return "", s.errf(start, "unterminated string")
}

func (s *scanner) array(depth int) error {
	open := s.pos
	s.pos++
	for {
		if err := s.space(); err != nil {
			return err
		}
		if s.pos >= len(s.src) {
			return s.errf(open, "unterminated array")
		}
		if s.src[s.pos] == ']' {
			s.pos++
			return nil
		}
		if err := s.value(depth + 1); err != nil {
			return err
		}
		if err := s.space(); err != nil {
			return err
		}
		if s.pos < len(s.src) && s.src[s.pos] == ',' {
			s.pos++
			continue
		}
		if s.pos < len(s.src) && s.src[s.pos] == ']' {
			continue
		}
		return s.errf(s.pos, "want ',' or ']' in the array opened at line %d", lineOf(s.src, open))
	}
}

func lineOf(src []byte, at int) int { l, _ := position(src, at); return l }

// object scans an object starting at s.pos and returns its members.
func (s *scanner) object(depth int) (object, error) {
	o := object{open: s.pos}
	s.pos++
	for {
		if err := s.space(); err != nil {
			return o, err
		}
		if s.pos >= len(s.src) {
			return o, s.errf(o.open, "unterminated object")
		}
		if s.src[s.pos] == '}' {
			o.close = s.pos
			s.pos++
			return o, nil
		}
		if s.src[s.pos] != '"' {
			return o, s.errf(s.pos, "want a \"key\" or '}' in the object opened at line %d", lineOf(s.src, o.open))
		}
		m := member{keyStart: s.pos}
		k, err := s.str()
		if err != nil {
			return o, err
		}
		m.key = k
		if err := s.space(); err != nil {
			return o, err
		}
		if s.pos >= len(s.src) || s.src[s.pos] != ':' {
			return o, s.errf(s.pos, "want ':' after key %q", k)
		}
		s.pos++
		if err := s.space(); err != nil {
			return o, err
		}
		m.valStart = s.pos
		if err := s.value(depth + 1); err != nil {
			return o, err
		}
		m.valEnd = s.pos
		o.members = append(o.members, m)
		if err := s.space(); err != nil {
			return o, err
		}
		if s.pos < len(s.src) && s.src[s.pos] == ',' {
			s.pos++
			continue
		}
		if s.pos < len(s.src) && s.src[s.pos] == '}' {
			continue
		}
		return o, s.errf(s.pos, "want ',' or '}' after the value of %q", k)
	}
}

// objectAt scans the object starting at offset at of src.
func objectAt(src []byte, at int) (object, error) {
	s := &scanner{src: src, pos: at}
	return s.object(0)
}

// parseDocument checks the whole document and returns its top-level
// object. An empty document (or only comments) reads as no object: root
// is nil.
func parseDocument(src []byte) (*object, error) {
	s := &scanner{src: src}
	if err := s.space(); err != nil {
		return nil, err
	}
	if s.pos == len(src) {
		return nil, nil
	}
	if src[s.pos] != '{' {
		return nil, s.errf(s.pos, "the top level is not a JSON object")
	}
	o, err := s.object(0)
	if err != nil {
		return nil, err
	}
	if err := s.space(); err != nil {
		return nil, err
	}
	if s.pos != len(src) {
		return nil, s.errf(s.pos, "unexpected content after the top-level object")
	}
	return &o, nil
}

// jsonChange is one value set in a JSON document.
type jsonChange struct {
	path []string
	val  string
}

// encodeJSON encodes v without HTML escaping (URLs keep their &).
func encodeJSON(v any, prefix, indent string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, indent)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
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
func indentUnit(src []byte, root *object) string {
	if root != nil && len(root.members) > 0 {
		m := root.members[0]
		if bytes.IndexByte(src[root.open:m.keyStart], '\n') >= 0 {
			if in := lineIndent(src, m.keyStart); in != "" && in == string(src[m.keyStart-len(in):m.keyStart]) {
				return in
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

// setJSON sets the string at path in the JSON(C) document src, adding the
// objects on the way when missing, and returns the new document and the
// value it replaced (old, had). Only the bytes of the value (or of the
// inserted member) change. A path element that exists but is not an object
// is an error naming it and its line.
func setJSON(src []byte, path []string, val string) (out []byte, old string, had bool, err error) {
	root, err := parseDocument(src)
	if err != nil {
		return nil, "", false, err
	}
	if root == nil {
		// Empty file: start from an empty object, keeping what was there
		// (comments) after it.
		src = append([]byte("{}\n"), src...)
		if root, err = parseDocument(src); err != nil {
			return nil, "", false, err
		}
	}
	unit := indentUnit(src, root)
	obj := *root
	for i, key := range path {
		// The last duplicate of a key is the one JSON parsers keep.
		var found *member
		for j := range obj.members {
			if obj.members[j].key == key {
				found = &obj.members[j]
			}
		}
		if found == nil {
			return insertMember(src, obj, unit, path[i], nested(path[i+1:], val)), "", false, nil
		}
		if i == len(path)-1 {
			raw := src[found.valStart:found.valEnd]
			if err := json.Unmarshal(raw, &old); err != nil {
				old = string(raw)
			} else if old == val {
				return src, old, true, nil // already set: not a byte changes
			}
			enc := encodeJSON(val, "", "")
			out = append(append(append([]byte{}, src[:found.valStart]...), enc...), src[found.valEnd:]...)
			return out, old, true, nil
		}
		if src[found.valStart] != '{' {
			l, c := position(src, found.valStart)
			return nil, "", false, &SyntaxError{Line: l, Col: c, Msg: fmt.Sprintf("%q is not an object; setup needs to set %s in it", strings.Join(path[:i+1], "."), strings.Join(path[i+1:], "."))}
		}
		if obj, err = objectAt(src, found.valStart); err != nil {
			return nil, "", false, err
		}
	}
	return src, "", false, nil
}

// insertMember adds "key": v as the first member of obj. In a multi-line
// object it goes on a line of its own, indented like the object's members;
// in a one-line object it stays on that line. Putting it first keeps every
// existing member, and any comment after it, where it was.
func insertMember(src []byte, obj object, unit, key string, v any) []byte {
	multiline := len(obj.members) == 0 || bytes.IndexByte(src[obj.open:obj.members[0].keyStart], '\n') >= 0
	var ins string
	switch {
	case len(obj.members) == 0:
		// {} or {\n}: the object gets one member on its own line.
		outer := lineIndent(src, obj.open)
		inner := outer + unit
		ins = "\n" + inner + encodeJSON(key, "", "") + ": " + encodeJSON(v, inner, unit) + "\n" + outer
		// Drop whitespace already between the braces so {\n} does not grow.
		body := src[obj.open+1 : obj.close]
		if len(bytes.TrimSpace(body)) == 0 {
			return concat(src[:obj.open+1], ins, src[obj.close:])
		}
	case multiline:
		inner := lineIndent(src, obj.members[0].keyStart)
		ins = "\n" + inner + encodeJSON(key, "", "") + ": " + encodeJSON(v, inner, unit) + ","
	default:
		ins = encodeJSON(key, "", "") + ": " + encodeJSON(v, "", "") + ", "
		// {"a":1} stays compact: {"k": v, "a":1}.
		return concat(src[:obj.members[0].keyStart], ins, src[obj.members[0].keyStart:])
	}
	return concat(src[:obj.open+1], ins, src[obj.open+1:])
}

func concat(a []byte, mid string, b []byte) []byte {
	out := make([]byte, 0, len(a)+len(mid)+len(b))
	return append(append(append(out, a...), mid...), b...)
}
