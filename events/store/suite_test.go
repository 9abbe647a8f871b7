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
	"github.com/prunesched/prunesched/internal/testutil"
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
	testutil.NoError(t, err)
	testutil.Equal(t, len(stored), len(in))
	for i := 1; i < len(stored); i++ {
		testutil.True(t, stored[i].Seq > stored[i-1].Seq, "seqs not increasing: %d then %d", stored[i-1].Seq, stored[i].Seq)
	}
	// Stored form: output moved to the blob store, counts filled.
	tr := stored[3].Data.(*events.ToolResult)
	testutil.True(t, tr.Output == nil && tr.OutputRef != nil, "tool result not in stored form: %+v", tr)
	testutil.True(t, tr.OutputRef.Tokens > 0, "output tokens not counted")
	testutil.True(t, stored[1].Data.(*events.Message).Tokens > 0, "message tokens not counted")
	testutil.True(t, stored[2].Data.(*events.ToolCall).InputTokens > 0, "input tokens not counted")
	// The caller's events are not modified.
	testutil.True(t, in[3].Data.(*events.ToolResult).Output != nil, "Append modified its input")

	got, err := s.ReadSession(ctx, "", sess)
	testutil.NoError(t, err)
	testutil.Equal(t, ids(got), ids(in))
	for i := range got {
		testutil.Equal(t, got[i].Seq, stored[i].Seq)
		a, err := events.Encode(got[i])
		testutil.NoError(t, err)
		b, err := events.Encode(stored[i])
		testutil.NoError(t, err)
		testutil.Equal(t, string(a), string(b))
	}
	blob, err := s.GetBlob(ctx, tr.OutputRef.Hash)
	testutil.NoError(t, err)
	testutil.Equal(t, string(blob), *in[3].Data.(*events.ToolResult).Output)

	last, err := s.LastSeq(ctx, "", sess, events.KindFact)
	testutil.NoError(t, err)
	testutil.Equal(t, last, stored[4].Seq)
	streamLast, err := s.StreamLastSeq(ctx)
	testutil.NoError(t, err)
	testutil.True(t, streamLast >= last, "stream last %d < session last %d", streamLast, last)

	// An unknown session reads empty, with no error.
	none, err := s.ReadSession(ctx, "", uniqueSession("none"))
	testutil.NoError(t, err)
	testutil.Equal(t, len(none), 0)
	_, err = s.ReadSession(ctx, "", "bad.session")
	testutil.Error(t, err)
}

func testMsgIDDedup(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("dedup")
	e := msgEvent("", sess, "e1", "hello")
	first, err := s.Append(ctx, []events.Event{e})
	testutil.NoError(t, err)
	again, err := s.Append(ctx, []events.Event{e})
	testutil.NoError(t, err)
	testutil.Equal(t, again[0].Seq, first[0].Seq)
	// Twice in one batch too.
	e2 := msgEvent("", sess, "e2", "world")
	batch, err := s.Append(ctx, []events.Event{e2, e2, e})
	testutil.NoError(t, err)
	testutil.Equal(t, batch[1].Seq, batch[0].Seq)
	testutil.Equal(t, batch[2].Seq, first[0].Seq)
	// The same id in another session is a different event.
	other, err := s.Append(ctx, []events.Event{msgEvent("", uniqueSession("dedup-other"), "e1", "hello")})
	testutil.NoError(t, err)
	testutil.True(t, other[0].Seq != first[0].Seq, "event in another session deduplicated")

	got, err := s.ReadSession(ctx, "", sess)
	testutil.NoError(t, err)
	testutil.Equal(t, ids(got), "e1,e2")
}

func testIdenticalOutputsStoredOnce(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("blobs")
	out := "identical output " + sess // unique per run, identical within it
	r1, err := s.Append(ctx, []events.Event{resultEvent("", sess, "e1", "c1", out)})
	testutil.NoError(t, err)
	ref1 := r1[0].Data.(*events.ToolResult).OutputRef
	info1, err := s.blobs.GetInfo(ctx, ref1.Hash)
	testutil.NoError(t, err)

	r2, err := s.Append(ctx, []events.Event{resultEvent("", sess, "e2", "c2", out)})
	testutil.NoError(t, err)
	ref2 := r2[0].Data.(*events.ToolResult).OutputRef
	testutil.Equal(t, ref2.Hash, ref1.Hash)
	info2, err := s.blobs.GetInfo(ctx, ref1.Hash)
	testutil.NoError(t, err)
	// A second put would have written new chunks under a new NUID.
	testutil.Equal(t, info2.NUID, info1.NUID)
	testutil.Equal(t, info2.ModTime, info1.ModTime)

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
		testutil.NoError(t, err)
	}
	info, err := s.blobs.GetInfo(ctx, h)
	testutil.NoError(t, err)
	bs, err := s.JS().Stream(ctx, "OBJ_"+s.cfg.BlobBucket)
	testutil.NoError(t, err)
	si, err := bs.Info(ctx, jetstream.WithSubjectFilter(fmt.Sprintf("$O.%s.C.>", s.cfg.BlobBucket)))
	testutil.NoError(t, err)
	testutil.Equal(t, si.State.Subjects[s.chunkSubject(info)], uint64(1))
}

