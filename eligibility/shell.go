package eligibility

import (
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/prunesched/prunesched/events"
)

// The shell classifier gives bash-only agents (mini-swe-agent, SWE-agent's
// bash, Claude Code's Bash, OpenCode's bash) the same determinism classes as
// dedicated tools:
//
//   - cat, nl, head, tail, sed -n 'A,Bp' read a path: versioned by the source
//     of that path (a single read of one path gets a source identity and a
//     line range; other text filters such as awk, cut, sort, wc, diff are
//     versioned without a source identity);
//   - rg, grep, find, ls, tree, stat and the like search: state;
//   - pytest, go test, npm test, make, cargo test and the like run tests: state;
//   - git status/diff/log/show/blame/... read repository state: state;
//   - echo, printf, cd, true are pure;
//   - everything else is side_effect: any write redirection (> or >>, except to
//     /dev/null), tee, sed -i, rm, mv, cp, touch, mkdir, git
//     commit/checkout/reset/..., package installs, interpreters (python,
//     node, bash -c), unknown programs.
//
// A pipeline or compound command (|, &&, ||, ;, &) takes the most dangerous
// class of its parts. A side effect is scoped to the paths it names (its
// non-flag arguments and redirection targets); it is unscoped (may touch any
// path) when a named path is a glob, a variable, ".", or when the program can
// do anything (interpreters, git checkout, package managers, find -exec,
// xargs of a side effect). A command the classifier cannot parse
// (unbalanced quotes, command substitution, here-documents) is an unscoped
// side effect.
type shellInfo struct {
	class events.Determinism
	kind  toolKind
	// readPath and rng are set when the command is a single content read of
	// one path.
	readPath string
	rng      readRange
	// writes are the paths a side effect may touch; unscoped means any.
	writes   []string
	unscoped bool
	// program is the first program run (not cd), for error targets.
	program string
}

var danger = map[events.Determinism]int{
	events.DeterminismPure:       0,
	events.DeterminismVersioned:  1,
	events.DeterminismState:      2,
	events.DeterminismSideEffect: 3,
}

func maxClass(a, b events.Determinism) events.Determinism {
	if danger[b] > danger[a] {
		return b
	}
	return a
}

type shTok struct {
	s  string
	op bool
}

// lexShell splits a command line into words and operators. ok is false when
// the line cannot be understood without running a shell.
func lexShell(s string) (toks []shTok, ok bool) {
	var cur strings.Builder
	in := false
	flush := func() {
		if in {
			toks = append(toks, shTok{s: cur.String()})
			cur.Reset()
			in = false
		}
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			cur.WriteString(s[i+1 : i+1+j])
			in = true
			i += j + 1
		case ch == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				} else if s[j] == '`' || (s[j] == '$' && j+1 < len(s) && s[j+1] == '(') {
					return nil, false
				}
				cur.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, false
			}
			in = true
			i = j
		case ch == '\\':
			if i+1 < len(s) {
				if s[i+1] != '\n' {
					cur.WriteByte(s[i+1])
					in = true
				}
				i++
			}
		case ch == '`', ch == '$' && i+1 < len(s) && s[i+1] == '(':
			return nil, false
		case ch == ' ', ch == '\t', ch == '\r':
			flush()
		case ch == '\n', ch == ';', ch == '(', ch == ')', ch == '{' && !in, ch == '}' && !in:
			flush()
			toks = append(toks, shTok{s: ";", op: true})
		case ch == '|':
			flush()
			if i+1 < len(s) && (s[i+1] == '|' || s[i+1] == '&') {
				i++
			}
			toks = append(toks, shTok{s: "|", op: true})
		case ch == '&':
			if i+1 < len(s) && s[i+1] == '&' {
				flush()
				toks = append(toks, shTok{s: "&&", op: true})
				i++
			} else if i+1 < len(s) && s[i+1] == '>' {
				flush()
				i++
				if i+1 < len(s) && s[i+1] == '>' {
					i++
				}
				toks = append(toks, shTok{s: ">", op: true})
			} else if in && cur.Len() > 0 && strings.HasSuffix(cur.String(), ">") {
				cur.WriteByte(ch)
			} else {
				flush()
				toks = append(toks, shTok{s: "&", op: true})
			}
		case ch == '>' || ch == '<':
			if in && isDigits(cur.String()) {
				cur.Reset()
				in = false
			} else {
				flush()
			}
			op := string(ch)
			if i+1 < len(s) && s[i+1] == ch {
				op += string(ch)
				i++
			}
			if op == "<<" {
				return nil, false // here-document: the body is not commands
			}
			if i+1 < len(s) && s[i+1] == '&' {
				// >&2: duplicate a descriptor, no file.
				i++
				for i+1 < len(s) && (s[i+1] >= '0' && s[i+1] <= '9' || s[i+1] == '-') {
					i++
				}
				continue
			}
			if op == ">>" {
				op = ">"
			}
			toks = append(toks, shTok{s: op, op: true})
		case ch == '#' && !in:
			for i < len(s) && s[i] != '\n' {
				i++
			}
			i--
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	flush()
	return toks, true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

