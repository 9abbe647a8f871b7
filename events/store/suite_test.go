package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
)

// runStoreSuite is the conformance suite every Store backend must pass
// (embedded server, external server, cluster). connect returns a connection
// to the backend; it may be a fresh server per call or a shared one: the
// tests use unique session names and never rely on the stream being empty.
func runStoreSuite(t *testing.T, connect func(t *testing.T) *nats.Conn) {
	tests := []struct {
		name string
		fn   func(t *testing.T, nc *nats.Conn)
	}{
		{"AppendReadRoundTrip", testAppendReadRoundTrip},
		{"MsgIDDedup", testMsgIDDedup},
		{"IdenticalOutputsStoredOnce", testIdenticalOutputsStoredOnce},
		{"BlobErrors", testBlobErrors},
		{"DeleteAndPurgeDenied", testDeleteAndPurgeDenied},
		{"AppendGuardedConflict", testAppendGuardedConflict},
		{"AppendGuardedConcurrentWriters", testAppendGuardedConcurrentWriters},
		{"ExpectedLastSubjectSequenceWildcard", testExpectedLastSubjectSequenceWildcard},
		{"ConsumeRedeliversAfterHandlerError", testConsumeRedelivers},
		{"InvalidEventRejected", testInvalidEventRejected},
		{"ReadSessionIsolated", testReadSessionIsolated},
		{"ReadAll", testReadAll},
		{"SessionsSorted", testSessionsSorted},
		{"OpenIdempotent", testOpenIdempotent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, connect(t))
		})
	}
}

func suiteConfig() Config {
	return Config{NakDelay: 50 * time.Millisecond, AckWait: 2 * time.Second}
}

func testAppendReadRoundTrip(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig()) // real token counter
	sess := uniqueSession("rt")
	in := sessionEvents("", sess)
	stored, err := s.Append(ctx, in)
	require_NoError(t, err)
	require_Equal(t, len(stored), len(in))
	for i := 1; i < len(stored); i++ {
		require_True(t, stored[i].Seq > stored[i-1].Seq, "seqs not increasing: %d then %d", stored[i-1].Seq, stored[i].Seq)
	}
	// Stored form: output moved to the blob store, counts filled.
	tr := stored[3].Data.(*events.ToolResult)
	require_True(t, tr.Output == nil && tr.OutputRef != nil, "tool result not in stored form: %+v", tr)
	require_True(t, tr.OutputRef.Tokens > 0, "output tokens not counted")
	require_True(t, stored[1].Data.(*events.Message).Tokens > 0, "message tokens not counted")
	require_True(t, stored[2].Data.(*events.ToolCall).InputTokens > 0, "input tokens not counted")
	// The caller's events are not modified.
	require_True(t, in[3].Data.(*events.ToolResult).Output != nil, "Append modified its input")

	got, err := s.ReadSession(ctx, "", sess)
	require_NoError(t, err)
	require_Equal(t, ids(got), ids(in))
	for i := range got {
		require_Equal(t, got[i].Seq, stored[i].Seq)
		a, err := events.Encode(got[i])
		require_NoError(t, err)
		b, err := events.Encode(stored[i])
		require_NoError(t, err)
		require_Equal(t, string(a), string(b))
	}
	blob, err := s.GetBlob(ctx, tr.OutputRef.Hash)
	require_NoError(t, err)
	require_Equal(t, string(blob), *in[3].Data.(*events.ToolResult).Output)

	last, err := s.LastSeq(ctx, "", sess, events.KindFact)
	require_NoError(t, err)
	require_Equal(t, last, stored[4].Seq)
	streamLast, err := s.StreamLastSeq(ctx)
	require_NoError(t, err)
	require_True(t, streamLast >= last, "stream last %d < session last %d", streamLast, last)

	// An unknown session reads empty, with no error.
	none, err := s.ReadSession(ctx, "", uniqueSession("none"))
	require_NoError(t, err)
	require_Equal(t, len(none), 0)
	_, err = s.ReadSession(ctx, "", "bad.session")
	require_Error(t, err)
}

func testMsgIDDedup(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("dedup")
	e := msgEvent("", sess, "e1", "hello")
	first, err := s.Append(ctx, []events.Event{e})
	require_NoError(t, err)
	again, err := s.Append(ctx, []events.Event{e})
	require_NoError(t, err)
	require_Equal(t, again[0].Seq, first[0].Seq)
	// Twice in one batch too.
	e2 := msgEvent("", sess, "e2", "world")
	batch, err := s.Append(ctx, []events.Event{e2, e2, e})
	require_NoError(t, err)
	require_Equal(t, batch[1].Seq, batch[0].Seq)
	require_Equal(t, batch[2].Seq, first[0].Seq)
	// The same id in another session is a different event.
	other, err := s.Append(ctx, []events.Event{msgEvent("", uniqueSession("dedup-other"), "e1", "hello")})
	require_NoError(t, err)
	require_True(t, other[0].Seq != first[0].Seq, "event in another session deduplicated")

	got, err := s.ReadSession(ctx, "", sess)
	require_NoError(t, err)
	require_Equal(t, ids(got), "e1,e2")
}

