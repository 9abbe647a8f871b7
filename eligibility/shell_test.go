package eligibility

import (
	"encoding/json"
	"os"
	"reflect"
	"strconv"
	"testing"

	"github.com/prunesched/prunesched/events"
)

func TestClassifyShell(t *testing.T) {
	const (
		P = events.DeterminismPure
		V = events.DeterminismVersioned
		S = events.DeterminismState
		X = events.DeterminismSideEffect
	)
	cases := []struct {
		cmd      string
		class    events.Determinism
		readPath string
		rng      string
		writes   []string
		unscoped bool
	}{
		{"cat src/a.go", V, "src/a.go", "1-EOF", nil, false},
		{"cat -n src/a.go", V, "src/a.go", "1-EOF", nil, false},
		{"nl -ba a.py", V, "a.py", "1-EOF", nil, false},
		{"sed -n '10,40p' config.go", V, "config.go", "10-40", nil, false},
		{"sed -n 5p x.go", V, "x.go", "5-5", nil, false},
		{"head -n 20 README.md", V, "README.md", "1-20", nil, false},
		{"head -20 README.md", V, "README.md", "1-20", nil, false},
		{"tail -n 5 log.txt", V, "log.txt", "last 5", nil, false},
		{"cd /repo && cat a.go", V, "/repo/a.go", "1-EOF", nil, false},
		{"cat a.go b.go", V, "", "", nil, false},
		{"cat a.go | head -5", V, "", "", nil, false},
		{"wc -l a.go", V, "", "", nil, false},
		{"rg foo src", S, "", "", nil, false},
		{"grep -rn foo .", S, "", "", nil, false},
		{"find . -name '*.go'", S, "", "", nil, false},
		{"ls -la", S, "", "", nil, false},
		{"git status", S, "", "", nil, false},
		{"git --no-pager diff HEAD~1", S, "", "", nil, false},
		{"git log --oneline -5", S, "", "", nil, false},
		{"pytest -x tests/", S, "", "", nil, false},
		{"python -m pytest tests", S, "", "", nil, false},
		{"go test ./...", S, "", "", nil, false},
		{"npm test", S, "", "", nil, false},
		{"npm run test:unit", S, "", "", nil, false},
		{"make", S, "", "", nil, false},
		{"cargo test", S, "", "", nil, false},
		{"cd repo && go test ./... 2>&1 | tail -20", S, "", "", nil, false},
		{"echo hello", P, "", "", nil, false},
		{"ls > files.txt", X, "", "", []string{"files.txt"}, false},
		{"pytest > /dev/null 2>&1", S, "", "", nil, false},
		{"sed -i 's/a/b/' src/a.go", X, "", "", []string{"src/a.go"}, false},
		{"sed -i.bak 's/a/b/' a.go", X, "", "", []string{"a.go"}, false},
		{"rm -rf build", X, "", "", []string{"build"}, false},
		{"mv a.go b.go", X, "", "", []string{"a.go", "b.go"}, false},
		{"rm *.pyc", X, "", "", nil, true},
		{"git commit -m 'x'", X, "", "", nil, false},
		{"git checkout main", X, "", "", nil, true},
		{"pip install requests", X, "", "", nil, true},
		{"python fix.py", X, "", "", nil, true},
		// The lexer gave up on here-documents and substitutions (unscoped
		// side effects); the parser sees a write of a.py and a clock read.
		{"cat <<EOF > a.py\nprint(1)\nEOF", X, "", "", []string{"a.py"}, false},
		{"echo $(date)", S, "", "", nil, false},
		{"echo 'unbalanced", X, "", "", nil, true},
		{"find . -name x -delete", X, "", "", nil, true},
		{"find . | xargs rm", X, "", "", nil, true},
		{"cat a.go && rm a.go", X, "", "", []string{"a.go"}, false},
		{"ls; touch new.txt", X, "", "", []string{"new.txt"}, false},
		{"cat a.go | tee copy.go", X, "", "", []string{"copy.go"}, false},
		{"FOO=1 go test ./pkg", S, "", "", nil, false},
		{"timeout 60 pytest", S, "", "", nil, false},
		{"frobnicate --all", X, "", "", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.cmd, func(t *testing.T) {
			checkShell(t, classifyShell(tc.cmd), tc.class, tc.readPath, tc.rng, tc.writes, tc.unscoped)
		})
	}
}

