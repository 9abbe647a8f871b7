package store

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/testutil"
)

// countedBatch is a batch in input form with more text to count than
// parallelCountBytes: messages, tool calls and outputs (some repeated).
func countedBatch(session string) []events.Event {
	var evs []events.Event
	for i := range 12 {
		text := strings.Repeat(fmt.Sprintf("Step %d: read the loader, then check why Load fails on an empty file. ", i), 10+i)
		evs = append(evs, msgEvent("", session, fmt.Sprintf("m%d", i), text))
		call := fmt.Sprintf("c%d", i)
		evs = append(evs, callEvent("", session, "call-"+call, call))
		var out strings.Builder
		for l := range 30 + 5*(i%3) {
			fmt.Fprintf(&out, "line %d of file f%d.go: code the agent reads\n", l, i%3)
		}
		evs = append(evs, resultEvent("", session, "res-"+call, call, out.String()))
	}
	return evs
}

// atLeastProcs raises GOMAXPROCS to n for the test, so the parallel path
// runs on small machines too.
func atLeastProcs(t *testing.T, n int) {
	prev := runtime.GOMAXPROCS(max(n, runtime.GOMAXPROCS(0)))
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// TestAppendPreparesBatchInParallel: a batch with much text to count is
// prepared concurrently, yet stored exactly as events.Prepare one by one
// stores it, in the batch's order, with the counts of the real tokenizer.
func TestAppendPreparesBatchInParallel(t *testing.T) {
	atLeastProcs(t, 4)
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), suiteConfig())
	sess := uniqueSession("parallel")
	in := countedBatch(sess)
	if n := countBytes(in); n < parallelCountBytes {
		t.Fatalf("batch has %d bytes to count, want at least %d", n, parallelCountBytes)
	}
	stored, err := s.Append(ctx, in)
	testutil.NoError(t, err)

	// The same events prepared one by one, with a fresh counter.
	tc := tokens.New()
	read, err := s.ReadSession(ctx, "", sess)
	testutil.NoError(t, err)
	testutil.Equal(t, len(stored), len(in))
	testutil.Equal(t, len(read), len(in))
	for i, e := range in {
		want, err := events.Prepare(ctx, e, s, tc)
		testutil.NoError(t, err)
		wantB, err := events.Encode(want)
		testutil.NoError(t, err)
		for _, got := range []events.Event{stored[i], read[i]} {
			gotB, err := events.Encode(got)
			testutil.NoError(t, err)
			testutil.True(t, bytes.Equal(gotB, wantB), "event %d: stored\n%s\nwant\n%s", i, gotB, wantB)
		}
		testutil.True(t, read[i].Seq == stored[i].Seq, "event %d: read at seq %d, appended at %d", i, read[i].Seq, stored[i].Seq)
	}
}

// TestAppendParallelPrepareFailsFirst: when several events of a batch
// prepared in parallel fail, the error names the first of them, as the
// sequential path does, and nothing of the batch is published.
func TestAppendParallelPrepareFailsFirst(t *testing.T) {
	atLeastProcs(t, 4)
	ctx := testCtx(t)
	emb, err := StartEmbedded(ctx, EmbeddedConfig{DataDir: t.TempDir(), MaxPayload: 64 << 10}, testLogger(t))
	testutil.NoError(t, err)
	t.Cleanup(emb.Shutdown)
	s := openStore(t, connectAdmin(t, emb), suiteConfig())
	sess := uniqueSession("parallel-fail")
	in := countedBatch(sess)
	big := strings.Repeat("x", 70<<10) // inline text over the payload limit
	in[7] = msgEvent("", sess, "big7", big)
	in[30] = msgEvent("", sess, "big30", big)
	_, err = s.Append(ctx, in)
	testutil.Error(t, err, ErrTooLarge)
	var ee *EventError
	testutil.True(t, errors.As(err, &ee), "error %v is not an *EventError", err)
	testutil.Equal(t, ee.Index, 7)
	testutil.Equal(t, ee.ID, "big7")
	read, err := s.ReadSession(ctx, "", sess)
	testutil.NoError(t, err)
	testutil.Equal(t, len(read), 0)
}
