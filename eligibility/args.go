package eligibility

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
)

// readRange is the part of a file a read observed, in the reading tool's own
// line convention (ranges are only compared between reads of one tool,
// except whole-file reads).
type readRange struct {
	off, lim int // lim 0: to the end of the file
	full     bool
	tail     bool // the last lim lines
	window   bool // a viewer window of unknown extent around off
}

func (r readRange) String() string {
	switch {
	case r.full:
		return "1-EOF"
	case r.tail:
		return "last " + strconv.Itoa(r.lim)
	case r.window:
		return "window at " + strconv.Itoa(r.off)
	case r.lim == 0:
		return strconv.Itoa(r.off) + "-EOF"
	}
	var b [48]byte
	out := strconv.AppendInt(b[:0], int64(r.off), 10)
	out = append(out, '-')
	out = strconv.AppendInt(out, int64(r.off+r.lim-1), 10)
	return string(out)
}

// covers reports whether r (a newer read) provably includes every line of o.
func (r readRange) covers(o readRange, sameTool bool) bool {
	if r.full {
		return true
	}
	if !sameTool || r.tail || r.window || o.tail || o.window || o.full {
		return r == o
	}
	if o.off < r.off {
		return false
	}
	if r.lim == 0 {
		return true
	}
	if o.lim == 0 {
		return false
	}
	return o.off+o.lim <= r.off+r.lim
}

// canonicalJSON renders a JSON value with sorted object keys and no
// insignificant whitespace, so that two argument objects that differ only in
// key order or spacing compare equal. Invalid JSON is returned trimmed.
// The output is byte for byte what encoding/json's Encoder (HTML escaping
// off) writes for the decoded value; appendCanonical writes it without
// reflection, falling back to encoding/json for strings that need escaping.
func canonicalJSON(raw []byte) (string, any) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(bytes.TrimSpace(raw)), nil
	}
	buf, ok := appendCanonical(make([]byte, 0, len(raw)), v)
	if !ok {
		return canonicalJSONSlow(raw, v)
	}
	return string(buf), v
}

// canonicalJSONSlow is the reference encoding (encoding/json), used when
// appendCanonical meets a value it does not handle.
func canonicalJSONSlow(raw []byte, v any) (string, any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return string(bytes.TrimSpace(raw)), v
	}
	return strings.TrimSuffix(buf.String(), "\n"), v
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

var pathKeys = []string{"file_path", "filePath", "path", "notebook_path", "filename", "file", "target_file", "absolute_path"}

// callArgs is what the rungs need from a tool call's arguments.
type callArgs struct {
	path    string
	url     string
	command string
	sub     string // str_replace_editor sub-command
	rng     readRange
	// patchPaths are the files a patch names; patchUnknown when it names
	// none we can read.
	patchPaths   []string
	patchUnknown bool
}

func str(m map[string]any, k string) string {
	if s, ok := m[k].(string); ok {
		return s
	}
	return ""
}

func num(m map[string]any, k string) (int, bool) {
	switch v := m[k].(type) {
	case json.Number:
		n, err := strconv.Atoi(v.String())
		if err != nil {
			f, ferr := v.Float64()
			if ferr != nil {
				return 0, false
			}
			n = int(f)
		}
		return n, true
	case string:
		n, err := strconv.Atoi(v)
		return n, err == nil
	}
	return 0, false
}

// extractArgs reads the arguments a tool call was given.
func extractArgs(spec toolSpec, v any) callArgs {
	var a callArgs
	switch x := v.(type) {
	case string:
		// Free-text input: a patch for write tools, a command for shells.
		switch spec.kind {
		case kindShell:
			a.command = x
		case kindWrite:
			a.patchPaths, a.patchUnknown = patchPaths(x)
		}
		return a
	case map[string]any:
		m := x
		for _, k := range pathKeys {
			if s := str(m, k); s != "" {
				a.path = s
				break
			}
		}
		a.url = str(m, "url")
		if spec.kind == kindSWEStrReplace {
			a.sub = str(m, "command")
		} else {
			a.command = commandOf(m)
		}
		for _, k := range []string{"patchText", "patch", "input", "diff", "patch_text"} {
			if s := str(m, k); s != "" && spec.kind == kindWrite {
				a.patchPaths, a.patchUnknown = patchPaths(s)
				break
			}
		}
		switch {
		case spec.window:
			ln, _ := num(m, "line_number")
			a.rng = readRange{window: true, off: ln}
		case spec.kind == kindSWEStrReplace:
			if vr, ok := m["view_range"].([]any); ok && len(vr) == 2 {
				lo, ok1 := num(map[string]any{"x": vr[0]}, "x")
				hi, ok2 := num(map[string]any{"x": vr[1]}, "x")
				if ok1 && ok2 {
					if hi < 0 {
						a.rng = readRange{off: lo}
					} else if hi >= lo {
						a.rng = readRange{off: lo, lim: hi - lo + 1}
					} else {
						a.rng = readRange{window: true, off: lo}
					}
				} else {
					a.rng = readRange{window: true}
				}
			} else {
				a.rng = readRange{full: true}
			}
		default:
			off, hasOff := num(m, "offset")
			lim, hasLim := num(m, "limit")
			if !hasOff && !hasLim {
				a.rng = readRange{full: true}
			} else {
				a.rng = readRange{off: off, lim: lim}
			}
		}
	}
	return a
}

