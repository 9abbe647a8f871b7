package toolspec

import (
	"path"
	"reflect"
	"strings"

	"github.com/prunesched/prunesched/events"
	"mvdan.cc/sh/v3/syntax"
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
// The line is parsed as bash by mvdan.cc/sh/v3/syntax. A pipeline, list or
// compound command (|, &&, ||, ;, &, subshells, blocks, if/for/while/case)
// takes the most dangerous class of every simple command it may run,
// including those inside command and process substitutions ($(...), `...`,
// <(...)). Here-documents and here-strings are input, not commands (their
// substitutions still run). Environment assignments (FOO=1 go test) and
// wrappers (env, timeout, sudo) are looked through. cd follows the line:
// "cd dir && cat a" reads dir/a; a cd inside a subshell or pipeline does not
// leak, and one inside a branch or loop leaves the directory unknown, so a
// relative path after it names no known file. A side effect is scoped to the
// paths it names (its non-flag arguments and redirection targets); it is
// unscoped (may touch any path) when a named path is a glob, a variable,
// ".", or relative to an unknown directory, or when the program can do
// anything (interpreters, git checkout, package managers, find -exec, xargs
// of a side effect, a program named by a variable). A line that does not
// parse (unbalanced quotes, an unterminated here-document) is an unscoped
// side effect.
type Shell struct {
	// Class is the line's determinism class: the riskiest of its commands.
	Class events.Determinism
	// Kind is what the line does (KindRead, KindSearch, KindTest,
	// KindWrite, KindWeb or KindOther).
	Kind Kind
	// ReadPath and Range are set when the command is a single content read
	// of one path.
	ReadPath string
	Range    Range
	// Writes are the paths a side effect may touch; Unscoped means any.
	Writes   []string
	Unscoped bool
	// Program is the first program run (not cd), for error targets.
	Program string
}

// shCmd is one simple command as the shell would run it: its words (quotes
// removed; a part only known at run time is kept as a "$" marker so that
// unscopedWord rejects it), the files its redirections write, and the
// directory it runs in ("" for the session's working directory).
type shCmd struct {
	words  []string
	writes []string
	dir    string
	// builtin names a shell keyword that runs nothing (declare, [[, ((,
	// let): the command is pure apart from its substitutions.
	builtin string
	// inner is set for commands inside a substitution: they count for the
	// class but do not name the line's program.
	inner bool
}

// unknownShell is the class of a command line the classifier cannot
// understand: a side effect that may touch any path.
func unknownShell() Shell {
	return Shell{Class: events.DeterminismSideEffect, Kind: KindWrite, Unscoped: true}
}

// unknownDir marks a working directory the classifier cannot pin (cd to a
// variable, cd in a branch or loop, popd).
const unknownDir = "$PWD"

// ClassifyShell classifies a shell command line. It parses the line as bash
// (mvdan.cc/sh/v3/syntax); a line that does not parse is an unscoped side
// effect.
func ClassifyShell(line string) Shell {
	var sc ShellClassifier
	return sc.Classify(line)
}

// ShellClassifier is ClassifyShell with one parser reused across lines (a
// parser allocates its buffers once; Parse resets it). The zero value is
// ready to use; not for concurrent use.
type ShellClassifier struct {
	p *syntax.Parser
}

// Classify classifies one command line as ClassifyShell does.
func (sc *ShellClassifier) Classify(line string) (info Shell) {
	defer func() {
		// The parser is outside code fed with outside input: a panic in
		// it must not stop the session's eligibility.
		if recover() != nil {
			info = unknownShell()
		}
	}()
	if sc.p == nil {
		sc.p = syntax.NewParser(syntax.Variant(syntax.LangBash))
	}
	p := sc.p
	f, err := p.Parse(strings.NewReader(line), "")
	if err != nil {
		return unknownShell()
	}
	var w shWalker
	dir := ""
	w.stmts(f.Stmts, &dir)
	return combineShell(w.cmds)
}

// shWalker flattens a parsed command line into the simple commands it may
// run, in order, each with the directory it runs in.
type shWalker struct {
	cmds []shCmd
	// depth is the substitution nesting of the commands being walked.
	depth int
}

func (w *shWalker) add(c shCmd) {
	c.inner = w.depth > 0
	w.cmds = append(w.cmds, c)
}

func (w *shWalker) stmts(ss []*syntax.Stmt, dir *string) {
	for _, s := range ss {
		w.stmt(s, dir)
	}
}

// branch walks statements that may or may not run (a branch, a loop body):
// a directory change inside makes the directory after them unknown.
func (w *shWalker) branch(ss []*syntax.Stmt, dir *string) {
	d := *dir
	w.stmts(ss, &d)
	if d != *dir {
		*dir = unknownDir
	}
}

func (w *shWalker) stmt(s *syntax.Stmt, dir *string) {
	if s == nil {
		return
	}
	if s.Background || s.Coprocess {
		// "cmd &" runs in a subshell: a cd in it does not leak.
		d := *dir
		dir = &d
	}
	var writes []string
	for _, r := range s.Redirs {
		w.subst(r.Word, *dir)
		w.subst(r.Hdoc, *dir)
		if t, ok := redirTarget(r); ok {
			writes = append(writes, t)
		}
	}
	emitWrites := func() {
		if len(writes) > 0 {
			w.add(shCmd{writes: writes, dir: *dir})
		}
	}
	switch c := s.Cmd.(type) {
	case nil:
		emitWrites()
	case *syntax.CallExpr:
		for _, a := range c.Assigns {
			w.assign(a, *dir)
		}
		words := make([]string, len(c.Args))
		for i, a := range c.Args {
			w.subst(a, *dir)
			words[i] = wordString(a)
		}
		w.add(shCmd{words: words, writes: writes, dir: *dir})
		w.chdir(words, dir)
	case *syntax.Subshell:
		d := *dir
		w.stmts(c.Stmts, &d)
		emitWrites()
	case *syntax.Block:
		w.stmts(c.Stmts, dir)
		emitWrites()
	case *syntax.BinaryCmd:
		if c.Op == syntax.Pipe || c.Op == syntax.PipeAll {
			// Each side of a pipeline runs in its own subshell.
			dx, dy := *dir, *dir
			w.stmt(c.X, &dx)
			w.stmt(c.Y, &dy)
		} else {
			// An && / || list: each part sees the directory the parts
			// before it left ("a && cd x && cat b" reads x/b). The first
			// part always runs; a later one may not, so a directory it
			// changes is unknown after the list ("a && cd x; cat b").
			parts := andOrParts(s)
			cur := *dir
			w.stmt(parts[0], &cur)
			first := cur
			for _, p := range parts[1:] {
				w.stmt(p, &cur)
			}
			*dir = first
			if cur != first {
				*dir = unknownDir
			}
		}
		emitWrites()
	case *syntax.IfClause:
		for ic := c; ic != nil; ic = ic.Else {
			w.branch(ic.Cond, dir)
			w.branch(ic.Then, dir)
		}
		emitWrites()
	case *syntax.WhileClause:
		w.branch(c.Cond, dir)
		w.branch(c.Do, dir)
		emitWrites()
	case *syntax.ForClause:
		w.subst(c.Loop, *dir)
		w.branch(c.Do, dir)
		emitWrites()
	case *syntax.CaseClause:
		w.subst(c.Word, *dir)
		for _, it := range c.Items {
			for _, p := range it.Patterns {
				w.subst(p, *dir)
			}
			w.branch(it.Stmts, dir)
		}
		emitWrites()
	case *syntax.FuncDecl:
		// A definition runs nothing, but the function may be called later
		// on the line: judge its body as if it ran.
		d := *dir
		w.stmt(c.Body, &d)
		emitWrites()
	case *syntax.DeclClause:
		for _, a := range c.Args {
			w.assign(a, *dir)
		}
		w.add(shCmd{builtin: c.Variant.Value, writes: writes, dir: *dir})
	case *syntax.ArithmCmd, *syntax.LetClause, *syntax.TestClause:
		w.subst(c, *dir)
		w.add(shCmd{builtin: "test", writes: writes, dir: *dir})
	case *syntax.TimeClause:
		w.stmt(c.Stmt, dir)
		emitWrites()
	default:
		// Coprocesses, bats tests and whatever else the parser learns:
		// not modelled.
		w.add(shCmd{words: []string{"$unknown"}, writes: writes, dir: *dir})
	}
}

// andOrParts returns the statements of the && / || list s, in order. The
// parser nests lists to the left: ((a && b) || c).
func andOrParts(s *syntax.Stmt) []*syntax.Stmt {
	b, ok := s.Cmd.(*syntax.BinaryCmd)
	if !ok || b.Op != syntax.AndStmt && b.Op != syntax.OrStmt {
		return []*syntax.Stmt{s}
	}
	x := b.X
	var parts []*syntax.Stmt
	if xb, ok := x.Cmd.(*syntax.BinaryCmd); ok && (xb.Op == syntax.AndStmt || xb.Op == syntax.OrStmt) &&
		len(x.Redirs) == 0 && !x.Negated && !x.Background {
		parts = andOrParts(x)
	} else {
		parts = []*syntax.Stmt{x}
	}
	return append(parts, b.Y)
}

// chdir follows cd, pushd and popd.
func (w *shWalker) chdir(words []string, dir *string) {
	if len(words) == 0 {
		return
	}
	switch words[0] {
	case "cd", "pushd":
	case "popd":
		*dir = unknownDir
		return
	default:
		return
	}
	target := ""
	for _, a := range words[1:] {
		if a == "--" || strings.HasPrefix(a, "-") && a != "-" {
			continue
		}
		target = a
		break
	}
	switch {
	case target == "" || target == "-" || unscopedWord(target) && !strings.HasPrefix(target, "/"):
		*dir = unknownDir
	case strings.HasPrefix(target, "/") || *dir == "":
		*dir = target
	case *dir == unknownDir:
	default:
		*dir = path.Join(*dir, target)
	}
}

// assign walks an assignment's value for command substitutions.
func (w *shWalker) assign(a *syntax.Assign, dir string) {
	if a == nil {
		return
	}
	if a.Value != nil {
		w.subst(a.Value, dir)
	}
	if a.Array != nil {
		w.subst(a.Array, dir)
	}
}

// subst adds the commands of every command or process substitution inside
// node (they run in a subshell, before the command that holds them).
func (w *shWalker) subst(node syntax.Node, dir string) {
	if node == nil || reflect.ValueOf(node).IsNil() {
		return
	}
	w.depth++
	defer func() { w.depth-- }()
	syntax.Walk(node, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.CmdSubst:
			d := dir
			w.stmts(x.Stmts, &d)
			return false
		case *syntax.ProcSubst:
			d := dir
			w.stmts(x.Stmts, &d)
			return false
		}
		return true
	})
}

