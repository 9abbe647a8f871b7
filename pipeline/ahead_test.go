package pipeline

import "testing"

// TestSkipsAhead: a session rebuilt at a redelivered fact, while its later
// facts were already in the log (handled before the rebuild, so never
// delivered again), must not be fed a fact after one of those: the worker
// rebuilds it at that fact instead. Facts delivered in order pass.
func TestSkipsAhead(t *testing.T) {
	k := sessionKey{"t", "s"}
	st := &sessionTable[int]{sessions: map[sessionKey]*int{}, ahead: map[sessionKey][]uint64{k: {380, 388, 389}}}
	for _, c := range []struct {
		seq  uint64
		skip bool
	}{
		{376, false}, // a redelivery at or before the rebuild point
		{380, false}, // the next fact the log held: fed in order
		{388, false},
		{403, true}, // 389 was handled before the rebuild: not fed
	} {
		if got := st.skipsAheadLocked(k, c.seq); got != c.skip {
			t.Fatalf("fact %d: skips ahead %v, want %v (ahead %v)", c.seq, got, c.skip, st.ahead[k])
		}
	}
	st.forgetLocked(k)
	if _, ok := st.ahead[k]; ok || st.skipsAheadLocked(k, 500) {
		t.Fatal("a forgotten session keeps its facts ahead")
	}
}
