package toolspec

import (
	"encoding/json"
	"os"
	"reflect"
	"strconv"
	"testing"

	"github.com/prunesched/prunesched/events"
)

// Determinism classes in the shell tables.
const (
	shP = events.DeterminismPure
	shV = events.DeterminismVersioned
	shS = events.DeterminismState
	shX = events.DeterminismSideEffect
)

// shellCase is one row of a shell classification table: the command and
// its expected class, read path and range, writes, scope and program
// (anyProgram: not checked).
type shellCase struct {
	cmd      string
	class    events.Determinism
	readPath string
	rng      string
	writes   []string
	unscoped bool
	program  string
}

// anyProgram in a shellCase leaves the program unchecked.
const anyProgram = "\x00any"

func TestClassifyShell(t *testing.T) {
	runShellCases(t, []shellCase{
		{"cat src/a.go", shV, "src/a.go", "1-EOF", nil, false, anyProgram},
		{"cat -n src/a.go", shV, "src/a.go", "1-EOF", nil, false, anyProgram},
		{"nl -ba a.py", shV, "a.py", "1-EOF", nil, false, anyProgram},
		{"sed -n '10,40p' config.go", shV, "config.go", "10-40", nil, false, anyProgram},
		{"sed -n 5p x.go", shV, "x.go", "5-5", nil, false, anyProgram},
		{"head -n 20 README.md", shV, "README.md", "1-20", nil, false, anyProgram},
		{"head -20 README.md", shV, "README.md", "1-20", nil, false, anyProgram},
		{"tail -n 5 log.txt", shV, "log.txt", "last 5", nil, false, anyProgram},
		{"cd /repo && cat a.go", shV, "/repo/a.go", "1-EOF", nil, false, anyProgram},
		{"cat a.go b.go", shV, "", "", nil, false, anyProgram},
		{"cat a.go | head -5", shV, "", "", nil, false, anyProgram},
		{"wc -l a.go", shV, "", "", nil, false, anyProgram},
		{"rg foo src", shS, "", "", nil, false, anyProgram},
		{"grep -rn foo .", shS, "", "", nil, false, anyProgram},
		{"find . -name '*.go'", shS, "", "", nil, false, anyProgram},
		{"ls -la", shS, "", "", nil, false, anyProgram},
		{"git status", shS, "", "", nil, false, anyProgram},
		{"git --no-pager diff HEAD~1", shS, "", "", nil, false, anyProgram},
		{"git log --oneline -5", shS, "", "", nil, false, anyProgram},
		{"pytest -x tests/", shS, "", "", nil, false, anyProgram},
		{"python -m pytest tests", shS, "", "", nil, false, anyProgram},
		{"go test ./...", shS, "", "", nil, false, anyProgram},
		{"npm test", shS, "", "", nil, false, anyProgram},
		{"npm run test:unit", shS, "", "", nil, false, anyProgram},
		{"make", shS, "", "", nil, false, anyProgram},
		{"cargo test", shS, "", "", nil, false, anyProgram},
		{"cd repo && go test ./... 2>&1 | tail -20", shS, "", "", nil, false, anyProgram},
		{"echo hello", shP, "", "", nil, false, anyProgram},
		{"ls > files.txt", shX, "", "", []string{"files.txt"}, false, anyProgram},
		{"pytest > /dev/null 2>&1", shS, "", "", nil, false, anyProgram},
		{"sed -i 's/a/b/' src/a.go", shX, "", "", []string{"src/a.go"}, false, anyProgram},
		{"sed -i.bak 's/a/b/' a.go", shX, "", "", []string{"a.go"}, false, anyProgram},
		{"rm -rf build", shX, "", "", []string{"build"}, false, anyProgram},
		{"mv a.go b.go", shX, "", "", []string{"a.go", "b.go"}, false, anyProgram},
		{"rm *.pyc", shX, "", "", nil, true, anyProgram},
		{"git commit -m 'x'", shX, "", "", nil, false, anyProgram},
		{"git checkout main", shX, "", "", nil, true, anyProgram},
		{"pip install requests", shX, "", "", nil, true, anyProgram},
		{"python fix.py", shX, "", "", nil, true, anyProgram},
		// The lexer gave up on here-documents and substitutions (unscoped
		// side effects); the parser sees a write of a.py and a clock read.
		{"cat <<EOF > a.py\nprint(1)\nEOF", shX, "", "", []string{"a.py"}, false, anyProgram},
		{"echo $(date)", shS, "", "", nil, false, anyProgram},
		{"echo 'unbalanced", shX, "", "", nil, true, anyProgram},
		{"find . -name x -delete", shX, "", "", nil, true, anyProgram},
		{"find . | xargs rm", shX, "", "", nil, true, anyProgram},
		{"cat a.go && rm a.go", shX, "", "", []string{"a.go"}, false, anyProgram},
		{"ls; touch new.txt", shX, "", "", []string{"new.txt"}, false, anyProgram},
		{"cat a.go | tee copy.go", shX, "", "", []string{"copy.go"}, false, anyProgram},
		{"FOO=1 go test ./pkg", shS, "", "", nil, false, anyProgram},
		{"timeout 60 pytest", shS, "", "", nil, false, anyProgram},
		{"frobnicate --all", shX, "", "", nil, true, anyProgram},
	})
}