// redirTarget returns the file a redirection writes, if any. Reads (<, <<,
// <<<) and descriptor copies (2>&1, >&-) write no file.
func redirTarget(r *syntax.Redirect) (string, bool) {
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.RdrClob, syntax.AppClob,
		syntax.RdrAll, syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob:
	case syntax.DplOut:
		t := wordString(r.Word)
		if t == "-" || isDigits(strings.TrimSuffix(t, "-")) {
			return "", false
		}
	default:
		return "", false
	}
	if r.Word == nil {
		return "", false
	}
	return wordString(r.Word), true
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

// wordString is a word with quotes and escapes removed. Parts known only
// when the shell runs (parameters, substitutions, arithmetic, extended
// globs) become "$" markers, which unscopedWord treats as unpinnable.
func wordString(w *syntax.Word) string {
	if w == nil {
		return ""
	}
	var b strings.Builder
	writeParts(&b, w.Parts, false)
	return b.String()
}

func writeParts(b *strings.Builder, parts []syntax.WordPart, quoted bool) {
	for _, p := range parts {
		switch x := p.(type) {
		case *syntax.Lit:
			b.WriteString(unescape(x.Value, quoted))
		case *syntax.SglQuoted:
			b.WriteString(x.Value)
		case *syntax.DblQuoted:
			writeParts(b, x.Parts, true)
		case *syntax.ParamExp:
			b.WriteString("$")
			if x.Param != nil {
				b.WriteString(x.Param.Value)
			}
		case *syntax.CmdSubst, *syntax.ProcSubst:
			b.WriteString("$(...)")
		case *syntax.ArithmExp:
			b.WriteString("$((...))")
		default:
			b.WriteString("$*")
		}
	}
}

