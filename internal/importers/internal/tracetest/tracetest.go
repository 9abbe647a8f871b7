// Package tracetest holds test helpers shared by the importer tests: finding
// the shared real traces and checking the invariants every imported session
// must satisfy.
package tracetest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
)

// Files returns the files matching pattern under the shared traces directory
// (<repo>/../shared/traces/<sub>), found by walking up from the working
// directory to the module root. It skips the test when the directory does
// not exist.
func Files(t testing.TB, sub, pattern string) []string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("module root not found")
		}
		dir = parent
	}
	traces := filepath.Join(dir, "..", "shared", "traces", sub)
	if st, err := os.Stat(traces); err != nil || !st.IsDir() {
		t.Skipf("no traces at %s", traces)
	}
	files, err := filepath.Glob(filepath.Join(traces, pattern))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	if len(files) == 0 {
		t.Skipf("no %s files in %s", pattern, traces)
	}
	return files
}

// Check asserts the invariants of an imported session: the first event is
// session_started, every event validates, has the session's name and an
// empty tenant, event ids and item ids are unique, and times never go
// backwards.
func Check(t testing.TB, s build.Session) {
	t.Helper()
	if len(s.Events) == 0 {
		t.Fatalf("%s: no events", s.Source)
	}
	if s.Events[0].Type != events.TypeSessionStarted {
		t.Errorf("%s: first event is %s, want session_started", s.Source, s.Events[0].Type)
	}
	ids := map[string]bool{}
	items := map[string]bool{}
	session := s.Events[0].Session
	for i, e := range s.Events {
		if err := e.Validate(); err != nil {
			t.Fatalf("%s: event %d (%s): %v", s.Source, i, e.ID, err)
		}
		if e.Session != session || e.Tenant != "" {
			t.Errorf("%s: event %s: session %q tenant %q, want %q and none", s.Source, e.ID, e.Session, e.Tenant, session)
		}
		if ids[e.ID] {
			t.Errorf("%s: duplicate event id %s", s.Source, e.ID)
		}
		ids[e.ID] = true
		if i > 0 && e.Time.Before(s.Events[i-1].Time) {
			t.Errorf("%s: event %s goes back in time", s.Source, e.ID)
		}
		for _, it := range Items(e) {
			if items[it] {
				t.Errorf("%s: duplicate item %s (event %s)", s.Source, it, e.ID)
			}
			items[it] = true
		}
	}
}

// Items returns the item ids an event introduces.
func Items(e events.Event) []string {
	switch p := e.Data.(type) {
	case *events.Message:
		return []string{p.Item}
	case *events.ToolCall:
		return []string{p.Item}
	case *events.ToolResult:
		return []string{p.Item}
	}
	return nil
}

// Counts tallies the event types of a session.
func Counts(s build.Session) map[events.Type]int {
	m := map[events.Type]int{}
	for _, e := range s.Events {
		m[e.Type]++
	}
	return m
}

// UsageSum adds up the usage of every model_request.
func UsageSum(s build.Session) events.Usage {
	var u events.Usage
	for _, e := range s.Events {
		mr, ok := e.Data.(*events.ModelRequest)
		if !ok || mr.Usage == nil {
			continue
		}
		u.InputTokens += mr.Usage.InputTokens
		u.OutputTokens += mr.Usage.OutputTokens
		u.CacheReadTokens += mr.Usage.CacheReadTokens
		u.CacheWriteTokens += mr.Usage.CacheWriteTokens
		u.CacheWrite1hTokens += mr.Usage.CacheWrite1hTokens
	}
	return u
}

// OfType returns the payloads of type T in s, in order.
func OfType[T events.Payload](s build.Session) []T {
	var out []T
	for _, e := range s.Events {
		if p, ok := e.Data.(T); ok {
			out = append(out, p)
		}
	}
	return out
}

// ImportOne imports in (named name) with importer, requires exactly one
// session, checks it with Check and returns it.
func ImportOne(t testing.TB, importer func(io.Reader, string) ([]build.Session, error), in, name string) build.Session {
	t.Helper()
	ss, err := importer(strings.NewReader(in), name)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 {
		t.Fatalf("%s: %d sessions, want 1", name, len(ss))
	}
	Check(t, ss[0])
	return ss[0]
}

// ImportFile imports the file at path with importer, requires exactly one
// session and returns it (unchecked: callers run Check where they want it).
func ImportFile(t testing.TB, importer func(io.Reader, string) ([]build.Session, error), path string) build.Session {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := importer(bytes.NewReader(data), path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 {
		t.Fatalf("%s: %d sessions, want 1", path, len(ss))
	}
	return ss[0]
}

// EachTrace imports every shared trace matching pattern under sub with
// importer, in a subtest per file, checks the session with Check and hands
// it, with the file's bytes, to fn for format-specific checks.
func EachTrace(t *testing.T, sub, pattern string, importer func(io.Reader, string) ([]build.Session, error), fn func(t *testing.T, path string, data []byte, s build.Session)) {
	t.Helper()
	for _, path := range Files(t, sub, pattern) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			s := ImportFile(t, importer, path)
			Check(t, s)
			fn(t, path, data, s)
		})
	}
}