func testBlobErrors(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	missing := events.HashBytes([]byte("never stored " + events.NewID()))
	_, err := s.GetBlob(ctx, missing)
	testutil.Error(t, err, ErrNotFound)
	testutil.Contains(t, err.Error(), missing)

	err = s.PutBlob(ctx, missing, []byte("other data"))
	testutil.Error(t, err)
	testutil.Contains(t, err.Error(), "hashes to")
	_, err = s.GetBlob(ctx, missing)
	testutil.Error(t, err, ErrNotFound)

	testutil.Error(t, s.PutBlob(ctx, "md5:abc", nil))
	_, err = s.GetBlob(ctx, "sha256:nothex")
	testutil.Error(t, err)

	// The empty output is a valid blob.
	empty := []byte{}
	testutil.NoError(t, s.PutBlob(ctx, events.HashBytes(empty), empty))
	got, err := s.GetBlob(ctx, events.HashBytes(empty))
	testutil.NoError(t, err)
	testutil.Equal(t, len(got), 0)
}

func testDeleteAndPurgeDenied(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("deny")
	stored, err := s.Append(ctx, sessionEvents("", sess))
	testutil.NoError(t, err)
	st, err := s.JS().Stream(ctx, events.StreamName)
	testutil.NoError(t, err)
	testutil.Error(t, st.DeleteMsg(ctx, stored[0].Seq))
	testutil.Error(t, st.SecureDeleteMsg(ctx, stored[1].Seq))
	testutil.Error(t, st.Purge(ctx))
	testutil.Error(t, st.Purge(ctx, jetstream.WithPurgeSubject(events.SessionFilter("", sess))))
	testutil.Error(t, st.Purge(ctx, jetstream.WithPurgeSequence(stored[2].Seq)))
	info, err := st.Info(ctx)
	testutil.NoError(t, err)
	testutil.True(t, info.Config.DenyDelete && info.Config.DenyPurge, "stream config allows delete or purge: %+v", info.Config)
	testutil.Equal(t, info.Config.Discard, jetstream.DiscardNew)
	got, err := s.ReadSession(ctx, "", sess)
	testutil.NoError(t, err)
	testutil.Equal(t, len(got), len(stored))
}

func testAppendGuardedConflict(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	const tenant = "acme"
	sess := uniqueSession("guard")

	// Expect 0 on an empty session: the first fact passes, a second
	// "first" fact conflicts.
	first, err := s.AppendGuarded(ctx, startedEvent(tenant, sess, "e1"), 0)
	testutil.NoError(t, err)
	_, err = s.AppendGuarded(ctx, msgEvent(tenant, sess, "e1b", "racing start"), 0)
	testutil.Error(t, err, ErrConflict)

	f, err := s.LastSeq(ctx, tenant, sess, events.KindFact)
	testutil.NoError(t, err)
	testutil.Equal(t, f, first.Seq)

	// Marks do not move the fact sequence: an application guarded on f
	// passes after a mark lands.
	marks, err := s.Append(ctx, []events.Event{markEvent(tenant, sess, "m1", "m-e1", "e1")})
	testutil.NoError(t, err)
	app, err := s.AppendGuarded(ctx, applyEvent(tenant, sess, "a1", "m1", "m-e1"), f)
	testutil.NoError(t, err)
	testutil.True(t, app.Seq > marks[0].Seq, "application seq %d not after mark %d", app.Seq, marks[0].Seq)

	// A concurrent fact lands: the application decided at f conflicts.
	newer, err := s.Append(ctx, []events.Event{msgEvent(tenant, sess, "e2", "new user message")})
	testutil.NoError(t, err)
	_, err = s.AppendGuarded(ctx, applyEvent(tenant, sess, "a2", "m1", "m-e1"), f)
	testutil.Error(t, err, ErrConflict)
	testutil.Contains(t, err.Error(), "wrong last sequence")
	// Re-decided at the new last fact, it passes.
	a2, err := s.AppendGuarded(ctx, applyEvent(tenant, sess, "a2", "m1", "m-e1"), newer[0].Seq)
	testutil.NoError(t, err)
	// A retried application whose facts did not move is a duplicate.
	a2again, err := s.AppendGuarded(ctx, applyEvent(tenant, sess, "a2", "m1", "m-e1"), newer[0].Seq)
	testutil.NoError(t, err)
	testutil.Equal(t, a2again.Seq, a2.Seq)

	// Facts of another session do not interfere.
	_, err = s.Append(ctx, []events.Event{msgEvent(tenant, uniqueSession("guard-other"), "x1", "elsewhere")})
	testutil.NoError(t, err)
	_, err = s.AppendGuarded(ctx, applyEvent(tenant, sess, "a3", "m1", "m-e1"), newer[0].Seq)
	testutil.NoError(t, err)

	// A bad event is a validation error, not a conflict.
	_, err = s.AppendGuarded(ctx, events.New("a4", tenant, sess, t0, &events.Application{Request: "r"}), newer[0].Seq)
	testutil.Error(t, err)
	testutil.True(t, !errors.Is(err, ErrConflict), "validation error reported as conflict: %v", err)

	got, err := s.ReadSession(ctx, tenant, sess)
	testutil.NoError(t, err)
	testutil.Equal(t, ids(got), "e1,m1,a1,e2,a2,a3")
}

