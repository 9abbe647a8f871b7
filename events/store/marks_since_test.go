package store

import (
	"fmt"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

// TestMarksSince: a session's marks after any sequence, in order, whether
// read with single gets (few) or with a consumer (the rest), with other
// sessions' marks and the session's own facts interleaved on the stream.
func TestMarksSince(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), suiteConfig())
	sess, other := uniqueSession("marks"), uniqueSession("other")
	var marks []events.Event
	for i := range 2*marksByGet + 3 {
		batch := []events.Event{
			msgEvent("", sess, fmt.Sprintf("f%d", i), "text"),
			markEvent("", sess, fmt.Sprintf("k%d", i), fmt.Sprintf("m-f%d", i), fmt.Sprintf("f%d", i)),
			markEvent("", other, fmt.Sprintf("o%d", i), "x", "y"),
		}
		stored, err := s.Append(ctx, batch)
		testutil.NoError(t, err)
		marks = append(marks, stored[1])
	}
	got, err := s.MarksSince(ctx, "", "never-marked", 0)
	testutil.NoError(t, err)
	testutil.Equal(t, len(got), 0)
	for i := range len(marks) + 1 {
		after := uint64(0)
		if i > 0 {
			after = marks[i-1].Seq
		}
		for _, from := range []uint64{after, after + 1} { // at a mark and between
			if i == 0 && from > 0 {
				continue
			}
			got, err := s.MarksSince(ctx, "", sess, from)
			testutil.NoError(t, err)
			var want []events.Event
			for _, m := range marks {
				if m.Seq > from {
					want = append(want, m)
				}
			}
			testutil.Equal(t, ids(got), ids(want))
			for j := range got {
				testutil.Equal(t, got[j].Seq, want[j].Seq)
				testutil.True(t, got[j].Type == events.TypeMark, "%s is a %s", got[j].ID, got[j].Type)
			}
		}
	}
	_, err = s.MarksSince(ctx, "", "bad.session", 0)
	testutil.Error(t, err)
}