func testIdenticalOutputsStoredOnce(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("blobs")
	out := "identical output " + sess // unique per run, identical within it
	r1, err := s.Append(ctx, []events.Event{resultEvent("", sess, "e1", "c1", out)})
	require_NoError(t, err)
	ref1 := r1[0].Data.(*events.ToolResult).OutputRef
	info1, err := s.blobs.GetInfo(ctx, ref1.Hash)
	require_NoError(t, err)

	r2, err := s.Append(ctx, []events.Event{resultEvent("", sess, "e2", "c2", out)})
	require_NoError(t, err)
	ref2 := r2[0].Data.(*events.ToolResult).OutputRef
	require_Equal(t, ref2.Hash, ref1.Hash)
	info2, err := s.blobs.GetInfo(ctx, ref1.Hash)
	require_NoError(t, err)
	// A second put would have written new chunks under a new NUID.
	require_Equal(t, info2.NUID, info1.NUID)
	require_Equal(t, info2.ModTime, info1.ModTime)

	// Concurrent puts of one new output in one process: still one object.
	data := []byte("concurrent " + sess)
	h := events.HashBytes(data)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- s.PutBlob(ctx, h, data) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require_NoError(t, err)
	}
	info, err := s.blobs.GetInfo(ctx, h)
	require_NoError(t, err)
	bs, err := s.JS().Stream(ctx, "OBJ_"+s.cfg.BlobBucket)
	require_NoError(t, err)
	si, err := bs.Info(ctx, jetstream.WithSubjectFilter(fmt.Sprintf("$O.%s.C.>", s.cfg.BlobBucket)))
	require_NoError(t, err)
	require_Equal(t, si.State.Subjects[fmt.Sprintf("$O.%s.C.%s", s.cfg.BlobBucket, info.NUID)], uint64(1))
}

func testBlobErrors(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	missing := events.HashBytes([]byte("never stored " + events.NewID()))
	_, err := s.GetBlob(ctx, missing)
	require_Error(t, err, ErrNotFound)
	require_Contains(t, err.Error(), missing)

	err = s.PutBlob(ctx, missing, []byte("other data"))
	require_Error(t, err)
	require_Contains(t, err.Error(), "hashes to")
	_, err = s.GetBlob(ctx, missing)
	require_Error(t, err, ErrNotFound)

	require_Error(t, s.PutBlob(ctx, "md5:abc", nil))
	_, err = s.GetBlob(ctx, "sha256:nothex")
	require_Error(t, err)

	// The empty output is a valid blob.
	empty := []byte{}
	require_NoError(t, s.PutBlob(ctx, events.HashBytes(empty), empty))
	got, err := s.GetBlob(ctx, events.HashBytes(empty))
	require_NoError(t, err)
	require_Equal(t, len(got), 0)
}

func testDeleteAndPurgeDenied(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("deny")
	stored, err := s.Append(ctx, sessionEvents("", sess))
	require_NoError(t, err)
	st, err := s.JS().Stream(ctx, events.StreamName)
	require_NoError(t, err)
	require_Error(t, st.DeleteMsg(ctx, stored[0].Seq))
	require_Error(t, st.SecureDeleteMsg(ctx, stored[1].Seq))
	require_Error(t, st.Purge(ctx))
	require_Error(t, st.Purge(ctx, jetstream.WithPurgeSubject(events.SessionFilter("", sess))))
	require_Error(t, st.Purge(ctx, jetstream.WithPurgeSequence(stored[2].Seq)))
	info, err := st.Info(ctx)
	require_NoError(t, err)
	require_True(t, info.Config.DenyDelete && info.Config.DenyPurge, "stream config allows delete or purge: %+v", info.Config)
	require_Equal(t, info.Config.Discard, jetstream.DiscardNew)
	got, err := s.ReadSession(ctx, "", sess)
	require_NoError(t, err)
	require_Equal(t, len(got), len(stored))
}