// unescape removes the backslashes the shell removes: any in an unquoted
// word, those before $ ` " \ and newline inside double quotes.
func unescape(s string, quoted bool) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			next := s[i+1]
			if !quoted || strings.IndexByte("$`\"\\\n", next) >= 0 {
				if next != '\n' {
					b.WriteByte(next)
				}
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// combineShell folds the simple commands of a line into one class: the
// most dangerous class of its parts, the union of their writes, and a read
// path only when the line is a single read.
func combineShell(cmds []shCmd) Shell {
	info := Shell{Class: events.DeterminismPure}
	var reads []Shell
	nonCD := 0
	for _, c := range cmds {
		var one Shell
		if c.builtin != "" {
			one = Shell{Class: events.DeterminismPure, Program: c.builtin}
		} else {
			one = classifyCommand(c.words)
		}
		for _, w := range c.writes {
			if w == "/dev/null" || w == "/dev/stderr" || w == "/dev/stdout" {
				continue
			}
			one.Class = events.DeterminismSideEffect
			one.Kind = KindWrite
			one.Writes = append(one.Writes, w)
		}
		if one.Program == "cd" && one.Class == events.DeterminismPure {
			continue
		}
		nonCD++
		if info.Program == "" && !c.inner {
			info.Program = one.Program
		}
		if one.ReadPath != "" {
			p, ok := resolvePath(c.dir, one.ReadPath)
			if ok {
				one.ReadPath = p
				reads = append(reads, one)
			} else {
				// A relative read in a directory we cannot pin reads
				// no known source.
				one.ReadPath, one.Range = "", Range{}
				if one.Kind == KindRead {
					one.Kind = KindOther
				}
			}
		}
		if danger(one.Class) > danger(info.Class) || info.Kind == KindOther && one.Kind != KindOther && one.Class == info.Class {
			info.Kind = one.Kind
		}
		info.Class = MaxClass(info.Class, one.Class)
		for _, w := range one.Writes {
			p, ok := resolvePath(c.dir, w)
			if !ok {
				info.Unscoped = true
				continue
			}
			info.Writes = append(info.Writes, p)
		}
		info.Unscoped = info.Unscoped || one.Unscoped
	}
	if nonCD == 1 && len(reads) == 1 && info.Class == events.DeterminismVersioned {
		info.ReadPath = reads[0].ReadPath
		info.Range = reads[0].Range
		info.Kind = KindRead
	}
	if nonCD == 0 {
		info.Program = "cd"
	}
	return info
}

// resolvePath joins p to the directory it is used in; ok is false when p
// cannot be pinned to files (a glob, a variable, a relative path under an
// unknown directory).
func resolvePath(dir, p string) (string, bool) {
	if unscopedWord(p) {
		return "", false
	}
	if dir == "" || strings.HasPrefix(p, "/") {
		return p, true
	}
	if unscopedWord(dir) {
		return "", false
	}
	return path.Join(dir, p), true
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