// runShellCases classifies each case's command and compares.
func runShellCases(t *testing.T, cases []shellCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.cmd, func(t *testing.T) {
			got := ClassifyShell(tc.cmd)
			checkShell(t, got, tc.class, tc.readPath, tc.rng, tc.writes, tc.unscoped)
			if tc.program != anyProgram && got.Program != tc.program {
				t.Errorf("program %q, want %q", got.Program, tc.program)
			}
		})
	}
}

// checkShell compares a classification with what a table expects.
func checkShell(t *testing.T, got Shell, class events.Determinism, readPath, rng string, writes []string, unscoped bool) {
	t.Helper()
	if got.Class != class {
		t.Errorf("class %q, want %q", got.Class, class)
	}
	if got.ReadPath != readPath {
		t.Errorf("readPath %q, want %q", got.ReadPath, readPath)
	}
	if readPath != "" && got.Range.String() != rng {
		t.Errorf("range %q, want %q", got.Range, rng)
	}
	if !reflect.DeepEqual(got.Writes, writes) {
		t.Errorf("writes %q, want %q", got.Writes, writes)
	}
	if got.Unscoped != unscoped {
		t.Errorf("unscoped %v, want %v", got.Unscoped, unscoped)
	}
}

// TestClassifyShellParser covers what the bash parser sees and the old
// lexer did not: scoping of cd, substitutions, descriptor redirections,
// keywords, here-strings.
func TestClassifyShellParser(t *testing.T) {
	runShellCases(t, []shellCase{
		{"(cd sub && make); cat a.go", shS, "", "", nil, false, "make"},
		{"(cd sub && touch x) && touch y", shX, "", "", []string{"sub/x", "y"}, false, "touch"},
		{"cd /repo && (cat a.go)", shV, "/repo/a.go", "1-EOF", nil, false, "cat"},
		{"cd /repo; cd src && sed -n '1,5p' m.go", shV, "/repo/src/m.go", "1-5", nil, false, "sed"},
		{"cd $DIR && cat a.go", shV, "", "", nil, false, "cat"},
		{"cd $DIR && touch a.go", shX, "", "", nil, true, "touch"},
		{"if true; then cd x; fi; touch a", shX, "", "", nil, true, "true"},
		{"cat a.go | (cd /tmp && cat > b.go)", shX, "", "", []string{"/tmp/b.go"}, false, "cat"},
		{"cat 'my file.go'", shV, "my file.go", "1-EOF", nil, false, "cat"},
		{`cat "src/a b.go"`, shV, "src/a b.go", "1-EOF", nil, false, "cat"},
		{`cat src/a\ b.go`, shV, "src/a b.go", "1-EOF", nil, false, "cat"},
		{"cat \"$F\"", shV, "", "", nil, false, "cat"},
		{"echo hi >& out.txt", shX, "", "", []string{"out.txt"}, false, "echo"},
		{"echo hi >&2", shP, "", "", nil, false, "echo"},
		{"go test ./... &> /dev/null", shS, "", "", nil, false, "go"},
		{"go test ./... &> log.txt", shX, "", "", []string{"log.txt"}, false, "go"},
		{"ls 2> err.txt", shX, "", "", []string{"err.txt"}, false, "ls"},
		{"{ ls; pwd; } > out", shX, "", "", []string{"out"}, false, "ls"},
		{"grep -c x <<< \"$VAR\"", shS, "", "", nil, false, "grep"},
		{"python - <<'EOF'\nprint(1)\nEOF", shX, "", "", nil, true, "python"},
		{"cat <<'EOF'\n$(rm -rf /)\nEOF", shP, "", "", nil, false, "cat"},
		{"cat <<EOF\n$(rm -rf x)\nEOF", shX, "", "", []string{"x"}, false, "cat"},
		{"git commit -m \"$(cat <<'EOF'\nmsg\nEOF\n)\"", shX, "", "", nil, false, "git"},
		{"echo `rm -f a`", shX, "", "", []string{"a"}, false, "echo"},
		{"diff <(git show HEAD:a.go) a.go", shS, "", "", nil, false, "diff"},
		{"$(which python) fix.py", shX, "", "", nil, true, "$(...)"},
		{"[[ -f go.mod ]] && go test ./...", shS, "", "", nil, false, "test"},
		{"export GOFLAGS=-mod=mod && go vet ./...", shS, "", "", nil, false, "export"},
		{"X=$(date) && echo $X", shS, "", "", nil, false, "echo"},
		{"for f in *.go; do gofmt -l $f; done", shV, "", "", nil, false, "gofmt"},
		{"while read l; do rm \"$l\"; done < list.txt", shX, "", "", nil, true, "read"},
		{"f() { rm -rf build; }; f", shX, "", "", []string{"build"}, true, "rm"},
		{"sudo -E go test ./...", shX, "", "", nil, true, "-E"},
		{"ls # > not-a-write", shS, "", "", nil, false, "ls"},
		{"cat a.go\n\n", shV, "a.go", "1-EOF", nil, false, "cat"},
		{"cd /repo", shP, "", "", nil, false, "cd"},
		{"", shP, "", "", nil, false, "cd"},
		{"cat a.go |", shX, "", "", nil, true, ""},
		{"cat <<EOF\nunterminated", shX, "", "", nil, true, ""},
		{"echo $((1+2))", shP, "", "", nil, false, "echo"},
		{"cd /r && cd sub && cat a.go", shV, "/r/sub/a.go", "1-EOF", nil, false, "cat"},
		{"make && cd /r; cat a.go", shS, "", "", nil, false, "make"},
		{"make && cd /r; touch a.go", shX, "", "", nil, true, "make"},
		{"cd /r || exit 1; touch a.go", shX, "", "", []string{"/r/a.go"}, false, "exit"},
		{"cd /r & touch a.go", shX, "", "", []string{"a.go"}, false, "touch"},
	})
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
			got := ClassifyShell(tc.Cmd)
			if string(got.Class) != tc.Class || got.Kind.Name() != tc.Kind {
				t.Errorf("%s: class %s/%s, want %s/%s", tc.Trace, got.Class, got.Kind.Name(), tc.Class, tc.Kind)
			}
			if got.ReadPath != tc.Read || tc.Read != "" && got.Range.String() != tc.Range {
				t.Errorf("%s: read %q %q, want %q %q", tc.Trace, got.ReadPath, got.Range, tc.Read, tc.Range)
			}
			if !reflect.DeepEqual(got.Writes, tc.Writes) || got.Unscoped != tc.Unscoped {
				t.Errorf("%s: writes %q unscoped %v, want %q %v", tc.Trace, got.Writes, got.Unscoped, tc.Writes, tc.Unscoped)
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
	var fuzzParser ShellClassifier
	f.Fuzz(func(t *testing.T, line string) {
		a := ClassifyShell(line)
		b := fuzzParser.Classify(line)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%q: not deterministic: %+v vs %+v", line, a, b)
		}
		if a.Class != events.DeterminismPure && danger(a.Class) == 0 {
			t.Fatalf("%q: class %q", line, a.Class)
		}
		if a.ReadPath != "" && a.Class != events.DeterminismVersioned {
			t.Fatalf("%q: read path %q on a %s command", line, a.ReadPath, a.Class)
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
			ClassifyShell(c.Cmd)
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
	var p ShellClassifier
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range cases {
			p.Classify(c.Cmd)
		}
	}
}