func testAppendGuardedConflict(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	const tenant = "acme"
	sess := uniqueSession("guard")

	// Expect 0 on an empty session: the first fact passes, a second
	// "first" fact conflicts.
	first, err := s.AppendGuarded(ctx, startedEvent(tenant, sess, "e1"), 0)
	require_NoError(t, err)
	_, err = s.AppendGuarded(ctx, msgEvent(tenant, sess, "e1b", "racing start"), 0)
	require_Error(t, err, ErrConflict)

	f, err := s.LastSeq(ctx, tenant, sess, events.KindFact)
	require_NoError(t, err)
	require_Equal(t, f, first.Seq)

	// Marks do not move the fact sequence: an application guarded on f
	// passes after a mark lands.
	marks, err := s.Append(ctx, []events.Event{markEvent(tenant, sess, "m1", "m-e1", "e1")})
	require_NoError(t, err)
	app, err := s.AppendGuarded(ctx, applyEvent(tenant, sess, "a1", "m1", "m-e1"), f)
	require_NoError(t, err)
	require_True(t, app.Seq > marks[0].Seq, "application seq %d not after mark %d", app.Seq, marks[0].Seq)

	// A concurrent fact lands: the application decided at f conflicts.
	newer, err := s.Append(ctx, []events.Event{msgEvent(tenant, sess, "e2", "new user message")})
	require_NoError(t, err)
	_, err = s.AppendGuarded(ctx, applyEvent(tenant, sess, "a2", "m1", "m-e1"), f)
	require_Error(t, err, ErrConflict)
	require_Contains(t, err.Error(), "wrong last sequence")
	// Re-decided at the new last fact, it passes.
	a2, err := s.AppendGuarded(ctx, applyEvent(tenant, sess, "a2", "m1", "m-e1"), newer[0].Seq)
	require_NoError(t, err)
	// A retried application whose facts did not move is a duplicate.
	a2again, err := s.AppendGuarded(ctx, applyEvent(tenant, sess, "a2", "m1", "m-e1"), newer[0].Seq)
	require_NoError(t, err)
	require_Equal(t, a2again.Seq, a2.Seq)

	// Facts of another session do not interfere.
	_, err = s.Append(ctx, []events.Event{msgEvent(tenant, uniqueSession("guard-other"), "x1", "elsewhere")})
	require_NoError(t, err)
	_, err = s.AppendGuarded(ctx, applyEvent(tenant, sess, "a3", "m1", "m-e1"), newer[0].Seq)
	require_NoError(t, err)

	// A bad event is a validation error, not a conflict.
	_, err = s.AppendGuarded(ctx, events.New("a4", tenant, sess, t0, &events.Application{Request: "r"}), newer[0].Seq)
	require_Error(t, err)
	require_True(t, !errors.Is(err, ErrConflict), "validation error reported as conflict: %v", err)

	got, err := s.ReadSession(ctx, tenant, sess)
	require_NoError(t, err)
	require_Equal(t, ids(got), "e1,m1,a1,e2,a2,a3")
}

// Several writers race to append the next fact after the same sequence:
// exactly one wins, the others get ErrConflict.
func testAppendGuardedConcurrentWriters(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("race")
	first, err := s.Append(ctx, []events.Event{startedEvent("", sess, "e0")})
	require_NoError(t, err)
	const writers = 8
	var wins, conflicts atomic.Int32
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			_, err := s.AppendGuarded(ctx, msgEvent("", sess, fmt.Sprintf("w%d", i), "me next"), first[0].Seq)
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, ErrConflict):
				conflicts.Add(1)
			default:
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	require_Equal(t, wins.Load(), int32(1))
	require_Equal(t, conflicts.Load(), int32(writers-1))
	got, err := s.ReadSession(ctx, "", sess)
	require_NoError(t, err)
	require_Equal(t, len(got), 2)
}

// The design mentions guarding an application on the session's wildcard
// subject (any new session event, marks included). This checks that the
// server honours a wildcard in Nats-Expected-Last-Subject-Sequence-Subject.
func testExpectedLastSubjectSequenceWildcard(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("wild")
	stored, err := s.Append(ctx, []events.Event{startedEvent("", sess, "e1"), markEvent("", sess, "m1", "x", "e1")})
	require_NoError(t, err)
	last, err := s.LastSeq(ctx, "", sess, "")
	require_NoError(t, err)
	require_Equal(t, last, stored[1].Seq)

	publish := func(id string, expect uint64) error {
		e := applyEvent("", sess, id, "m1", "x")
		b, err := events.Encode(e)
		require_NoError(t, err)
		_, err = s.JS().PublishMsg(ctx, &nats.Msg{Subject: events.SubjectOf(e), Data: b},
			jetstream.WithMsgID(events.MsgID(e)),
			jetstream.WithExpectLastSequenceForSubject(expect, events.SessionFilter("", sess)))
		return err
	}
	// Guarding on the last fact is stale here (a mark came later).
	err = publish("a1", stored[0].Seq)
	require_True(t, isWrongLastSequence(err), "wildcard guard on stale seq: %v", err)
	require_NoError(t, publish("a1", stored[1].Seq))
}

