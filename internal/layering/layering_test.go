package layering

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// pkg is one package of the module as its non-test files declare it.
type pkg struct {
	imports []string // module packages imported, relative to the module ("events")
}

// module reads the import lines of every non-test Go file below the module
// root (testdata, hidden and underscore folders skipped, as the go command
// does), keyed by the package's path relative to the module ("" for the
// root).
func module(t *testing.T) map[string]*pkg {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	modPath := modulePath(t, filepath.Join(root, "go.mod"))
	pkgs := map[string]*pkg{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly|parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", p, err)
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		}
		k := pkgs[rel]
		if k == nil {
			k = &pkg{}
			pkgs[rel] = k
		}
		for _, im := range f.Imports {
			path, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: import %s: %w", p, im.Path.Value, err)
			}
			if path != modPath && !strings.HasPrefix(path, modPath+"/") {
				continue
			}
			dep := strings.TrimPrefix(strings.TrimPrefix(path, modPath), "/")
			if !slices.Contains(k.imports, dep) {
				k.imports = append(k.imports, dep)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 || pkgs["eligibility"] == nil || pkgs["internal/importers"] == nil {
		t.Fatalf("read %d packages from %s: the walk missed the module", len(pkgs), root)
	}
	return pkgs
}

func modulePath(t *testing.T, gomod string) string {
	t.Helper()
	f, err := os.Open(gomod)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	t.Fatalf("%s: no module line", gomod)
	return ""
}

// deps returns every module package p reaches through imports, p excluded,
// each with the chain of imports that reaches it first (breadth first).
func deps(pkgs map[string]*pkg, p string) map[string][]string {
	seen := map[string][]string{p: {p}}
	queue := []string{p}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		k := pkgs[cur]
		if k == nil {
			continue
		}
		for _, d := range k.imports {
			if _, ok := seen[d]; !ok {
				seen[d] = append(slices.Clone(seen[cur]), d)
				queue = append(queue, d)
			}
		}
	}
	delete(seen, p)
	return seen
}

// internal reports whether package p is importable only inside the module
// (a path element "internal").
func internal(p string) bool {
	return slices.Contains(strings.Split(p, "/"), "internal")
}

// under reports whether package p is dir or inside it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// formatImporter reports whether p is one trace format's importer
// (importers/claudecode, ...), not the registry or the shared internals.
func formatImporter(p string) bool {
	rest, ok := strings.CutPrefix(p, "internal/importers/")
	return ok && !strings.Contains(rest, "/") && rest != "internal"
}

// prefixed returns prefix+x for every x of xs that bad reports.
func prefixed(prefix string, xs []string, bad func(string) bool) []string {
	var out []string
	for _, x := range xs {
		if bad(x) {
			out = append(out, prefix+x)
		}
	}
	return out
}

// rule is one import rule: check returns the violations of package p.
type rule struct {
	name  string
	check func(p string) []string
}

// public is the module's API on purpose: what a Go user embeds. Every other
// package lives under internal/ (or is a command, or the deploy files' test).
var public = []string{
	"events", "events/store", "events/tokens", "policy", "eligibility",
	"scheduler", "projections", "pipeline", "proxy", "placeholder", "httplimit",
}

// runtime is what runs in production: the public packages and the servers.
// None of it reaches the offline evaluation under internal/eval.
func runtime(p string) bool {
	return slices.Contains(public, p) || under(p, "internal/service") || under(p, "internal/api") ||
		under(p, "internal/inspector") || under(p, "internal/mcpserver") || under(p, "internal/decide")
}

