package toolspec

import (
	"encoding/json"
	"path"
	"strconv"
	"strings"
)

// Range is the part of a file a read observed, in the reading tool's own
// line convention (ranges are only compared between reads of one tool,
// except whole-file reads).
type Range struct {
	// Off is the first line (1-based); Lim the number of lines, 0 to the
	// end of the file.
	Off, Lim int
	// Full is a whole-file read.
	Full bool
	// Tail is the last Lim lines.
	Tail bool
	// Window is a viewer window of unknown extent around Off.
	Window bool
}

// String renders the range for evidence and keys: "1-EOF", "last N",
// "window at N", "A-EOF" or "A-B".
func (r Range) String() string {
	switch {
	case r.Full:
		return "1-EOF"
	case r.Tail:
		return "last " + strconv.Itoa(r.Lim)
	case r.Window:
		return "window at " + strconv.Itoa(r.Off)
	case r.Lim == 0:
		return strconv.Itoa(r.Off) + "-EOF"
	}
	var b [48]byte
	out := strconv.AppendInt(b[:0], int64(r.Off), 10)
	out = append(out, '-')
	out = strconv.AppendInt(out, int64(r.Off+r.Lim-1), 10)
	return string(out)
}

// Covers reports whether r (a newer read) provably includes every line of
// o. Partial ranges compare only between reads of the same tool.
func (r Range) Covers(o Range, sameTool bool) bool {
	if r.Full {
		return true
	}
	if !sameTool || r.Tail || r.Window || o.Tail || o.Window || o.Full {
		return r == o
	}
	if o.Off < r.Off {
		return false
	}
	if r.Lim == 0 {
		return true
	}
	if o.Lim == 0 {
		return false
	}
	return o.Off+o.Lim <= r.Off+r.Lim
}

// pathKeys are the argument names agents give a file path under.
var pathKeys = []string{"file_path", "filePath", "path", "notebook_path", "filename", "file", "target_file", "absolute_path"}

// IsPathKey reports whether an argument named k holds a path or a location
// (a path key, url, workdir, cwd).
func IsPathKey(k string) bool {
	for _, p := range pathKeys {
		if k == p {
			return true
		}
	}
	return k == "url" || k == "workdir" || k == "cwd"
}

// Args is what the rungs need from a tool call's arguments.
type Args struct {
	// Path is the first path argument; URL the url argument.
	Path string
	URL  string
	// Command is a shell tool's command line.
	Command string
	// Sub is str_replace_editor's sub-command.
	Sub string
	// Range is the line range a read asks for.
	Range Range
	// PatchPaths are the files a patch names; PatchUnknown when it names
	// none we can read.
	PatchPaths   []string
	PatchUnknown bool
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

// ExtractArgs reads the arguments a tool call was given, from its decoded
// JSON input v (as CanonicalJSON returns it: numbers as json.Number).
func ExtractArgs(spec Spec, v any) Args {
	var a Args
	switch x := v.(type) {
	case string:
		// Free-text input: a patch for write tools, a command for shells.
		switch spec.Kind {
		case KindShell:
			a.Command = x
		case KindWrite:
			a.PatchPaths, a.PatchUnknown = patchPaths(x)
		}
		return a
	case map[string]any:
		m := x
		for _, k := range pathKeys {
			if s := str(m, k); s != "" {
				a.Path = s
				break
			}
		}
		a.URL = str(m, "url")
		if spec.Kind == KindSWEStrReplace {
			a.Sub = str(m, "command")
		} else {
			a.Command = CommandOf(m)
		}
		for _, k := range []string{"patchText", "patch", "input", "diff", "patch_text"} {
			if s := str(m, k); s != "" && spec.Kind == KindWrite {
				a.PatchPaths, a.PatchUnknown = patchPaths(s)
				break
			}
		}
		switch {
		case spec.Window:
			ln, _ := num(m, "line_number")
			a.Range = Range{Window: true, Off: ln}
		case spec.Kind == KindSWEStrReplace:
			if vr, ok := m["view_range"].([]any); ok && len(vr) == 2 {
				lo, ok1 := num(map[string]any{"x": vr[0]}, "x")
				hi, ok2 := num(map[string]any{"x": vr[1]}, "x")
				if ok1 && ok2 {
					if hi < 0 {
						a.Range = Range{Off: lo}
					} else if hi >= lo {
						a.Range = Range{Off: lo, Lim: hi - lo + 1}
					} else {
						a.Range = Range{Window: true, Off: lo}
					}
				} else {
					a.Range = Range{Window: true}
				}
			} else {
				a.Range = Range{Full: true}
			}
		default:
			off, hasOff := num(m, "offset")
			lim, hasLim := num(m, "limit")
			if !hasOff && !hasLim {
				a.Range = Range{Full: true}
			} else {
				a.Range = Range{Off: off, Lim: lim}
			}
		}
	}
	return a
}

// CommandOf returns the shell command of a shell tool's arguments: "command"
// or "cmd", as a string or an argv array (["bash","-lc","..."]).
func CommandOf(m map[string]any) string {
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

// CleanPath normalises a path for comparison: without a file:// scheme,
// cleaned, and relative to the session's working directory cwd when it is
// inside it.
func CleanPath(p, cwd string) string {
	if p == "" {
		return ""
	}
	p = path.Clean(strings.TrimPrefix(p, "file://"))
	// Under cwd: p starts with cwd + "/" (tested without building it).
	if cwd != "" && len(p) > len(cwd) && p[len(cwd)] == '/' && strings.HasPrefix(p, cwd) {
		p = p[len(cwd)+1:]
	}
	return p
}
