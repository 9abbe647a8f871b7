package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

func TestStoreSuiteEmbedded(t *testing.T) {
	t.Parallel()
	runStoreSuite(t, connectEmbedded)
}

func TestRestartKeepsSessions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := testCtx(t)

	srv := startEmbedded(t, dir, false)
	nc := connectAdmin(t, srv)
	s := openStore(t, nc, Config{})
	in := sessionEvents("acme", "s1")
	stored, err := s.Append(ctx, in)
	testutil.NoError(t, err)
	_, err = s.Append(ctx, []events.Event{msgEvent("", "s2", "x1", "other session")})
	testutil.NoError(t, err)
	hash := stored[3].Data.(*events.ToolResult).OutputRef.Hash
	nc.Close()
	srv.Shutdown()

	srv2 := startEmbedded(t, dir, false)
	nc2 := connectAdmin(t, srv2)
	s2 := openStore(t, nc2, Config{})
	sessions, err := s2.Sessions(ctx)
	testutil.NoError(t, err)
	testutil.Equal(t, len(sessions), 2)
	testutil.Equal(t, sessions[0], SessionRef{Tenant: "acme", Session: "s1", Facts: 5})
	testutil.Equal(t, sessions[1], SessionRef{Tenant: events.DefaultTenant, Session: "s2", Facts: 1})
	got, err := s2.ReadSession(ctx, "acme", "s1")
	testutil.NoError(t, err)
	testutil.Equal(t, ids(got), ids(in))
	for i := range got {
		testutil.Equal(t, got[i].Seq, stored[i].Seq)
	}
	blob, err := s2.GetBlob(ctx, hash)
	testutil.NoError(t, err)
	testutil.Equal(t, string(blob), *in[3].Data.(*events.ToolResult).Output)
	// The deduplication window survives the restart.
	again, err := s2.Append(ctx, in[:1])
	testutil.NoError(t, err)
	testutil.Equal(t, again[0].Seq, stored[0].Seq)
	last, err := s2.StreamLastSeq(ctx)
	testutil.NoError(t, err)
	testutil.Equal(t, last, uint64(6))
}

func TestInvalidBatchPublishesNothing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), Config{Tokens: lenCounter{}})
	_, err := s.Append(ctx, []events.Event{msgEvent("", "s", "e1", "ok"), msgEvent("", "s", "e2", "ok")})
	testutil.NoError(t, err)
	bad := events.New("e4", "", "s", t0, &events.ToolCall{Item: "c/input", CallID: "c", Tool: "Read", Input: []byte(`{`)})
	_, err = s.Append(ctx, []events.Event{msgEvent("", "s", "e3", "ok"), bad})
	var fe *events.FieldError
	testutil.True(t, errors.As(err, &fe) && fe.Field == "data.input", "want data.input error, got %v", err)
	last, err := s.StreamLastSeq(ctx)
	testutil.NoError(t, err)
	testutil.Equal(t, last, uint64(2))
}

func TestLargeEventFits(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), Config{Tokens: lenCounter{}})
	big := strings.Repeat("0123456789abcdef", 5<<20/16)  // 5 MB inline message
	huge := strings.Repeat("x", DefaultMaxPayload+1<<20) // tool output over the max payload: chunked blob
	stored, err := s.Append(ctx, []events.Event{
		msgEvent("", "big", "e1", big),
		resultEvent("", "big", "e2", "c1", huge),
	})
	testutil.NoError(t, err)
	got, err := s.ReadSession(ctx, "", "big")
	testutil.NoError(t, err)
	testutil.Equal(t, len(got), 2)
	testutil.Equal(t, got[0].Data.(*events.Message).Text, big)
	blob, err := s.GetBlob(ctx, stored[1].Data.(*events.ToolResult).OutputRef.Hash)
	testutil.NoError(t, err)
	testutil.Equal(t, len(blob), len(huge))

	// Over the server's max payload: rejected before publishing.
	_, err = s.Append(ctx, []events.Event{msgEvent("", "big", "e3", strings.Repeat("y", 9<<20))})
	testutil.Error(t, err)
	testutil.Contains(t, err.Error(), "max payload")
}

