package eligibility

import (
	"reflect"
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
		{"cat <<EOF > a.py\nprint(1)\nEOF", X, "", "", nil, true},
		{"echo $(date)", X, "", "", nil, true},
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
			got := classifyShell(tc.cmd)
			if got.class != tc.class {
				t.Errorf("class %q, want %q", got.class, tc.class)
			}
			if got.readPath != tc.readPath {
				t.Errorf("readPath %q, want %q", got.readPath, tc.readPath)
			}
			if tc.readPath != "" && got.rng.String() != tc.rng {
				t.Errorf("range %q, want %q", got.rng, tc.rng)
			}
			if !reflect.DeepEqual(got.writes, tc.writes) {
				t.Errorf("writes %q, want %q", got.writes, tc.writes)
			}
			if got.unscoped != tc.unscoped {
				t.Errorf("unscoped %v, want %v", got.unscoped, tc.unscoped)
			}
		})
	}
}
