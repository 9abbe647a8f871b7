package proxy

import (
	"testing"

	"github.com/prunesched/prunesched/internal/testutil"
)

// TestRecordLeftPending: deciding in memory with the session lock free,
// record leaves the record pending on the session and returns with the
// lock free, so the handler returns at once. Whoever takes the lock next
// runs it first, exactly once: the session's next request (here before
// the record's goroutine is let go) or the record's own goroutine. Off
// memory, the record runs in the background and the lock is its own.
func TestRecordLeftPending(t *testing.T) {
	t.Parallel()
	b := setup(t, testPolicy(t), okUpstream(&fakeUpstream{}), nil)
	var held []func()
	b.px.recordGo = func(f func()) { held = append(held, f) }
	answer := func() *capture {
		c := newCapture(APIAnthropic, false)
		c.write([]byte(`{"id":"msg_pending","model":"m","content":[]}`))
		return c
	}
	for _, first := range []string{"next request", "goroutine", "off memory"} {
		st := &sessState{known: map[string]struct{}{}, counts: map[string]int{}}
		if first != "off memory" {
			st.mem = &memState{}
		}
		pl := &plan{api: APIAnthropic, session: "record-pending", st: st}
		c := answer()
		held = nil
		b.px.record(pl, c, nil)
		if first == "off memory" {
			testutil.True(t, len(held) == 0, "off memory, a pending record's goroutine was started")
			// The background record lets go of the lock when done:
			// taking it is the wait.
			st.lock()
			testutil.True(t, c.id == "msg_pending", "off memory, the record had not run when it let go of the lock")
			st.mu.Unlock()
			continue
		}
		testutil.True(t, len(held) == 1, "%s: no goroutine for the pending record", first)
		testutil.True(t, st.mu.TryLock(), "%s: record returned holding the session lock", first)
		testutil.True(t, st.pending != nil && c.id == "", "%s: the record was not left pending", first)
		st.mu.Unlock()
		if first == "goroutine" {
			held[0]()
			testutil.True(t, st.mu.TryLock(), "the record's goroutine kept the lock")
			testutil.True(t, st.pending == nil && c.id == "msg_pending", "the record's goroutine did not run it")
			st.mu.Unlock()
			continue
		}
		st.lock()
		testutil.True(t, st.pending == nil && c.id == "msg_pending", "the next holder of the lock found the record not run")
		c.id = ""
		st.mu.Unlock()
		// The goroutine, let go now, finds it run and does not run it
		// again (nor wait for the lock).
		st.mu.Lock()
		held[0]()
		testutil.True(t, c.id == "", "the record ran twice")
		st.mu.Unlock()
	}
}