type shCmd struct {
	words  []string
	writes []string // > targets
}

// classifyShell classifies a shell command line.
func classifyShell(line string) shellInfo {
	toks, ok := lexShell(line)
	if !ok {
		return shellInfo{class: events.DeterminismSideEffect, kind: kindWrite, unscoped: true}
	}
	var cmds []shCmd
	var cur shCmd
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if !t.op {
			cur.words = append(cur.words, t.s)
			continue
		}
		switch t.s {
		case ">", "<":
			if i+1 < len(toks) && !toks[i+1].op {
				if t.s == ">" {
					cur.writes = append(cur.writes, toks[i+1].s)
				}
				i++
			}
		default:
			if len(cur.words) > 0 || len(cur.writes) > 0 {
				cmds = append(cmds, cur)
			}
			cur = shCmd{}
		}
	}
	if len(cur.words) > 0 || len(cur.writes) > 0 {
		cmds = append(cmds, cur)
	}
	info := shellInfo{class: events.DeterminismPure}
	dir := ""
	var reads []shellInfo
	nonCD := 0
	for _, c := range cmds {
		one := classifyCommand(c.words)
		for _, w := range c.writes {
			if w == "/dev/null" || w == "/dev/stderr" || w == "/dev/stdout" {
				continue
			}
			one.class = events.DeterminismSideEffect
			one.kind = kindWrite
			one.writes = append(one.writes, w)
		}
		if one.program == "cd" {
			if len(c.words) > 1 {
				dir = c.words[1]
			}
			continue
		}
		nonCD++
		if info.program == "" {
			info.program = one.program
		}
		if danger[one.class] > danger[info.class] || info.kind == kindOther && one.kind != kindOther && one.class == info.class {
			info.kind = one.kind
		}
		info.class = maxClass(info.class, one.class)
		for _, w := range one.writes {
			if unscopedWord(w) {
				info.unscoped = true
				continue
			}
			info.writes = append(info.writes, joinDir(dir, w))
		}
		info.unscoped = info.unscoped || one.unscoped
		if one.readPath != "" {
			one.readPath = joinDir(dir, one.readPath)
			reads = append(reads, one)
		}
	}
	if nonCD == 1 && len(reads) == 1 && info.class == events.DeterminismVersioned {
		info.readPath = reads[0].readPath
		info.rng = reads[0].rng
		info.kind = kindRead
	}
	if nonCD == 0 {
		info.program = "cd"
	}
	return info
}

func joinDir(dir, p string) string {
	if dir == "" || strings.HasPrefix(p, "/") || unscopedWord(dir) {
		return p
	}
	return path.Join(dir, p)
}

// unscopedWord reports whether a path argument cannot be pinned to files:
// globs, variables, home, the current or parent directory, the root.
func unscopedWord(w string) bool {
	if strings.ContainsAny(w, "*?[$~{") {
		return true
	}
	switch path.Clean(w) {
	case ".", "..", "/":
		return true
	}
	return false
}