// commandOf returns the shell command of a shell tool's arguments: "command"
// or "cmd", as a string or an argv array (["bash","-lc","..."]).
func commandOf(m map[string]any) string {
	for _, k := range []string{"command", "cmd"} {
		switch c := m[k].(type) {
		case string:
			return c
		case []any:
			parts := make([]string, 0, len(c))
			for _, p := range c {
				s, _ := p.(string)
				parts = append(parts, s)
			}
			if len(parts) >= 3 && (parts[0] == "bash" || parts[0] == "sh" || parts[0] == "zsh" || strings.HasSuffix(parts[0], "/bash") || strings.HasSuffix(parts[0], "/sh")) && strings.HasPrefix(parts[1], "-") && strings.Contains(parts[1], "c") {
				return parts[2]
			}
			return strings.Join(parts, " ")
		}
	}
	return ""
}

// patchPaths lists the files a patch names: the apply_patch envelope
// ("*** Update File: P", Add, Delete, "*** Move to: P") or a unified diff
// ("+++ b/P", "--- a/P"). unknown is true when it names none.
func patchPaths(s string) (paths []string, unknown bool) {
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		var p string
		switch {
		case strings.HasPrefix(line, "*** Update File: "):
			p = strings.TrimPrefix(line, "*** Update File: ")
		case strings.HasPrefix(line, "*** Add File: "):
			p = strings.TrimPrefix(line, "*** Add File: ")
		case strings.HasPrefix(line, "*** Delete File: "):
			p = strings.TrimPrefix(line, "*** Delete File: ")
		case strings.HasPrefix(line, "*** Move to: "):
			p = strings.TrimPrefix(line, "*** Move to: ")
		case strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "--- "):
			p = strings.Fields(line[4:] + " ")[0]
			if p == "/dev/null" {
				continue
			}
			p = strings.TrimPrefix(strings.TrimPrefix(p, "a/"), "b/")
		default:
			continue
		}
		if p = strings.TrimSpace(p); p != "" {
			paths = append(paths, p)
		}
	}
	return paths, len(paths) == 0
}

// cleanPath normalises a path for comparison: relative to the session's
// working directory when it is inside it, cleaned, without "./".
func cleanPath(p, cwd string) string {
	if p == "" {
		return ""
	}
	if strings.HasPrefix(p, "file://") {
		p = strings.TrimPrefix(p, "file://")
	}
	p = path.Clean(p)
	if cwd != "" && strings.HasPrefix(p, cwd+"/") {
		p = strings.TrimPrefix(p, cwd+"/")
	}
	return p
}

// skeleton renders the argument skeleton of a failed call's input for its
// residue: object keys, sizes in bytes of bulky values, paths and short
// scalars verbatim, never the bulk itself.
func skeleton(v any, raw []byte) string {
	var b strings.Builder
	writeSkeleton(&b, "", v, 0)
	s := b.String()
	if v == nil {
		s = fmt.Sprintf("<%d bytes>", len(raw))
	}
	if len(s) > 1024 {
		s = s[:1021] + "..."
	}
	return s
}

func isPathKey(k string) bool {
	for _, p := range pathKeys {
		if k == p {
			return true
		}
	}
	return k == "url" || k == "workdir" || k == "cwd"
}

func writeSkeleton(b *strings.Builder, key string, v any, depth int) {
	switch x := v.(type) {
	case map[string]any:
		if depth > 3 {
			fmt.Fprintf(b, "{<%d keys>}", len(x))
			return
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(k))
			b.WriteByte(':')
			writeSkeleton(b, k, x[k], depth+1)
		}
		b.WriteByte('}')
	case []any:
		n, _ := json.Marshal(x)
		fmt.Fprintf(b, "[<%d items, %d bytes>]", len(x), len(n))
	case string:
		if isPathKey(key) && len(x) <= 512 || len(x) <= 64 && !strings.ContainsAny(x, "\n") && looksLikePath(x) {
			b.WriteString(strconv.Quote(x))
		} else {
			fmt.Fprintf(b, "<%d bytes>", len(x))
		}
	case json.Number:
		b.WriteString(x.String())
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case nil:
		b.WriteString("null")
	}
}

func looksLikePath(s string) bool {
	return s != "" && !strings.ContainsAny(s, " \t\"'") && (strings.Contains(s, "/") || strings.Contains(s, "."))
}

// leafStrings calls f on every string value of v that is not under a path key.
func leafStrings(key string, v any, f func(string)) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			leafStrings(k, x[k], f)
		}
	case []any:
		for _, e := range x {
			leafStrings(key, e, f)
		}
	case string:
		if !isPathKey(key) {
			f(x)
		}
	}
}
