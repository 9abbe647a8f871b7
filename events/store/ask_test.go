package store

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/jsask/jsasktest"
	"github.com/prunesched/prunesched/internal/testutil"
)

// relayedStore opens a store on e whose JetStream requests go through a
// relay (which swallows nothing until armed), and which asks again every
// few milliseconds.
func relayedStore(t *testing.T, e *Embedded) (*Store, *jsasktest.Relay) {
	t.Helper()
	ctx := testCtx(t)
	r := jsasktest.Start(t, connectAdmin(t, e))
	nc := connectAdmin(t, e)
	s := openStore(t, nc, Config{Tokens: lenCounter{}, RequestAgain: 20 * time.Millisecond})
	s.js = r.JetStream(t, nc)
	var err error
	s.stream, err = s.js.Stream(ctx, events.StreamName)
	testutil.NoError(t, err)
	return s, r
}

// stateOf stores a session on e and creates a durable named durable
// over the stream, nothing acknowledged: state for the waits to ask.
func stateOf(t testing.TB, ctx context.Context, e *Embedded, durable string) (string, []events.Event, jetstream.Consumer) {
	t.Helper()
	s := openStore(t, connectAdmin(t, e), Config{Tokens: lenCounter{}})
	session := uniqueSession(durable)
	stored, err := s.Append(ctx, sessionEvents("", session))
	testutil.NoError(t, err)
	cons, err := s.js.CreateOrUpdateConsumer(ctx, events.StreamName, jetstream.ConsumerConfig{
		Durable: durable, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: events.SubjectPrefix + ".>",
	})
	testutil.NoError(t, err)
	return session, stored, cons
}

// The waits' state requests (a consumer's progress, the stream's last
// sequence, a session's last event) outlive a request that gets no
// answer: each is sent again and the later answer is taken, where a
// single request used to wait until the caller's deadline. The context
// is long; the test checks the answers, not how fast they come.
func TestStateRequestsAskAgain(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, "", false)
	ctx := testCtx(t)
	session, stored, cons := stateOf(t, ctx, e, "asked")
	last := stored[len(stored)-1].Seq
	// The durable acknowledges the first two facts.
	batch, err := cons.Fetch(2)
	testutil.NoError(t, err)
	for m := range batch.Messages() {
		testutil.NoError(t, m.DoubleAck(ctx))
	}
	testutil.NoError(t, batch.Error())

	cases := []struct {
		name string
		api  string // the API subject prefix of the request swallowed once
		ask  func(ctx context.Context, s *Store) (uint64, error)
		want uint64
	}{
		{"AckFloor", "CONSUMER.INFO.", func(ctx context.Context, s *Store) (uint64, error) { return s.AckFloor(ctx, "asked") }, stored[1].Seq},
		{"ConsumerLag", "CONSUMER.INFO.", func(ctx context.Context, s *Store) (uint64, error) { return s.ConsumerLag(ctx, "asked") }, uint64(len(stored) - 2)},
		{"ProcessedThrough", "CONSUMER.INFO.", func(ctx context.Context, s *Store) (uint64, error) {
			ok, err := s.ProcessedThrough(ctx, "asked", stored[1].Seq)
			if ok {
				return 1, err
			}
			return 0, err
		}, 1},
		{"StreamLastSeq", "STREAM.INFO.", func(ctx context.Context, s *Store) (uint64, error) { return s.StreamLastSeq(ctx) }, last},
		{"LastSeq", "STREAM.MSG.GET.", func(ctx context.Context, s *Store) (uint64, error) { return s.LastSeq(ctx, "", session, "") }, last},
		{"LastSeqLeader", "STREAM.MSG.GET.", func(ctx context.Context, s *Store) (uint64, error) { return s.LastSeqLeader(ctx, "", session, "") }, last},
		{"FirstSeq", "STREAM.MSG.GET.", func(ctx context.Context, s *Store) (uint64, error) { return s.FirstSeq(ctx, "", session, "") }, stored[0].Seq},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, r := relayedStore(t, e)
			r.Arm(jsasktest.FirstOf(c.api))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			got, err := c.ask(ctx, s)
			testutil.NoError(t, err)
			testutil.Equal(t, got, c.want)
			asked := r.Count(c.api)
			testutil.True(t, asked >= 2, "%d requests on %s, want the swallowed one and another", asked, c.api)
		})
	}
}

// The error of a wait on a durable that never answers names the durable
// and says the requests went unanswered; an answer "no such consumer" is
// the answer (ErrNotFound), never asked again until the deadline.
func TestStateRequestErrors(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, "", false)
	s, r := relayedStore(t, e)
	mute := "CONSUMER.INFO." + events.StreamName + ".mute"
	thrice := make(chan struct{})
	r.Arm(func(api string, n int) bool {
		if api != mute {
			return false
		}
		if n == 3 {
			close(thrice)
		}
		return true
	})
	ctx := testCtx(t)

	_, err := s.AckFloor(ctx, "absent")
	testutil.Error(t, err, ErrNotFound)
	testutil.Contains(t, err.Error(), "consumer absent")

	// The wait ends when its caller gives up (here once three requests
	// went unanswered), not at the first unanswered request.
	short, cancel := context.WithCancel(ctx)
	go func() {
		<-thrice
		cancel()
	}()
	_, err = s.AckFloor(short, "mute")
	cancel()
	testutil.Error(t, err, context.Canceled)
	testutil.Contains(t, err.Error(), "ack floor: consumer mute: no answer to ")
}

// BenchmarkStateRequests is one state request of each kind a wait makes
// (a session's last fact, a durable's ack floor), answered at once, under
// a context with a deadline: what asking again costs when nothing is
// lost.
func BenchmarkStateRequests(b *testing.B) {
	e := startEmbedded(b, "", false)
	s := openStore(b, connectAdmin(b, e), Config{Tokens: lenCounter{}})
	ctx := testCtx(b)
	session, _, _ := stateOf(b, ctx, e, "bench")
	b.Run("LastSeq", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.LastSeq(ctx, "", session, events.KindFact); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AckFloor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.AckFloor(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