// Several writers race to append the next fact after the same sequence:
// exactly one wins, the others get ErrConflict.
func testAppendGuardedConcurrentWriters(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("race")
	first, err := s.Append(ctx, []events.Event{startedEvent("", sess, "e0")})
	testutil.NoError(t, err)
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
	testutil.Equal(t, wins.Load(), int32(1))
	testutil.Equal(t, conflicts.Load(), int32(writers-1))
	got, err := s.ReadSession(ctx, "", sess)
	testutil.NoError(t, err)
	testutil.Equal(t, len(got), 2)
}

// The design mentions guarding an application on the session's wildcard
// subject (any new session event, marks included). This checks that the
// server honours a wildcard in Nats-Expected-Last-Subject-Sequence-Subject.
func testExpectedLastSubjectSequenceWildcard(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("wild")
	stored, err := s.Append(ctx, []events.Event{startedEvent("", sess, "e1"), markEvent("", sess, "m1", "x", "e1")})
	testutil.NoError(t, err)
	last, err := s.LastSeq(ctx, "", sess, "")
	testutil.NoError(t, err)
	testutil.Equal(t, last, stored[1].Seq)

	publish := func(id string, expect uint64) error {
		e := applyEvent("", sess, id, "m1", "x")
		b, err := events.Encode(e)
		testutil.NoError(t, err)
		_, err = s.JS().PublishMsg(ctx, &nats.Msg{Subject: events.SubjectOf(e), Data: b},
			jetstream.WithMsgID(events.MsgID(e)),
			jetstream.WithExpectLastSequenceForSubject(expect, events.SessionFilter("", sess)))
		return err
	}
	// Guarding on the last fact is stale here (a mark came later).
	err = publish("a1", stored[0].Seq)
	testutil.True(t, isWrongLastSequence(err), "wildcard guard on stale seq: %v", err)
	testutil.NoError(t, publish("a1", stored[1].Seq))
}

func testConsumeRedelivers(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("consume")
	stored, err := s.Append(ctx, sessionEvents("", sess))
	testutil.NoError(t, err)
	// A mark after the facts, outside the consumer's filter.
	_, err = s.Append(ctx, []events.Event{markEvent("", sess, "m1", "m-e2", "e2")})
	testutil.NoError(t, err)

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
	testutil.Equal(t, attempts["e3"], 2)
	testutil.Equal(t, attempts["e4"], 2)
	testutil.Equal(t, len(done), len(stored))
	_, seenMark := attempts["m1"]
	testutil.True(t, !seenMark, "filter leaked a mark")

	_, err = s.AckFloor(ctx, "no-such-consumer")
	testutil.Error(t, err, ErrNotFound)
	testutil.Error(t, s.Consume(ctx, "bad.name", "", handler))
	testutil.Error(t, s.Consume(ctx, "ok", "other.>", handler))
}

