package toolspec

// The per-program tables of the shell classifier (shell.go parses a line and
// combines its simple commands; this file says what one simple command
// does, by its program and arguments), and what else is known of programs:
// installs and test-run keys.

import (
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/prunesched/prunesched/events"
)

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
func classifyCommand(words []string) Shell {
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
		return Shell{Class: events.DeterminismPure}
	}
	prog := path.Base(words[0])
	args := words[1:]
	side := func(unscoped bool, writes ...string) Shell {
		return Shell{Class: events.DeterminismSideEffect, Kind: KindWrite, Unscoped: unscoped, Writes: writes, Program: prog}
	}
	state := func(k Kind) Shell {
		return Shell{Class: events.DeterminismState, Kind: k, Program: prog}
	}
	switch {
	case prog == "xargs":
		i := 0
		for i < len(args) && strings.HasPrefix(args[i], "-") {
			i++
		}
		inner := classifyCommand(args[i:])
		inner.ReadPath = ""
		if inner.Class == events.DeterminismSideEffect {
			inner.Unscoped = true
		}
		if inner.Class == events.DeterminismVersioned {
			inner.Class = events.DeterminismState
		}
		return inner
	case pureProgs[prog]:
		return Shell{Class: events.DeterminismPure, Program: prog}
	case readProgs[prog]:
		return classifyRead(prog, args)
	case prog == "sed":
		return classifySed(args)
	case prog == "sort" && hasFlagPrefix(args, "-o"):
		return side(true)
	case filterProgs[prog]:
		return Shell{Class: events.DeterminismVersioned, Program: prog}
	case prog == "find":
		for _, a := range args {
			switch a {
			case "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf", "-fls":
				return side(true)
			}
		}
		return state(KindSearch)
	case (prog == "curl" || prog == "wget") && (hasFlagPrefix(args, "-o") || hasFlagPrefix(args, "-O") || hasFlagPrefix(args, "--output")):
		return side(true)
	case prog == "curl" || prog == "wget" || prog == "http":
		return state(KindWeb)
	case searchProgs[prog]:
		return state(KindSearch)
	case testProgs[prog]:
		return state(KindTest)
	case writeProgs[prog]:
		return side(false, nonFlags(args)...)
	case prog == "git":
		return classifyGit(args)
	case prog == "go":
		switch first(args) {
		case "test", "vet":
			return state(KindTest)
		case "list", "env", "version", "doc":
			return state(KindSearch)
		}
		return side(true)
	case prog == "gofmt":
		if hasFlagPrefix(args, "-w") {
			return side(false, nonFlags(args)...)
		}
		return Shell{Class: events.DeterminismVersioned, Program: prog}
	case prog == "cargo":
		switch first(args) {
		case "test", "check", "clippy", "nextest":
			return state(KindTest)
		case "tree", "metadata":
			return state(KindSearch)
		}
		return side(true)
	case prog == "npm" || prog == "yarn" || prog == "pnpm" || prog == "bun":
		a := first(args)
		if a == "test" || a == "t" || (a == "run" && len(args) > 1 && strings.HasPrefix(args[1], "test")) {
			return state(KindTest)
		}
		if a == "ls" || a == "list" || a == "view" {
			return state(KindSearch)
		}
		return side(true)
	case prog == "npx" || prog == "uv" || prog == "poetry" || prog == "pipenv":
		rest := args
		if len(rest) > 0 && rest[0] == "run" {
			rest = rest[1:]
		}
		if len(rest) > 0 && (testProgs[rest[0]] || rest[0] == "pytest") {
			return state(KindTest)
		}
		return side(true)
	case strings.HasPrefix(prog, "python"):
		if len(args) >= 2 && args[0] == "-m" && (args[1] == "pytest" || args[1] == "unittest") {
			return state(KindTest)
		}
		return side(true)
	case prog == "mvn" || prog == "gradle" || prog == "./gradlew" || prog == "dotnet" || prog == "deno":
		if first(args) == "test" {
			return state(KindTest)
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
func classifyRead(prog string, args []string) Shell {
	info := Shell{Class: events.DeterminismVersioned, Kind: KindRead, Program: prog}
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
		info.Class = events.DeterminismPure // a filter on stdin
		info.Kind = KindOther
		return info
	}
	if len(paths) != 1 || unscopedWord(paths[0]) || n < 0 {
		return Shell{Class: events.DeterminismVersioned, Program: prog}
	}
	info.ReadPath = paths[0]
	switch prog {
	case "head":
		if n == 0 {
			n = 10
		}
		info.Range = Range{Off: 1, Lim: n}
	case "tail":
		if n == 0 {
			n = 10
		}
		info.Range = Range{Tail: true, Lim: n}
	default:
		info.Range = Range{Full: true}
	}
	return info
}

// classifySed handles sed: -i writes; -n 'A,Bp' FILE reads a range.
func classifySed(args []string) Shell {
	quiet := false
	script := ""
	var files []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-i" || strings.HasPrefix(a, "-i") || strings.HasPrefix(a, "--in-place") || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "i")):
			return Shell{Class: events.DeterminismSideEffect, Kind: KindWrite, Program: "sed", Writes: sedFiles(args)}
		case a == "-n" || a == "--quiet" || a == "--silent":
			quiet = true
		case a == "-e" || a == "--expression":
			if i+1 < len(args) {
				script = args[i+1]
				i++
			}
		case a == "-E" || a == "-r" || a == "--regexp-extended":
		case strings.HasPrefix(a, "-"):
			return Shell{Class: events.DeterminismVersioned, Program: "sed"}
		case script == "":
			script = a
		default:
			files = append(files, a)
		}
	}
	if strings.Contains(script, "w ") || strings.HasSuffix(script, "w") && !strings.HasSuffix(script, "p") {
		return Shell{Class: events.DeterminismSideEffect, Kind: KindWrite, Program: "sed", Unscoped: true}
	}
	if len(files) == 0 {
		return Shell{Class: events.DeterminismPure, Program: "sed"}
	}
	info := Shell{Class: events.DeterminismVersioned, Program: "sed"}
	if quiet && len(files) == 1 && !unscopedWord(files[0]) {
		if m := sedRangeRe.FindStringSubmatch(strings.TrimSpace(script)); m != nil {
			a, _ := strconv.Atoi(m[1])
			info.Kind = KindRead
			info.ReadPath = files[0]
			switch m[2] {
			case "":
				info.Range = Range{Off: a, Lim: 1}
			case "$":
				if a <= 1 {
					info.Range = Range{Full: true}
				} else {
					info.Range = Range{Off: a}
				}
			default:
				b, _ := strconv.Atoi(m[2])
				if b < a {
					b = a
				}
				info.Range = Range{Off: a, Lim: b - a + 1}
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
func classifyGit(args []string) Shell {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if args[i] == "-C" || args[i] == "-c" {
			i++
		}
		i++
	}
	if i >= len(args) {
		return Shell{Class: events.DeterminismState, Kind: KindSearch, Program: "git"}
	}
	sub := args[i]
	rest := args[i+1:]
	switch {
	case gitReads[sub]:
		return Shell{Class: events.DeterminismState, Kind: KindSearch, Program: "git"}
	case (sub == "branch" || sub == "tag" || sub == "remote" || sub == "stash") && (len(rest) == 0 || rest[0] == "-a" || rest[0] == "-r" || rest[0] == "-v" || rest[0] == "--list" || rest[0] == "-l" || rest[0] == "list"):
		return Shell{Class: events.DeterminismState, Kind: KindSearch, Program: "git"}
	case sub == "config" && len(rest) > 0 && (rest[0] == "--get" || rest[0] == "--list" || rest[0] == "-l"):
		return Shell{Class: events.DeterminismState, Kind: KindSearch, Program: "git"}
	case gitPathWrites[sub]:
		return Shell{Class: events.DeterminismSideEffect, Kind: KindWrite, Program: "git", Writes: nonFlags(rest)}
	case gitNoFiles[sub]:
		return Shell{Class: events.DeterminismSideEffect, Kind: KindWrite, Program: "git"}
	}
	return Shell{Class: events.DeterminismSideEffect, Kind: KindWrite, Program: "git", Unscoped: true}
}

// installPrograms are package managers whose install output is a log.
var installPrograms = map[string]bool{"pip": true, "pip3": true, "npm": true, "yarn": true, "pnpm": true, "bun": true,
	"apt": true, "apt-get": true, "conda": true, "poetry": true, "uv": true, "cargo": true, "go": true, "gem": true, "brew": true}

// IsInstall reports whether a shell command, whose first program is
// program, installs packages: a package manager (pip, npm, apt-get, go, ...)
// given an install, add, i or get word.
func IsInstall(command, program string) bool {
	words := strings.Fields(command)
	if len(words) < 2 || !installPrograms[path.Base(program)] {
		return false
	}
	for _, w := range words[1:] {
		if w == "install" || w == "add" || w == "i" || w == "get" {
			return true
		}
	}
	return false
}

var outputFilterRe = regexp.MustCompile(`\s*(2>&1|\|\s*(head|tail)(\s+-n)?(\s+-?\d+)?)\s*`)

// RunKey is what identifies a run of a shell command (a test run) across
// calls: the command without output redirection and head/tail filters.
func RunKey(command string) string {
	return strings.TrimSpace(outputFilterRe.ReplaceAllString(command, " "))
}