// rules returns the import rules over the module pkgs, one row each.
func rules(pkgs map[string]*pkg) []rule {
	return []rule{
		{
			// Importers turn traces into facts; what a tool does is
			// toolspec's. The eligibility core is no part of importing.
			name: "importers reach no eligibility",
			check: func(p string) []string {
				if !under(p, "internal/importers") {
					return nil
				}
				if chain, ok := deps(pkgs, p)["eligibility"]; ok {
					return []string{"reaches eligibility: " + strings.Join(chain, " -> ")}
				}
				return nil
			},
		},
		{
			// One format's importer shares code with the others only
			// through importers/internal; only the registry (importers)
			// knows them all.
			name: "a format importer imports no other importer",
			check: func(p string) []string {
				if !under(p, "internal/importers") || p == "internal/importers" {
					return nil
				}
				return prefixed("imports ", pkgs[p].imports, func(d string) bool { return formatImporter(d) || d == "internal/importers" })
			},
		},
		{
			// analyze reads traces through the registry, never through one
			// format's importer.
			name: "analyze imports no format importer",
			check: func(p string) []string {
				if p != "internal/eval/analyze" {
					return nil
				}
				return prefixed("imports ", pkgs[p].imports, formatImporter)
			},
		},
		{
			// analyze runs the cores through package decide (the host
			// agreement replays them) and classifies tools with toolspec
			// like everyone else: it imports no eligibility.
			name: "analyze imports no eligibility",
			check: func(p string) []string {
				if p != "internal/eval/analyze" {
					return nil
				}
				return prefixed("imports ", pkgs[p].imports, func(d string) bool { return d == "eligibility" })
			},
		},
		{
			// terms is the one definition of a distinctive term, shared
			// by the eligibility core (the cold rule) and the later-use
			// signal: a leaf that imports nothing of the module.
			name: "terms is a leaf",
			check: func(p string) []string {
				if p != "internal/terms" {
					return nil
				}
				return prefixed("imports ", pkgs[p].imports, func(string) bool { return true })
			},
		},
		{
			// The eligibility core is a pure function of the facts: it
			// reaches none of the offline evaluation (the later-use
			// signal, the comparison, the lab) nor projections.
			name: "eligibility reaches no offline evaluation",
			check: func(p string) []string {
				if p != "eligibility" {
					return nil
				}
				var out []string
				ds := deps(pkgs, p)
				for _, bad := range []string{"internal/eval/lateruse", "internal/eval/compare", "internal/eval/lab", "projections"} {
					if chain, ok := ds[bad]; ok {
						out = append(out, "reaches "+bad+": "+strings.Join(chain, " -> "))
					}
				}
				return out
			},
		},
		{
			// toolspec is the leaf the cores, the importers, projections and
			// analyze share: it imports nothing of the module but events.
			name: "toolspec is a leaf",
			check: func(p string) []string {
				if p != "internal/toolspec" {
					return nil
				}
				return prefixed("imports ", pkgs[p].imports, func(d string) bool { return d != "events" })
			},
		},
		{
			// What a Go user may import is decided, not accidental.
			name: "public API on purpose",
			check: func(p string) []string {
				if p == "" || internal(p) || under(p, "cmd") || p == "deploy" || slices.Contains(public, p) {
					return nil
				}
				return []string{"is public: move it under internal/ or add it to the public list on purpose"}
			},
		},
		{
			// Offline evaluation (analyze, compare, the later-use signal,
			// the lab) sits under internal/eval and the runtime never
			// reaches it; bench and the CLI may.
			name: "the runtime reaches no offline evaluation",
			check: func(p string) []string {
				if !runtime(p) {
					return nil
				}
				var out []string
				for d, chain := range deps(pkgs, p) {
					if under(d, "internal/eval") {
						out = append(out, "reaches "+d+": "+strings.Join(chain, " -> "))
					}
				}
				sort.Strings(out)
				return out
			},
		},
		{
			// The proxy reaches the log and the pipeline only through its
			// Backend interface; the adapter lives with the service.
			name: "the proxy imports no service, store or pipeline",
			check: func(p string) []string {
				if !under(p, "proxy") {
					return nil
				}
				return prefixed("imports ", pkgs[p].imports, func(d string) bool {
					return under(d, "internal/service") || d == "events/store" || d == "pipeline"
				})
			},
		},
	}
}

// TestLayering checks the import rules against the module.
func TestLayering(t *testing.T) {
	pkgs := module(t)
	var names []string
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, r := range rules(pkgs) {
		t.Run(r.name, func(t *testing.T) {
			for _, p := range names {
				for _, v := range r.check(p) {
					t.Errorf("%s %s", p, v)
				}
			}
		})
	}
}

// TestLayeringCatches: every rule sees a violation when one is there (a
// fabricated module that breaks each rule once, so no rule can pass by
// reading nothing).
func TestLayeringCatches(t *testing.T) {
	pkgs := map[string]*pkg{
		"internal/importers/a":              {imports: []string{"internal/importers/internal/build", "internal/importers/b"}},
		"internal/importers/b":              {},
		"internal/importers/internal/build": {imports: []string{"internal/toolspec", "eligibility"}},
		"internal/eval/analyze":             {imports: []string{"internal/importers/b", "eligibility"}},
		"internal/terms":                    {imports: []string{"events"}},
		"internal/toolspec":                 {imports: []string{"events", "policy"}},
		"eligibility":                       {imports: []string{"internal/eval/lateruse"}},
		"internal/eval/lateruse":            {},
		"proxy":                             {imports: []string{"events/store", "pipeline"}},
		"events/store":                      {},
		"pipeline":                          {},
		"toolbox":                           {},
	}
	if chain, ok := deps(pkgs, "internal/importers/a")["eligibility"]; !ok || strings.Join(chain, " ") != "internal/importers/a internal/importers/internal/build eligibility" {
		t.Errorf("transitive eligibility: %v %v", chain, ok)
	}
	if !formatImporter("internal/importers/b") || formatImporter("internal/importers/internal") || formatImporter("internal/importers/internal/build") || formatImporter("internal/importers") {
		t.Error("formatImporter misnames packages")
	}
	var names []string
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, r := range rules(pkgs) {
		n := 0
		for _, p := range names {
			n += len(r.check(p))
		}
		if n == 0 {
			t.Errorf("rule %q sees no violation in a module that breaks it", r.name)
		}
	}
}