var (
	pureProgs = set("echo", "printf", "true", "false", ":", "test", "[", "exit", "set",
		"export", "unset", "sleep", "basename", "dirname", "seq", "expr", "cd", "pushd", "popd", "source", ".")
	readProgs   = set("cat", "nl", "head", "tail", "less", "more", "bat")
	filterProgs = set("awk", "gawk", "cut", "sort", "uniq", "tr", "jq", "yq", "wc", "diff", "cmp",
		"md5sum", "sha256sum", "sha1sum", "xxd", "od", "hexdump", "strings", "column", "fold", "rev",
		"tac", "comm", "paste", "base64", "grep-context", "sed")
	searchProgs = set("grep", "egrep", "fgrep", "rg", "ag", "ack", "find", "fd", "ls", "tree", "du", "df",
		"stat", "file", "which", "whereis", "type", "pwd", "ps", "env", "printenv", "date", "whoami",
		"hostname", "uname", "id", "locate", "realpath", "readlink", "gofmt-l", "lsof", "free", "uptime",
		"curl", "wget", "http")
	testProgs   = set("pytest", "py.test", "tox", "nox", "jest", "vitest", "mocha", "rspec", "phpunit", "ctest", "make")
	writeProgs  = set("rm", "rmdir", "mv", "cp", "mkdir", "touch", "chmod", "chown", "ln", "tee", "truncate", "install", "rsync", "dd", "shred", "unlink")
	prefixProgs = set("sudo", "time", "nice", "nohup", "command", "exec", "builtin", "stdbuf")
	gitReads    = set("status", "diff", "log", "show", "blame", "rev-parse", "ls-files", "grep", "describe",
		"shortlog", "reflog", "ls-tree", "cat-file", "whatchanged", "rev-list", "merge-base", "name-rev", "count-objects")
	gitPathWrites = set("rm", "mv")
	gitNoFiles    = set("commit", "add", "stage", "fetch", "push", "notes", "gc", "tag", "branch", "remote", "config")
)

