package store

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

// TestAppendChain: a chain of a session's facts and an application,
// guarded on the session's last fact, stores all of it (sequences as the
// log has them) or, on a stale guard, nothing; an application the log
// holds already is taken one by one (a duplicate). The same holds on a
// stream created without atomic batches, where the chain goes one guarded
// publish each.
func TestAppendChain(t *testing.T) {
	for _, atomic := range []bool{true, false} {
		t.Run(fmt.Sprintf("atomic=%v", atomic), func(t *testing.T) {
			ctx := testCtx(t)
			nc := connectEmbedded(t)
			if !atomic {
				// A stream created before atomic batches: Open keeps it.
				js, err := jetstream.New(nc)
				testutil.NoError(t, err)
				cfg := StreamConfig(suiteConfig())
				cfg.AllowAtomicPublish = false
				_, err = js.CreateStream(ctx, cfg)
				testutil.NoError(t, err)
			}
			s := openStore(t, nc, suiteConfig())
			s.batchR1 = true // one embedded node: batch as on a cluster
			testutil.Equal(t, s.stream.CachedInfo().Config.AllowAtomicPublish, atomic)
			sess := uniqueSession("chain")
			chain := []events.Event{startedEvent("", sess, "f1"), msgEvent("", sess, "f2", "two"), msgEvent("", sess, "f3", "three"),
				applyEvent("", sess, "a1", "k1", "m-f2")}
			stored, err := s.AppendChain(ctx, chain, 0)
			testutil.NoError(t, err)
			testutil.Equal(t, len(stored), len(chain))
			logged, err := s.ReadSession(ctx, "", sess)
			testutil.NoError(t, err)
			testutil.Equal(t, len(logged), len(chain))
			for i := range logged {
				testutil.Equal(t, stored[i].ID, logged[i].ID)
				testutil.Equal(t, stored[i].Seq, logged[i].Seq)
			}

			// Guarded on a fact the log has passed: nothing is stored.
			_, err = s.AppendChain(ctx, []events.Event{msgEvent("", sess, "g1", "late"), msgEvent("", sess, "g2", "late too")}, stored[1].Seq)
			testutil.Error(t, err, ErrConflict)
			logged, err = s.ReadSession(ctx, "", sess)
			testutil.NoError(t, err)
			testutil.Equal(t, len(logged), len(chain))

			// A chain whose application the log holds already: its facts
			// are stored, the application is the one stored.
			more, err := s.AppendChain(ctx, []events.Event{msgEvent("", sess, "f4", "four"), applyEvent("", sess, "a1", "k1", "m-f2")}, stored[2].Seq)
			testutil.NoError(t, err)
			testutil.Equal(t, len(more), 2)
			testutil.Equal(t, more[1].Seq, stored[3].Seq)
			last, err := s.LastSeq(ctx, "", sess, events.KindFact)
			testutil.NoError(t, err)
			testutil.Equal(t, last, more[0].Seq)
		})
	}
}

// TestLastSeqLeader: the leader's answer for a session's last fact is
// LastSeq's on a settled log (0 for a session without facts, the last
// fact's sequence, an application after it not counted), through the
// JetStream API's message get.
func TestLastSeqLeader(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), suiteConfig())
	sess := uniqueSession("leader")
	last, err := s.LastSeqLeader(ctx, "", sess, events.KindFact)
	testutil.NoError(t, err)
	testutil.Equal(t, last, uint64(0))
	stored, err := s.AppendChain(ctx, []events.Event{startedEvent("", sess, "f1"), msgEvent("", sess, "f2", "two"),
		applyEvent("", sess, "a1", "k1", "m-f2")}, 0)
	testutil.NoError(t, err)
	last, err = s.LastSeqLeader(ctx, "", sess, events.KindFact)
	testutil.NoError(t, err)
	testutil.Equal(t, last, stored[1].Seq)
	direct, err := s.LastSeq(ctx, "", sess, events.KindFact)
	testutil.NoError(t, err)
	testutil.Equal(t, last, direct)
}

// TestBlobInfoLeader: the object stream's leader describes a stored blob
// (its name, size and chunks, as the object store does) and reports one
// never stored as not found.
func TestBlobInfoLeader(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), suiteConfig())
	data := []byte(uniqueSession("blob") + " output")
	h := events.HashBytes(data)
	_, _, err := s.blobInfoLeader(ctx, h)
	testutil.Error(t, err, jetstream.ErrObjectNotFound)
	testutil.NoError(t, s.PutBlob(ctx, h, data))
	info, _, err := s.blobInfoLeader(ctx, h)
	testutil.NoError(t, err)
	testutil.Equal(t, info.Name, h)
	testutil.Equal(t, info.Size, uint64(len(data)))
	whole, err := s.blobWhole(ctx, info)
	testutil.NoError(t, err)
	testutil.True(t, whole, "the leader's description names chunks the stream lacks")
}
