package bench

import (
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prunesched/prunesched/internal/bench/replay"
	"github.com/prunesched/prunesched/internal/importers"
)

// traceSession is one session of a shared trace, ready to replay.
type traceSession struct {
	name   string // the trace's file name without its extension
	index  int    // the session's index in its trace
	format string
	seq    *replay.Sequence
}

// imported holds the shared traces' sessions, each trace imported once
// per test binary and only when a test asks for its format: importing
// every trace costs seconds (tens under -race), several tests replay
// them, and under -race they replay Claude Code traces only. Sequences
// are only read (Build, Head), so parallel tests share them.
var imported = struct {
	mu     sync.Mutex
	traces map[string]*importedTrace
}{traces: map[string]*importedTrace{}}

// importedTrace is one trace's sessions, imported once.
type importedTrace struct {
	once     sync.Once
	sessions []traceSession
	err      error
}

// sharedSessions returns the sessions of the shared traces (sharedTraces)
// of the given formats (importers.FormatClaudeCode, ...; every format
// when none is given), in trace then session order. A trace's format is
// its directory's name (FindTraces). Skips the test when there are no
// traces.
func sharedSessions(t *testing.T, formats ...string) []traceSession {
	t.Helper()
	var out []traceSession
	for _, path := range sharedTraces(t) {
		if len(formats) > 0 && !slices.Contains(formats, filepath.Base(filepath.Dir(path))) {
			continue
		}
		imported.mu.Lock()
		tr := imported.traces[path]
		if tr == nil {
			tr = &importedTrace{}
			imported.traces[path] = tr
		}
		imported.mu.Unlock()
		tr.once.Do(func() {
			sessions, err := importers.Import(path, importers.FormatAuto)
			if err != nil {
				tr.err = err
				return
			}
			name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
			for si, s := range sessions {
				tr.sessions = append(tr.sessions, traceSession{name: name, index: si, format: s.Format, seq: replay.FromEvents(s.Events)})
			}
		})
		if tr.err != nil {
			t.Fatal(tr.err)
		}
		out = append(out, tr.sessions...)
	}
	return out
}