func set(xs ...string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

var sedRangeRe = regexp.MustCompile(`^(\d+)(?:,(\d+|\$))?p$`)

// classifyCommand classifies one simple command (no operators).
func classifyCommand(words []string) shellInfo {
	// Drop environment assignments and wrapper programs.
	for len(words) > 0 {
		w := words[0]
		if eq := strings.IndexByte(w, '='); eq > 0 && !strings.ContainsAny(w[:eq], "/-.") {
			words = words[1:]
			continue
		}
		if prefixProgs[w] {
			words = words[1:]
			continue
		}
		if w == "env" && len(words) > 1 {
			words = words[1:]
			continue
		}
		if w == "timeout" && len(words) > 2 {
			words = words[2:]
			continue
		}
		break
	}
	if len(words) == 0 {
		return shellInfo{class: events.DeterminismPure}
	}
	prog := path.Base(words[0])
	args := words[1:]
	side := func(unscoped bool, writes ...string) shellInfo {
		return shellInfo{class: events.DeterminismSideEffect, kind: kindWrite, unscoped: unscoped, writes: writes, program: prog}
	}
	state := func(k toolKind) shellInfo {
		return shellInfo{class: events.DeterminismState, kind: k, program: prog}
	}
	switch {
	case prog == "xargs":
		i := 0
		for i < len(args) && strings.HasPrefix(args[i], "-") {
			i++
		}
		inner := classifyCommand(args[i:])
		inner.readPath = ""
		if inner.class == events.DeterminismSideEffect {
			inner.unscoped = true
		}
		if inner.class == events.DeterminismVersioned {
			inner.class = events.DeterminismState
		}
		return inner
	case pureProgs[prog]:
		return shellInfo{class: events.DeterminismPure, program: prog}
	case readProgs[prog]:
		return classifyRead(prog, args)
	case prog == "sed":
		return classifySed(args)
	case prog == "sort" && hasFlagPrefix(args, "-o"):
		return side(true)
	case filterProgs[prog]:
		return shellInfo{class: events.DeterminismVersioned, program: prog}
	case prog == "find":
		for _, a := range args {
			switch a {
			case "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf", "-fls":
				return side(true)
			}
		}
		return state(kindSearch)
	case (prog == "curl" || prog == "wget") && (hasFlagPrefix(args, "-o") || hasFlagPrefix(args, "-O") || hasFlagPrefix(args, "--output")):
		return side(true)
	case prog == "curl" || prog == "wget" || prog == "http":
		return state(kindWeb)
	case searchProgs[prog]:
		return state(kindSearch)
	case testProgs[prog]:
		return state(kindTest)
	case writeProgs[prog]:
		return side(false, nonFlags(args)...)
	case prog == "git":
		return classifyGit(args)
	case prog == "go":
		switch first(args) {
		case "test", "vet":
			return state(kindTest)
		case "list", "env", "version", "doc":
			return state(kindSearch)
		}
		return side(true)
	case prog == "gofmt":
		if hasFlagPrefix(args, "-w") {
			return side(false, nonFlags(args)...)
		}
		return shellInfo{class: events.DeterminismVersioned, program: prog}
	case prog == "cargo":
		switch first(args) {
		case "test", "check", "clippy", "nextest":
			return state(kindTest)
		case "tree", "metadata":
			return state(kindSearch)
		}
		return side(true)
	case prog == "npm" || prog == "yarn" || prog == "pnpm" || prog == "bun":
		a := first(args)
		if a == "test" || a == "t" || (a == "run" && len(args) > 1 && strings.HasPrefix(args[1], "test")) {
			return state(kindTest)
		}
		if a == "ls" || a == "list" || a == "view" {
			return state(kindSearch)
		}
		return side(true)
	case prog == "npx" || prog == "uv" || prog == "poetry" || prog == "pipenv":
		rest := args
		if len(rest) > 0 && rest[0] == "run" {
			rest = rest[1:]
		}
		if len(rest) > 0 && (testProgs[rest[0]] || rest[0] == "pytest") {
			return state(kindTest)
		}
		return side(true)
	case strings.HasPrefix(prog, "python"):
		if len(args) >= 2 && args[0] == "-m" && (args[1] == "pytest" || args[1] == "unittest") {
			return state(kindTest)
		}
		return side(true)
	case prog == "mvn" || prog == "gradle" || prog == "./gradlew" || prog == "dotnet" || prog == "deno":
		if first(args) == "test" {
			return state(kindTest)
		}
		return side(true)
	}
	return side(true)
}

func first(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

func hasFlagPrefix(args []string, p string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, p) {
			return true
		}
	}
	return false
}

func nonFlags(args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			out = append(out, a)
		}
	}
	return out
}

// classifyRead handles cat, nl, head, tail, less, more.
func classifyRead(prog string, args []string) shellInfo {
	info := shellInfo{class: events.DeterminismVersioned, kind: kindRead, program: prog}
	var paths []string
	n := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case (a == "-n" || a == "-c" || a == "--lines") && (prog == "head" || prog == "tail") && i+1 < len(args):
			if a != "-c" {
				n, _ = strconv.Atoi(strings.TrimPrefix(args[i+1], "+"))
			} else {
				n = -1
			}
			i++
		case strings.HasPrefix(a, "-") && len(a) > 1:
			if v, err := strconv.Atoi(a[1:]); err == nil && (prog == "head" || prog == "tail") {
				n = v
			} else if strings.HasPrefix(a, "-n") && len(a) > 2 {
				n, _ = strconv.Atoi(a[2:])
			} else if prog == "head" || prog == "tail" {
				n = -1 // bytes or an option we do not model
			}
		default:
			paths = append(paths, a)
		}
	}
	if len(paths) == 0 {
		info.class = events.DeterminismPure // a filter on stdin
		info.kind = kindOther
		return info
	}
	if len(paths) != 1 || unscopedWord(paths[0]) || n < 0 {
		return shellInfo{class: events.DeterminismVersioned, program: prog}
	}
	info.readPath = paths[0]
	switch prog {
	case "head":
		if n == 0 {
			n = 10
		}
		info.rng = readRange{off: 1, lim: n}
	case "tail":
		if n == 0 {
			n = 10
		}
		info.rng = readRange{tail: true, lim: n}
	default:
		info.rng = readRange{full: true}
	}
	return info
}