// checkShell compares a classification with what a table expects.
func checkShell(t *testing.T, got shellInfo, class events.Determinism, readPath, rng string, writes []string, unscoped bool) {
	t.Helper()
	if got.class != class {
		t.Errorf("class %q, want %q", got.class, class)
	}
	if got.readPath != readPath {
		t.Errorf("readPath %q, want %q", got.readPath, readPath)
	}
	if readPath != "" && got.rng.String() != rng {
		t.Errorf("range %q, want %q", got.rng, rng)
	}
	if !reflect.DeepEqual(got.writes, writes) {
		t.Errorf("writes %q, want %q", got.writes, writes)
	}
	if got.unscoped != unscoped {
		t.Errorf("unscoped %v, want %v", got.unscoped, unscoped)
	}
}

// TestClassifyShellParser covers what the bash parser sees and the old
// lexer did not: scoping of cd, substitutions, descriptor redirections,
// keywords, here-strings.
func TestClassifyShellParser(t *testing.T) {
	const (
		P = events.DeterminismPure
		V = events.DeterminismVersioned
		S = events.DeterminismState
		X = events.DeterminismSideEffect
	)
	cases := []struct {
		cmd      string
		class    events.Determinism
		readPath string
		rng      string
		writes   []string
		unscoped bool
		program  string
	}{
		{"(cd sub && make); cat a.go", S, "", "", nil, false, "make"},
		{"(cd sub && touch x) && touch y", X, "", "", []string{"sub/x", "y"}, false, "touch"},
		{"cd /repo && (cat a.go)", V, "/repo/a.go", "1-EOF", nil, false, "cat"},
		{"cd /repo; cd src && sed -n '1,5p' m.go", V, "/repo/src/m.go", "1-5", nil, false, "sed"},
		{"cd $DIR && cat a.go", V, "", "", nil, false, "cat"},
		{"cd $DIR && touch a.go", X, "", "", nil, true, "touch"},
		{"if true; then cd x; fi; touch a", X, "", "", nil, true, "true"},
		{"cat a.go | (cd /tmp && cat > b.go)", X, "", "", []string{"/tmp/b.go"}, false, "cat"},
		{"cat 'my file.go'", V, "my file.go", "1-EOF", nil, false, "cat"},
		{`cat "src/a b.go"`, V, "src/a b.go", "1-EOF", nil, false, "cat"},
		{`cat src/a\ b.go`, V, "src/a b.go", "1-EOF", nil, false, "cat"},
		{"cat \"$F\"", V, "", "", nil, false, "cat"},
		{"echo hi >& out.txt", X, "", "", []string{"out.txt"}, false, "echo"},
		{"echo hi >&2", P, "", "", nil, false, "echo"},
		{"go test ./... &> /dev/null", S, "", "", nil, false, "go"},
		{"go test ./... &> log.txt", X, "", "", []string{"log.txt"}, false, "go"},
		{"ls 2> err.txt", X, "", "", []string{"err.txt"}, false, "ls"},
		{"{ ls; pwd; } > out", X, "", "", []string{"out"}, false, "ls"},
		{"grep -c x <<< \"$VAR\"", S, "", "", nil, false, "grep"},
		{"python - <<'EOF'\nprint(1)\nEOF", X, "", "", nil, true, "python"},
		{"cat <<'EOF'\n$(rm -rf /)\nEOF", P, "", "", nil, false, "cat"},
		{"cat <<EOF\n$(rm -rf x)\nEOF", X, "", "", []string{"x"}, false, "cat"},
		{"git commit -m \"$(cat <<'EOF'\nmsg\nEOF\n)\"", X, "", "", nil, false, "git"},
		{"echo `rm -f a`", X, "", "", []string{"a"}, false, "echo"},
		{"diff <(git show HEAD:a.go) a.go", S, "", "", nil, false, "diff"},
		{"$(which python) fix.py", X, "", "", nil, true, "$(...)"},
		{"[[ -f go.mod ]] && go test ./...", S, "", "", nil, false, "test"},
		{"export GOFLAGS=-mod=mod && go vet ./...", S, "", "", nil, false, "export"},
		{"X=$(date) && echo $X", S, "", "", nil, false, "echo"},
		{"for f in *.go; do gofmt -l $f; done", V, "", "", nil, false, "gofmt"},
		{"while read l; do rm \"$l\"; done < list.txt", X, "", "", nil, true, "read"},
		{"f() { rm -rf build; }; f", X, "", "", []string{"build"}, true, "rm"},
		{"sudo -E go test ./...", X, "", "", nil, true, "-E"},
		{"ls # > not-a-write", S, "", "", nil, false, "ls"},
		{"cat a.go\n\n", V, "a.go", "1-EOF", nil, false, "cat"},
		{"cd /repo", P, "", "", nil, false, "cd"},
		{"", P, "", "", nil, false, "cd"},
		{"cat a.go |", X, "", "", nil, true, ""},
		{"cat <<EOF\nunterminated", X, "", "", nil, true, ""},
		{"echo $((1+2))", P, "", "", nil, false, "echo"},
	}
	for _, tc := range cases {
		t.Run(tc.cmd, func(t *testing.T) {
			got := classifyShell(tc.cmd)
			checkShell(t, got, tc.class, tc.readPath, tc.rng, tc.writes, tc.unscoped)
			if got.program != tc.program {
				t.Errorf("program %q, want %q", got.program, tc.program)
			}
		})
	}
}