func testConsumeRedelivers(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("consume")
	stored, err := s.Append(ctx, sessionEvents("", sess))
	require_NoError(t, err)
	// A mark after the facts, outside the consumer's filter.
	_, err = s.Append(ctx, []events.Event{markEvent("", sess, "m1", "m-e2", "e2")})
	require_NoError(t, err)

	var mu sync.Mutex
	attempts := map[string]int{}
	var done []string
	handler := func(ctx context.Context, e events.Event) error {
		mu.Lock()
		defer mu.Unlock()
		attempts[e.ID]++
		if e.ID == "e3" && attempts[e.ID] == 1 {
			return errors.New("transient failure")
		}
		if e.ID == "e4" && attempts[e.ID] == 1 {
			panic("handler bug")
		}
		done = append(done, e.ID)
		return nil
	}
	durable := "test-" + sess
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make(chan error, 1)
	go func() {
		res <- s.Consume(cctx, durable, events.Subject("", sess, events.KindFact), handler)
	}()
	last := stored[len(stored)-1].Seq
	drainConsumer(t, ctx, s, durable, last, cancel, res)
	mu.Lock()
	defer mu.Unlock()
	require_Equal(t, attempts["e3"], 2)
	require_Equal(t, attempts["e4"], 2)
	require_Equal(t, len(done), len(stored))
	_, seenMark := attempts["m1"]
	require_True(t, !seenMark, "filter leaked a mark")

	_, err = s.AckFloor(ctx, "no-such-consumer")
	require_Error(t, err, ErrNotFound)
	require_Error(t, s.Consume(ctx, "bad.name", "", handler))
	require_Error(t, s.Consume(ctx, "ok", "other.>", handler))
}

func testInvalidEventRejected(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("invalid")
	bad := events.New("e2", "", sess, t0, &events.Message{Item: "m2", Text: "no role"})
	out := "output of a rejected batch"
	_, err := s.Append(ctx, []events.Event{resultEvent("", sess, "e1", "c1", out), bad})
	require_Error(t, err)
	var ee *EventError
	require_True(t, errors.As(err, &ee), "not an *EventError: %v", err)
	require_Equal(t, ee.Index, 1)
	require_Equal(t, ee.ID, "e2")
	var fe *events.FieldError
	require_True(t, errors.As(err, &fe), "not a *events.FieldError: %v", err)
	require_Equal(t, fe.Field, "data.role")
	require_Contains(t, err.Error(), `"e2"`)

	got, err := s.ReadSession(ctx, "", sess)
	require_NoError(t, err)
	require_Equal(t, len(got), 0)
	// Validation comes before preparation: not even the valid event's
	// output reached the blob store.
	_, err = s.GetBlob(ctx, events.HashBytes([]byte(out)))
	require_Error(t, err, ErrNotFound)

	// Other envelope errors name their field too.
	cases := map[string]events.Event{
		"session": msgEvent("", "has.dot", "e1", "x"),
		"tenant":  msgEvent("a*b", sess, "e1", "x"),
		"id":      msgEvent("", sess, "", "x"),
		"time":    {V: 1, ID: "e1", Type: events.TypeMessage, Session: sess, Data: &events.Message{Item: "m", Role: events.RoleUser}},
	}
	for field, e := range cases {
		_, err := s.Append(ctx, []events.Event{e})
		require_True(t, errors.As(err, &fe) && fe.Field == field, "want field %q, got %v", field, err)
	}
}

func testReadSessionIsolated(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	a, b := uniqueSession("iso-a"), uniqueSession("iso-b")
	var batch []events.Event
	for i := range 10 {
		batch = append(batch,
			msgEvent("", a, fmt.Sprintf("a%d", i), "for a"),
			msgEvent("", b, fmt.Sprintf("b%d", i), "for b"),
			// Same session name under another tenant.
			msgEvent("other", a, fmt.Sprintf("o%d", i), "for other tenant"),
		)
	}
	batch = append(batch, markEvent("", a, "am", "m-a0", "a0"), applyEvent("", a, "aa", "am", "m-a0"))
	_, err := s.Append(ctx, batch)
	require_NoError(t, err)
	got, err := s.ReadSession(ctx, "", a)
	require_NoError(t, err)
	require_Equal(t, ids(got), "a0,a1,a2,a3,a4,a5,a6,a7,a8,a9,am,aa")
	for _, e := range got {
		require_Equal(t, e.Session, a)
		require_Equal(t, e.TenantOrDefault(), events.DefaultTenant)
	}
	got, err = s.ReadSession(ctx, "other", a)
	require_NoError(t, err)
	require_Equal(t, len(got), 10)
	require_Equal(t, got[0].Tenant, "other")
}

