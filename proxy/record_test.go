package proxy

import (
	"testing"

	"github.com/prunesched/prunesched/internal/testutil"
)

// TestRecordRunsOnHandler: deciding in memory with the session lock free,
// record takes the lock and hands its work back (after), for the handler
// to run once the response is written: the lock is held from record's
// return until after has run, so the session's next request waits for the
// record, which no other goroutine has to be scheduled for. Off memory,
// the record runs in the background and record returns nothing to run.
func TestRecordRunsOnHandler(t *testing.T) {
	t.Parallel()
	b := setup(t, testPolicy(t), okUpstream(&fakeUpstream{}), nil)
	for _, inMem := range []bool{true, false} {
		st := &sessState{known: map[string]struct{}{}, counts: map[string]int{}}
		if inMem {
			st.mem = &memState{}
		}
		pl := &plan{api: APIAnthropic, session: "record-on-handler", st: st}
		after := b.px.record(pl, newCapture(APIAnthropic, false))
		if !inMem {
			testutil.True(t, after == nil, "off memory, record left work to the handler")
			// The background record lets go of the lock when done:
			// taking it is the wait.
			st.mu.Lock()
			//lint:ignore SA2001 the critical section is the wait itself
			st.mu.Unlock()
			continue
		}
		testutil.True(t, after != nil, "in memory, the record did not come back to the handler")
		testutil.True(t, !st.mu.TryLock(), "the session lock was free before the record ran")
		after()
		testutil.True(t, st.mu.TryLock(), "the session lock was still held after the record ran")
		st.mu.Unlock()
	}
}