func TestReadSessionBadMessageNamesSeq(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), Config{Tokens: lenCounter{}})
	_, err := s.Append(ctx, []events.Event{msgEvent("", "s", "e1", "ok")})
	testutil.NoError(t, err)
	ack, err := s.JS().Publish(ctx, events.Subject("", "s", events.KindFact), []byte(`{"v":1,"id":"e2","type":"message"}`))
	testutil.NoError(t, err)
	_, err = s.ReadSession(ctx, "", "s")
	testutil.Error(t, err)
	testutil.Contains(t, err.Error(), "seq 2")
	testutil.Equal(t, ack.Sequence, uint64(2))

	// An event on the wrong subject is also refused.
	b, err := events.Encode(msgEvent("", "elsewhere", "e3", "misfiled"))
	testutil.NoError(t, err)
	_, err = s.JS().Publish(ctx, events.Subject("", "t", events.KindFact), b)
	testutil.NoError(t, err)
	_, err = s.ReadSession(ctx, "", "t")
	testutil.Error(t, err)
	testutil.Contains(t, err.Error(), "belongs on ps.default.elsewhere.fact")
}

// A worker waiting on another's progress with AckFloor: documents what a
// filtered consumer's floor is when later events are outside its filter.
func TestAckFloorFilteredConsumer(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), Config{Tokens: lenCounter{}})
	stored, err := s.Append(ctx, []events.Event{
		msgEvent("", "s", "e1", "a"), msgEvent("", "s", "e2", "b"),
		markEvent("", "s", "m1", "m-e1", "e1"), markEvent("", "s", "m2", "m-e2", "e2"),
	})
	testutil.NoError(t, err)
	done := make(chan error, 1)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		done <- s.Consume(runCtx, "facts", events.KindFilter(events.KindFact), func(context.Context, events.Event) error { return nil })
	}()
	testutil.Eventually(t, func() error {
		f, err := s.AckFloor(ctx, "facts")
		if err != nil {
			return err
		}
		if f < stored[1].Seq {
			return errors.New("not yet")
		}
		return nil
	})

	f, err := s.AckFloor(ctx, "facts")
	testutil.NoError(t, err)
	t.Logf("ack floor of a fact consumer with marks after the last fact: %d (last fact %d, stream last %d)", f, stored[1].Seq, stored[3].Seq)
	ok, err := s.ProcessedThrough(ctx, "facts", stored[3].Seq)
	testutil.NoError(t, err)
	testutil.True(t, ok, "not processed through the last mark")
	ok, err = s.ProcessedThrough(ctx, "facts", stored[3].Seq+1)
	testutil.NoError(t, err)
	testutil.True(t, !ok, "processed through a sequence not yet stored")
	// A new fact is not processed until the worker acks it.
	more, err := s.Append(ctx, []events.Event{msgEvent("", "s", "e3", "c")})
	testutil.NoError(t, err)
	testutil.Eventually(t, func() error {
		ok, err := s.ProcessedThrough(ctx, "facts", more[0].Seq)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("not yet")
		}
		return nil
	})

	stop()
	testutil.NoError(t, <-done)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	var c Config
	c.setDefaults()
	testutil.NoError(t, c.Validate())
	testutil.Equal(t, c.Replicas, 1)
	testutil.Equal(t, c.Duplicates, 2*time.Minute)
	testutil.Equal(t, c.BlobBucket, "PRUNESCHED_BLOBS")
	bad := Config{Replicas: -1, Duplicates: time.Millisecond, BlobBucket: "a.b", MaxPending: -1, PublishTimeout: -1, AckWait: time.Millisecond, MaxAckPending: -1, NakDelay: -1, ReadBufferBytes: 10}
	err := bad.Validate()
	testutil.Error(t, err)
	for _, f := range []string{"replicas", "duplicates", "blob bucket", "max pending", "publish timeout", "ack wait", "max ack pending", "nak delay", "read buffer"} {
		testutil.Contains(t, err.Error(), f)
	}

	var e EmbeddedConfig
	testutil.Contains(t, e.Validate().Error(), "data dir")
	e = EmbeddedConfig{DataDir: "x"}
	e.setDefaults()
	testutil.NoError(t, e.Validate())
	testutil.Equal(t, e.Host, "127.0.0.1")
	testutil.Equal(t, e.Port, -1)
	testutil.Equal(t, e.MaxPayload, int32(8<<20))
	e.Port = 70000
	e.SyncInterval = -time.Second
	err = e.Validate()
	testutil.Contains(t, err.Error(), "port")
	testutil.Contains(t, err.Error(), "sync interval")

	_, err = Open(testCtx(t), nil, Config{}, nil)
	testutil.Error(t, err)
}
