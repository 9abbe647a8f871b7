package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

// TestTailFactsAndApplications: the tail delivers the facts and
// applications stored after it started, in log order, no marks, the
// events of wanted sessions decoded and the others as positions only; it
// ends with its context.
func TestTailFactsAndApplications(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), suiteConfig())
	sess, other := uniqueSession("tail"), uniqueSession("other")
	_, err := s.Append(ctx, []events.Event{msgEvent("", sess, "before", "stored before the tail")})
	testutil.NoError(t, err)

	type got struct {
		seq     uint64
		session string
		id      string
	}
	tctx, cancel := context.WithCancel(ctx)
	started, out, done := make(chan struct{}), make(chan got, 16), make(chan error, 1)
	go func() {
		done <- s.TailFactsAndApplications(tctx, func() { close(started) },
			func(_, session string) bool { return session == sess },
			func(seq uint64, _, session string, e *events.Event) {
				g := got{seq: seq, session: session}
				if e != nil {
					g.id = e.ID
				}
				out <- g
			})
	}()
	<-started
	stored, err := s.Append(ctx, []events.Event{
		msgEvent("", sess, "f1", "one"),
		markEvent("", sess, "k1", "m-f1", "f1"),
		msgEvent("", other, "o1", "elsewhere"),
		applyEvent("", sess, "a1", "k1", "m-f1"),
	})
	testutil.NoError(t, err)
	var lines []string
	for range 3 {
		g := <-out
		lines = append(lines, fmt.Sprintf("%d %s %s", g.seq, g.session, g.id))
	}
	want := []string{
		fmt.Sprintf("%d %s f1", stored[0].Seq, sess),
		fmt.Sprintf("%d  ", stored[2].Seq),
		fmt.Sprintf("%d %s a1", stored[3].Seq, sess),
	}
	testutil.Equal(t, fmt.Sprint(lines), fmt.Sprint(want))
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("tail ended with %v, want context.Canceled", err)
	}
}
