package bench

import (
	"path/filepath"
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

// imported holds the shared traces' sessions, imported once per test
// binary: importing every trace costs seconds (tens under -race) and
// several tests replay them. Sequences are only read (Build, Head), so
// parallel tests share them.
var imported struct {
	once     sync.Once
	sessions []traceSession
	err      error
}

// sharedSessions returns the sessions of the shared traces (sharedTraces),
// in trace then session order. Skips the test when there are no traces.
func sharedSessions(t *testing.T) []traceSession {
	t.Helper()
	paths := sharedTraces(t)
	imported.once.Do(func() {
		for _, path := range paths {
			sessions, err := importers.Import(path, importers.FormatAuto)
			if err != nil {
				imported.err = err
				return
			}
			name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
			for si, s := range sessions {
				imported.sessions = append(imported.sessions, traceSession{name: name, index: si, format: s.Format, seq: replay.FromEvents(s.Events)})
			}
		}
	})
	if imported.err != nil {
		t.Fatal(imported.err)
	}
	return imported.sessions
}
