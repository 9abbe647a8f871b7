package store

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

func TestAckStreamSeq(t *testing.T) {
	cases := []struct {
		reply string
		seq   uint64
		ok    bool
	}{
		{"$JS.ACK.PRUNESCHED.c1.1.42.7.1700000000000000000.3", 42, true},
		{"$JS.ACK._.HASH.PRUNESCHED.c1.1.42.7.1700000000000000000.3.rnd", 42, true},
		{"$JS.ACK.dom.HASH.PRUNESCHED.c1.1.42.7.1700000000000000000.3", 42, true},          // 11 tokens: the last one is optional
		{"$JS.ACK.dom.HASH.PRUNESCHED.c1.1.42.7.1700000000000000000.3.rnd.more", 42, true}, // later tokens are ignored
		{"$JS.ACK.S.c.1.18446744073709551615.1.1.0", 1<<64 - 1, true},
		{"$JS.ACK.S.c.1.18446744073709551616.1.1.0", 0, false}, // overflows
		{"$JS.ACK.S.c.1..1.1.0", 0, false},
		{"$JS.ACK.S.c.1.4x.1.1.0", 0, false},
		{"$JS.ACK.S.c.1.-4.1.1.0", 0, false},
		{"$JS.ACK.S.c.1.42.1.1", 0, false},       // 8 tokens
		{"$JS.ACK.d.h.S.c.1.42.1.1.0", 42, true}, // 11 tokens
		{"$JS.ACK.d.h.S.c.1.42.1.1", 0, false},   // 10 tokens
		{"$JS.NAK.S.c.1.42.1.1.0", 0, false},     // not an ack subject
		{"_INBOX.abc", 0, false},
		{"", 0, false},
	}
	for _, c := range cases {
		seq, ok := ackStreamSeq(c.reply)
		if seq != c.seq || ok != c.ok {
			t.Errorf("ackStreamSeq(%q) = %d, %v; want %d, %v", c.reply, seq, ok, c.seq, c.ok)
		}
	}
}

// TestStreamSeqMatchesMetadata: on the messages an ordered consumer
// delivers from the embedded server, StreamSeq reads the sequence
// msg.Metadata does, from the reply subject.
func TestStreamSeqMatchesMetadata(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), suiteConfig())
	sess := uniqueSession("seq")
	_, err := s.Append(ctx, sessionEvents("", sess))
	testutil.NoError(t, err)
	last, err := s.StreamLastSeq(ctx)
	testutil.NoError(t, err)
	cons, err := s.JS().OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{})
	testutil.NoError(t, err)
	for want := uint64(1); want <= last; want++ {
		msg, err := cons.Next()
		testutil.NoError(t, err)
		_, ok := ackStreamSeq(msg.Reply())
		testutil.True(t, ok, "reply subject %q not read", msg.Reply())
		meta, err := msg.Metadata()
		testutil.NoError(t, err)
		seq, err := StreamSeq(msg)
		testutil.NoError(t, err)
		testutil.Equal(t, seq, meta.Sequence.Stream, "stream sequence")
		testutil.Equal(t, seq, want, "stream sequence")
	}
}