func testReadAll(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("all")
	stored, err := s.Append(ctx, sessionEvents("", sess))
	require_NoError(t, err)
	var seen []events.Event
	last, err := s.ReadAll(ctx, stored[0].Seq, func(e events.Event) error {
		if e.Session == sess {
			seen = append(seen, e)
		}
		return nil
	})
	require_NoError(t, err)
	require_True(t, last >= stored[len(stored)-1].Seq, "last %d before the batch end %d", last, stored[len(stored)-1].Seq)
	require_Equal(t, ids(seen), ids(stored))
	for i := 1; i < len(seen); i++ {
		require_True(t, seen[i].Seq > seen[i-1].Seq, "out of order")
	}

	// From the middle.
	seen = nil
	_, err = s.ReadAll(ctx, stored[2].Seq, func(e events.Event) error {
		if e.Session == sess {
			seen = append(seen, e)
		}
		return nil
	})
	require_NoError(t, err)
	require_Equal(t, ids(seen), "e3,e4,e5")

	// fn's error stops the replay and names the event.
	boom := errors.New("boom")
	n := 0
	stop, err := s.ReadAll(ctx, stored[0].Seq, func(e events.Event) error {
		n++
		if n == 2 {
			return boom
		}
		return nil
	})
	require_Error(t, err, boom)
	require_Equal(t, stop, stored[0].Seq)

	// Past the end: nothing, no error.
	end, err := s.StreamLastSeq(ctx)
	require_NoError(t, err)
	called := false
	got, err := s.ReadAll(ctx, end+100, func(events.Event) error { called = true; return nil })
	require_NoError(t, err)
	require_True(t, !called && got == end, "past the end: called=%v last=%d end=%d", called, got, end)
}

func testSessionsSorted(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	suffix := events.NewID()[:8]
	want := []SessionRef{
		{Tenant: "t1-" + suffix, Session: "a", Facts: 2},
		{Tenant: "t1-" + suffix, Session: "b", Facts: 1},
		{Tenant: "t2-" + suffix, Session: "a", Facts: 1},
	}
	_, err := s.Append(ctx, []events.Event{
		msgEvent(want[2].Tenant, "a", "e1", "x"),
		msgEvent(want[1].Tenant, "b", "e1", "x"),
		msgEvent(want[0].Tenant, "a", "e1", "x"),
		msgEvent(want[0].Tenant, "a", "e2", "x"),
		// A session with only a mark is not listed.
		markEvent(want[0].Tenant, "c", "m1", "i", "e1"),
	})
	require_NoError(t, err)
	all, err := s.Sessions(ctx)
	require_NoError(t, err)
	var got []SessionRef
	for _, r := range all {
		if r.Tenant == want[0].Tenant || r.Tenant == want[2].Tenant {
			got = append(got, r)
		}
	}
	require_Equal(t, fmt.Sprint(got), fmt.Sprint(want))
	for i := 1; i < len(all); i++ {
		p, c := all[i-1], all[i]
		require_True(t, p.Tenant < c.Tenant || p.Tenant == c.Tenant && p.Session < c.Session, "not sorted: %v then %v", p, c)
	}
}

func testOpenIdempotent(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s1 := openStore(t, nc, suiteConfig())
	sess := uniqueSession("reopen")
	_, err := s1.Append(ctx, sessionEvents("", sess))
	require_NoError(t, err)
	// Reopening with a changed duplicates window updates the stream. (On a
	// shared server this briefly changes the window for everyone.)
	s2 := openStore(t, nc, Config{Duplicates: 5 * time.Minute})
	st, err := s2.JS().Stream(ctx, events.StreamName)
	require_NoError(t, err)
	info, err := st.Info(ctx)
	require_NoError(t, err)
	require_Equal(t, info.Config.Duplicates, 5*time.Minute)
	got, err := s2.ReadSession(ctx, "", sess)
	require_NoError(t, err)
	require_Equal(t, len(got), 5)

	_, err = Open(ctx, nc, Config{Replicas: 9, BlobBucket: "bad bucket"}, nil)
	require_Error(t, err)
	require_Contains(t, err.Error(), "replicas")
	require_Contains(t, err.Error(), "blob bucket")
}