// traceCommand is one shell command taken verbatim from a shared trace,
// with its expected classification.
type traceCommand struct {
	Trace    string   `json:"trace"`
	Cmd      string   `json:"cmd"`
	Class    string   `json:"class"`
	Kind     string   `json:"kind"`
	Read     string   `json:"read"`
	Range    string   `json:"range"`
	Writes   []string `json:"writes"`
	Unscoped bool     `json:"unscoped"`
}

// TestClassifyShellTraces classifies commands agents really ran (Claude
// Code Bash, OpenCode bash, mini-swe-agent bash; testdata/shell_traces.json
// names the trace of each): heredocs, pipes, substitutions, redirections,
// loops, quoted arguments.
func TestClassifyShellTraces(t *testing.T) {
	b, err := os.ReadFile("testdata/shell_traces.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []traceCommand
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatalf("testdata/shell_traces.json: %v", err)
	}
	if len(cases) < 35 {
		t.Fatalf("%d trace commands, want at least 35", len(cases))
	}
	for i, tc := range cases {
		name := tc.Cmd
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(strconv.Itoa(i)+"/"+name, func(t *testing.T) {
			got := classifyShell(tc.Cmd)
			if string(got.class) != tc.Class || kindName(got.kind) != tc.Kind {
				t.Errorf("%s: class %s/%s, want %s/%s", tc.Trace, got.class, kindName(got.kind), tc.Class, tc.Kind)
			}
			if got.readPath != tc.Read || tc.Read != "" && got.rng.String() != tc.Range {
				t.Errorf("%s: read %q %q, want %q %q", tc.Trace, got.readPath, got.rng, tc.Read, tc.Range)
			}
			if !reflect.DeepEqual(got.writes, tc.Writes) || got.unscoped != tc.Unscoped {
				t.Errorf("%s: writes %q unscoped %v, want %q %v", tc.Trace, got.writes, got.unscoped, tc.Writes, tc.Unscoped)
			}
		})
	}
}

// FuzzClassifyShell: any command line classifies without panicking, and
// the same line always gets the same class (decisions replay byte for
// byte).
func FuzzClassifyShell(f *testing.F) {
	for _, s := range []string{
		"cat a.go", "cd /r && sed -n '1,5p' a.go | head", "cat <<EOF > x\n$(date)\nEOF",
		"echo 'unbalanced", "for f in *; do rm $f; done", "diff <(ls) >(cat)", "a=$((1+2)) b=`c`",
		"{ x; } 2>&1 >&- &> y", "case $x in a) cd z;; esac; cat q", "f() { f; }; coproc cat",
	} {
		f.Add(s)
	}
	// One parser across inputs, as Core reuses it: a reused parser must
	// classify as a fresh one does.
	fuzzParser := newShellParser()
	f.Fuzz(func(t *testing.T, line string) {
		a := classifyShell(line)
		b := classifyShellWith(fuzzParser, line)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%q: not deterministic: %+v vs %+v", line, a, b)
		}
		if _, ok := danger[a.class]; !ok {
			t.Fatalf("%q: class %q", line, a.class)
		}
		if a.readPath != "" && a.class != events.DeterminismVersioned {
			t.Fatalf("%q: read path %q on a %s command", line, a.readPath, a.class)
		}
	})
}

// BenchmarkClassifyShell classifies the trace commands (uncached).
func BenchmarkClassifyShell(b *testing.B) {
	data, err := os.ReadFile("testdata/shell_traces.json")
	if err != nil {
		b.Fatal(err)
	}
	var cases []traceCommand
	if err := json.Unmarshal(data, &cases); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range cases {
			classifyShell(c.Cmd)
		}
	}
}

// BenchmarkClassifyShellReused is the same with one parser, as Core uses it.
func BenchmarkClassifyShellReused(b *testing.B) {
	data, err := os.ReadFile("testdata/shell_traces.json")
	if err != nil {
		b.Fatal(err)
	}
	var cases []traceCommand
	if err := json.Unmarshal(data, &cases); err != nil {
		b.Fatal(err)
	}
	p := newShellParser()
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range cases {
			classifyShellWith(p, c.Cmd)
		}
	}
}