// classifySed handles sed: -i writes; -n 'A,Bp' FILE reads a range.
func classifySed(args []string) shellInfo {
	quiet := false
	script := ""
	var files []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-i" || strings.HasPrefix(a, "-i") || strings.HasPrefix(a, "--in-place") || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "i")):
			return shellInfo{class: events.DeterminismSideEffect, kind: kindWrite, program: "sed", writes: sedFiles(args)}
		case a == "-n" || a == "--quiet" || a == "--silent":
			quiet = true
		case a == "-e" || a == "--expression":
			if i+1 < len(args) {
				script = args[i+1]
				i++
			}
		case a == "-E" || a == "-r" || a == "--regexp-extended":
		case strings.HasPrefix(a, "-"):
			return shellInfo{class: events.DeterminismVersioned, program: "sed"}
		case script == "":
			script = a
		default:
			files = append(files, a)
		}
	}
	if strings.Contains(script, "w ") || strings.HasSuffix(script, "w") && !strings.HasSuffix(script, "p") {
		return shellInfo{class: events.DeterminismSideEffect, kind: kindWrite, program: "sed", unscoped: true}
	}
	if len(files) == 0 {
		return shellInfo{class: events.DeterminismPure, program: "sed"}
	}
	info := shellInfo{class: events.DeterminismVersioned, program: "sed"}
	if quiet && len(files) == 1 && !unscopedWord(files[0]) {
		if m := sedRangeRe.FindStringSubmatch(strings.TrimSpace(script)); m != nil {
			a, _ := strconv.Atoi(m[1])
			info.kind = kindRead
			info.readPath = files[0]
			switch m[2] {
			case "":
				info.rng = readRange{off: a, lim: 1}
			case "$":
				if a <= 1 {
					info.rng = readRange{full: true}
				} else {
					info.rng = readRange{off: a}
				}
			default:
				b, _ := strconv.Atoi(m[2])
				if b < a {
					b = a
				}
				info.rng = readRange{off: a, lim: b - a + 1}
			}
		}
	}
	return info
}

func sedFiles(args []string) []string {
	var out []string
	scriptSeen := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-e" || a == "--expression" {
			scriptSeen = true
			i++
			continue
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		if !scriptSeen {
			scriptSeen = true
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return []string{"*"} // unknown target: unscoped
	}
	return out
}

// classifyGit handles git subcommands.
func classifyGit(args []string) shellInfo {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if args[i] == "-C" || args[i] == "-c" {
			i++
		}
		i++
	}
	if i >= len(args) {
		return shellInfo{class: events.DeterminismState, kind: kindSearch, program: "git"}
	}
	sub := args[i]
	rest := args[i+1:]
	switch {
	case gitReads[sub]:
		return shellInfo{class: events.DeterminismState, kind: kindSearch, program: "git"}
	case (sub == "branch" || sub == "tag" || sub == "remote" || sub == "stash") && (len(rest) == 0 || rest[0] == "-a" || rest[0] == "-r" || rest[0] == "-v" || rest[0] == "--list" || rest[0] == "-l" || rest[0] == "list"):
		return shellInfo{class: events.DeterminismState, kind: kindSearch, program: "git"}
	case sub == "config" && len(rest) > 0 && (rest[0] == "--get" || rest[0] == "--list" || rest[0] == "-l"):
		return shellInfo{class: events.DeterminismState, kind: kindSearch, program: "git"}
	case gitPathWrites[sub]:
		return shellInfo{class: events.DeterminismSideEffect, kind: kindWrite, program: "git", writes: nonFlags(rest)}
	case gitNoFiles[sub]:
		return shellInfo{class: events.DeterminismSideEffect, kind: kindWrite, program: "git"}
	}
	return shellInfo{class: events.DeterminismSideEffect, kind: kindWrite, program: "git", unscoped: true}
}
