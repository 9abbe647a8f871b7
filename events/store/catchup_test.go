package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

// TestFactsAndApplicationsAfter: a session's facts and applications (no
// marks, no other session's events) after any sequence, in log order,
// whether read with single gets (few) or with a consumer (the rest); and
// ReadSessionAfter the same with the marks, and ReadSessionLeader the
// whole session. Passing the session's last fact sequence (as a proxy
// that just read it does) reads the same.
func TestFactsAndApplicationsAfter(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), suiteConfig())
	sess, other := uniqueSession("catch"), uniqueSession("other")
	var all, want []events.Event
	for i := range catchUpByGet + 5 {
		batch := []events.Event{
			msgEvent("", sess, fmt.Sprintf("f%d", i), "text"),
			markEvent("", sess, fmt.Sprintf("k%d", i), fmt.Sprintf("m-f%d", i), fmt.Sprintf("f%d", i)),
			msgEvent("", other, fmt.Sprintf("o%d", i), "text"),
		}
		if i%3 == 0 {
			batch = append(batch, applyEvent("", sess, fmt.Sprintf("a%d", i), fmt.Sprintf("k%d", i), fmt.Sprintf("m-f%d", i)))
		}
		stored, err := s.Append(ctx, batch)
		testutil.NoError(t, err)
		for _, e := range stored {
			if e.Session == sess {
				all = append(all, e)
				if e.Type != events.TypeMark {
					want = append(want, e)
				}
			}
		}
	}
	after := func(evs []events.Event, seq uint64) []string {
		var out []string
		for _, e := range evs {
			if e.Seq > seq {
				out = append(out, fmt.Sprintf("%s@%d", e.ID, e.Seq))
			}
		}
		return out
	}
	got := func(evs []events.Event) []string { return after(evs, 0) }
	lastFact, err := s.LastSeq(ctx, "", sess, events.KindFact)
	testutil.NoError(t, err)
	for _, e := range append([]events.Event{{}}, all...) {
		fa, err := s.FactsAndApplicationsAfter(ctx, "", sess, e.Seq, 0)
		testutil.NoError(t, err)
		testutil.Equal(t, fmt.Sprint(got(fa)), fmt.Sprint(after(want, e.Seq)))
		known, err := s.FactsAndApplicationsAfter(ctx, "", sess, e.Seq, lastFact)
		testutil.NoError(t, err)
		testutil.Equal(t, fmt.Sprint(got(known)), fmt.Sprint(got(fa)))
		rs, err := s.ReadSessionAfter(ctx, "", sess, e.Seq)
		testutil.NoError(t, err)
		testutil.Equal(t, fmt.Sprint(got(rs)), fmt.Sprint(after(all, e.Seq)))
	}
	whole, err := s.ReadSessionLeader(ctx, "", sess)
	testutil.NoError(t, err)
	testutil.Equal(t, fmt.Sprint(got(whole)), fmt.Sprint(got(all)))
	none, err := s.ReadSessionLeader(ctx, "", uniqueSession("none"))
	testutil.NoError(t, err)
	testutil.True(t, none != nil && len(none) == 0, "a session with no events: %v", none)
}

// missingStream is the event stream whose gets at the sequences in miss
// find nothing, as a server behind the one that gave the read's bound
// answers.
type missingStream struct {
	jetstream.Stream
	miss map[uint64]bool
}

func (m missingStream) GetMsg(ctx context.Context, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	if m.miss[seq] {
		return nil, jetstream.ErrMsgNotFound
	}
	return m.Stream.GetMsg(ctx, seq, opts...)
}

// TestReadAfterMissedGet: a get that finds nothing at a sequence inside
// the range being read is not the end of the session: the rest is read
// (from the leader's bound), whether the miss comes at the first get or
// later, and a read bounded past the session's last event (its last
// removed since the bound was read) still ends at that event.
func TestReadAfterMissedGet(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), suiteConfig())
	sess, other := uniqueSession("miss"), uniqueSession("other")
	var mine []events.Event
	for i := range 6 {
		stored, err := s.Append(ctx, []events.Event{
			msgEvent("", sess, fmt.Sprintf("f%d", i), "text"),
			msgEvent("", other, fmt.Sprintf("o%d", i), "text"),
		})
		testutil.NoError(t, err)
		mine = append(mine, stored[0])
	}
	ids := func(evs []events.Event) string {
		var out []string
		for _, e := range evs {
			out = append(out, fmt.Sprintf("%s@%d", e.ID, e.Seq))
		}
		return fmt.Sprint(out)
	}
	want := ids(mine[1:])
	stream := s.stream
	for _, at := range []int{1, 3, 5} {
		// The get after the event before finds nothing.
		asked := mine[at-1].Seq + 1
		s.stream = missingStream{Stream: stream, miss: map[uint64]bool{asked: true}}
		got, err := s.ReadSessionAfter(ctx, "", sess, mine[0].Seq)
		testutil.NoError(t, err)
		testutil.True(t, ids(got) == want, "get from %d missed: read %s, want %s", asked, ids(got), want)
	}
	s.stream = stream

	// Bounded past the session's last event: the other session's last.
	otherLast, err := s.LastSeq(ctx, "", other, "")
	testutil.NoError(t, err)
	subj, err := s.sessionSubject("", sess, "")
	testutil.NoError(t, err)
	got, err := s.readAfter(ctx, subj, mine[0].Seq, otherLast, catchUpByGet)
	testutil.NoError(t, err)
	testutil.Equal(t, ids(got), want)
}