func testInvalidEventRejected(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("invalid")
	bad := events.New("e2", "", sess, t0, &events.Message{Item: "m2", Text: "no role"})
	out := "output of a rejected batch"
	_, err := s.Append(ctx, []events.Event{resultEvent("", sess, "e1", "c1", out), bad})
	testutil.Error(t, err)
	var ee *EventError
	testutil.True(t, errors.As(err, &ee), "not an *EventError: %v", err)
	testutil.Equal(t, ee.Index, 1)
	testutil.Equal(t, ee.ID, "e2")
	var fe *events.FieldError
	testutil.True(t, errors.As(err, &fe), "not a *events.FieldError: %v", err)
	testutil.Equal(t, fe.Field, "data.role")
	testutil.Contains(t, err.Error(), `"e2"`)

	got, err := s.ReadSession(ctx, "", sess)
	testutil.NoError(t, err)
	testutil.Equal(t, len(got), 0)
	// Validation comes before preparation: not even the valid event's
	// output reached the blob store.
	_, err = s.GetBlob(ctx, events.HashBytes([]byte(out)))
	testutil.Error(t, err, ErrNotFound)

	// Other envelope errors name their field too.
	cases := map[string]events.Event{
		"session": msgEvent("", "has.dot", "e1", "x"),
		"tenant":  msgEvent("a*b", sess, "e1", "x"),
		"id":      msgEvent("", sess, "", "x"),
		"time":    {V: 1, ID: "e1", Type: events.TypeMessage, Session: sess, Data: &events.Message{Item: "m", Role: events.RoleUser}},
	}
	for field, e := range cases {
		_, err := s.Append(ctx, []events.Event{e})
		testutil.True(t, errors.As(err, &fe) && fe.Field == field, "want field %q, got %v", field, err)
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
	testutil.NoError(t, err)
	got, err := s.ReadSession(ctx, "", a)
	testutil.NoError(t, err)
	testutil.Equal(t, ids(got), "a0,a1,a2,a3,a4,a5,a6,a7,a8,a9,am,aa")
	for _, e := range got {
		testutil.Equal(t, e.Session, a)
		testutil.Equal(t, e.TenantOrDefault(), events.DefaultTenant)
	}
	got, err = s.ReadSession(ctx, "other", a)
	testutil.NoError(t, err)
	testutil.Equal(t, len(got), 10)
	testutil.Equal(t, got[0].Tenant, "other")
}

func testReadAll(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s := openStore(t, nc, suiteConfig())
	sess := uniqueSession("all")
	stored, err := s.Append(ctx, sessionEvents("", sess))
	testutil.NoError(t, err)
	var seen []events.Event
	last, err := s.ReadAll(ctx, stored[0].Seq, func(e events.Event) error {
		if e.Session == sess {
			seen = append(seen, e)
		}
		return nil
	})
	testutil.NoError(t, err)
	testutil.True(t, last >= stored[len(stored)-1].Seq, "last %d before the batch end %d", last, stored[len(stored)-1].Seq)
	testutil.Equal(t, ids(seen), ids(stored))
	for i := 1; i < len(seen); i++ {
		testutil.True(t, seen[i].Seq > seen[i-1].Seq, "out of order")
	}

	// From the middle.
	seen = nil
	_, err = s.ReadAll(ctx, stored[2].Seq, func(e events.Event) error {
		if e.Session == sess {
			seen = append(seen, e)
		}
		return nil
	})
	testutil.NoError(t, err)
	testutil.Equal(t, ids(seen), "e3,e4,e5")

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
	testutil.Error(t, err, boom)
	testutil.Equal(t, stop, stored[0].Seq)

	// Past the end: nothing, no error.
	end, err := s.StreamLastSeq(ctx)
	testutil.NoError(t, err)
	called := false
	got, err := s.ReadAll(ctx, end+100, func(events.Event) error { called = true; return nil })
	testutil.NoError(t, err)
	testutil.True(t, !called && got == end, "past the end: called=%v last=%d end=%d", called, got, end)
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
	testutil.NoError(t, err)
	all, err := s.Sessions(ctx)
	testutil.NoError(t, err)
	var got []SessionRef
	for _, r := range all {
		if r.Tenant == want[0].Tenant || r.Tenant == want[2].Tenant {
			got = append(got, r)
		}
	}
	testutil.Equal(t, fmt.Sprint(got), fmt.Sprint(want))
	for i := 1; i < len(all); i++ {
		p, c := all[i-1], all[i]
		testutil.True(t, p.Tenant < c.Tenant || p.Tenant == c.Tenant && p.Session < c.Session, "not sorted: %v then %v", p, c)
	}
}

func testOpenIdempotent(t *testing.T, nc *nats.Conn) {
	ctx := testCtx(t)
	s1 := openStore(t, nc, suiteConfig())
	sess := uniqueSession("reopen")
	_, err := s1.Append(ctx, sessionEvents("", sess))
	testutil.NoError(t, err)
	// Reopening with a changed duplicates window updates the stream. (On a
	// shared server this briefly changes the window for everyone.)
	s2 := openStore(t, nc, Config{Duplicates: 5 * time.Minute})
	st, err := s2.JS().Stream(ctx, events.StreamName)
	testutil.NoError(t, err)
	info, err := st.Info(ctx)
	testutil.NoError(t, err)
	testutil.Equal(t, info.Config.Duplicates, 5*time.Minute)
	got, err := s2.ReadSession(ctx, "", sess)
	testutil.NoError(t, err)
	testutil.Equal(t, len(got), 5)

	_, err = Open(ctx, nc, Config{Replicas: 9, BlobBucket: "bad bucket"}, nil)
	testutil.Error(t, err)
	testutil.Contains(t, err.Error(), "replicas")
	testutil.Contains(t, err.Error(), "blob bucket")
}
