package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

// shortDupConfig shrinks the server's duplicate window to its minimum so a
// test can outlive it.
func shortDupConfig() Config {
	cfg := suiteConfig()
	cfg.Duplicates = 100 * time.Millisecond
	return cfg
}

// errCodeWrongLastMsgID is the server's JSStreamWrongLastMsgIDErrF.
const errCodeWrongLastMsgID jetstream.ErrorCode = 10070

// outliveDupWindow waits until the server has forgotten the message ids of
// evs: its duplicate window (shortDupConfig's 100ms) has lapsed for them.
//
// It asks the server itself. A probe publish carries an event's message id
// and expects a last message id no stream ever has: while the server still
// remembers the id it acks the probe as a duplicate; once it has forgotten
// it, the probe fails the expectation (checked after the duplicate check)
// and nothing is stored.
func outliveDupWindow(t *testing.T, s *Store, evs []events.Event) {
	t.Helper()
	ctx := testCtx(t)
	testutil.Eventually(t, func() error {
		for _, e := range evs {
			subj, err := s.sessionSubject(e.TenantOrDefault(), e.Session, events.KindFact)
			if err != nil {
				return err
			}
			ack, err := s.js.Publish(ctx, subj, nil,
				jetstream.WithMsgID(events.MsgID(e)),
				jetstream.WithExpectLastMsgID("prunesched-test-no-such-id"))
			var apiErr *jetstream.APIError
			switch {
			case err == nil && ack.Duplicate:
				return fmt.Errorf("the server still remembers %s", e.ID)
			case errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeWrongLastMsgID:
				// Forgotten: the probe got past the duplicate check.
			default:
				return fmt.Errorf("probe %s: ack %+v, err %w (it must not be stored)", e.ID, ack, err)
			}
		}
		return nil
	})
}

// TestReimportAfterDuplicateWindowStoresNothing: re-appending the same
// session after the server's duplicate window stores nothing new and
// returns the sequences of the copies already stored.
func TestReimportAfterDuplicateWindowStoresNothing(t *testing.T) {
	for _, sole := range []bool{false, true} {
		t.Run(fmt.Sprintf("sole_writer=%v", sole), func(t *testing.T) {
			t.Parallel()
			testReimport(t, sole)
		})
	}
}

func testReimport(t *testing.T, sole bool) {
	ctx := testCtx(t)
	cfg := shortDupConfig()
	cfg.SoleWriter = sole
	s := openStore(t, connectEmbedded(t), cfg)
	sess := uniqueSession("reimport")
	first, err := s.Append(ctx, sessionEvents("", sess))
	testutil.NoError(t, err)
	outliveDupWindow(t, s, sessionEvents("", sess))
	again, err := s.Append(ctx, sessionEvents("", sess))
	testutil.NoError(t, err)
	for i := range first {
		testutil.Equal(t, again[i].Seq, first[i].Seq)
	}
	// A batch mixing old and new events stores only the new ones.
	outliveDupWindow(t, s, sessionEvents("", sess))
	mixed := append(sessionEvents("", sess), msgEvent("", sess, "e6", "one more"))
	got, err := s.Append(ctx, mixed)
	testutil.NoError(t, err)
	testutil.True(t, got[5].Seq > first[4].Seq, "new event not stored: %+v", got[5])
	all, err := s.ReadSession(ctx, "", sess)
	testutil.NoError(t, err)
	testutil.Equal(t, ids(all), "e1,e2,e3,e4,e5,e6")
	// A second Store (another process, or a restart) knows them too.
	s2 := openStore(t, s.nc, cfg)
	outliveDupWindow(t, s, mixed)
	_, err = s2.Append(ctx, mixed)
	testutil.NoError(t, err)
	all, err = s.ReadSession(ctx, "", sess)
	testutil.NoError(t, err)
	testutil.Equal(t, ids(all), "e1,e2,e3,e4,e5,e6")
	if sole {
		return
	}
	// A fact another writer appended is known to s, whose cache predates it.
	f7 := msgEvent("", sess, "e7", "from the other writer")
	_, err = s2.Append(ctx, []events.Event{f7})
	testutil.NoError(t, err)
	outliveDupWindow(t, s, []events.Event{f7})
	_, err = s.Append(ctx, []events.Event{f7})
	testutil.NoError(t, err)
	_, err = s.Append(ctx, []events.Event{msgEvent("", sess, "e7", "changed")})
	testutil.Error(t, err, ErrIDConflict)
	all, err = s.ReadSession(ctx, "", sess)
	testutil.NoError(t, err)
	testutil.Equal(t, ids(all), "e1,e2,e3,e4,e5,e6,e7")
}

// TestSameIDDifferentContentConflicts: an id already stored with other
// content is an error wrapping ErrConflict that names the id, inside and
// outside the duplicate window, and nothing of the batch is stored.
func TestSameIDDifferentContentConflicts(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), shortDupConfig())
	sess := uniqueSession("conflict")
	_, err := s.Append(ctx, sessionEvents("", sess))
	testutil.NoError(t, err)
	for _, wait := range []bool{false, true} {
		if wait {
			outliveDupWindow(t, s, sessionEvents("", sess))
		}
		batch := []events.Event{
			msgEvent("", sess, "n1", "new before"),
			msgEvent("", sess, "e2", "not what e2 said"),
			msgEvent("", sess, "n2", "new after"),
		}
		_, err = s.Append(ctx, batch)
		testutil.Error(t, err, ErrIDConflict)
		testutil.Contains(t, err.Error(), `"e2"`)
		var ee *EventError
		testutil.True(t, errors.As(err, &ee) && ee.Index == 1, "error does not name event 1: %v", err)
		all, err := s.ReadSession(ctx, "", sess)
		testutil.NoError(t, err)
		testutil.Equal(t, ids(all), "e1,e2,e3,e4,e5")
	}
	// Within one batch too.
	_, err = s.Append(ctx, []events.Event{msgEvent("", sess, "x1", "a"), msgEvent("", sess, "x1", "b")})
	testutil.Error(t, err, ErrIDConflict)
	testutil.True(t, strings.Contains(err.Error(), `"x1"`), "error does not name x1: %v", err)
}
