package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
)

// shortDupConfig shrinks the server's duplicate window to its minimum so a
// test can outlive it.
func shortDupConfig() Config {
	cfg := suiteConfig()
	cfg.Duplicates = 100 * time.Millisecond
	return cfg
}

// outliveDupWindow lets the server's duplicate window (100ms) lapse. It is
// not synchronisation: the store must behave the same however long it waits.
func outliveDupWindow() { time.Sleep(300 * time.Millisecond) }

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
	require_NoError(t, err)
	outliveDupWindow()
	again, err := s.Append(ctx, sessionEvents("", sess))
	require_NoError(t, err)
	for i := range first {
		require_Equal(t, again[i].Seq, first[i].Seq)
	}
	// A batch mixing old and new events stores only the new ones.
	outliveDupWindow()
	mixed := append(sessionEvents("", sess), msgEvent("", sess, "e6", "one more"))
	got, err := s.Append(ctx, mixed)
	require_NoError(t, err)
	require_True(t, got[5].Seq > first[4].Seq, "new event not stored: %+v", got[5])
	all, err := s.ReadSession(ctx, "", sess)
	require_NoError(t, err)
	require_Equal(t, ids(all), "e1,e2,e3,e4,e5,e6")
	// A second Store (another process, or a restart) knows them too.
	s2 := openStore(t, s.nc, cfg)
	outliveDupWindow()
	_, err = s2.Append(ctx, mixed)
	require_NoError(t, err)
	all, err = s.ReadSession(ctx, "", sess)
	require_NoError(t, err)
	require_Equal(t, ids(all), "e1,e2,e3,e4,e5,e6")
	if sole {
		return
	}
	// A fact another writer appended is known to s, whose cache predates it.
	f7 := msgEvent("", sess, "e7", "from the other writer")
	_, err = s2.Append(ctx, []events.Event{f7})
	require_NoError(t, err)
	outliveDupWindow()
	_, err = s.Append(ctx, []events.Event{f7})
	require_NoError(t, err)
	_, err = s.Append(ctx, []events.Event{msgEvent("", sess, "e7", "changed")})
	require_Error(t, err, ErrIDConflict)
	all, err = s.ReadSession(ctx, "", sess)
	require_NoError(t, err)
	require_Equal(t, ids(all), "e1,e2,e3,e4,e5,e6,e7")
}

// TestSameIDDifferentContentConflicts: an id already stored with other
// content is an error wrapping ErrConflict that names the id, inside and
// outside the duplicate window, and nothing of the batch is stored.
func TestSameIDDifferentContentConflicts(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), shortDupConfig())
	sess := uniqueSession("conflict")
	_, err := s.Append(ctx, sessionEvents("", sess))
	require_NoError(t, err)
	for _, wait := range []bool{false, true} {
		if wait {
			outliveDupWindow()
		}
		batch := []events.Event{
			msgEvent("", sess, "n1", "new before"),
			msgEvent("", sess, "e2", "not what e2 said"),
			msgEvent("", sess, "n2", "new after"),
		}
		_, err = s.Append(ctx, batch)
		require_Error(t, err, ErrIDConflict)
		require_Contains(t, err.Error(), `"e2"`)
		var ee *EventError
		require_True(t, errors.As(err, &ee) && ee.Index == 1, "error does not name event 1: %v", err)
		all, err := s.ReadSession(ctx, "", sess)
		require_NoError(t, err)
		require_Equal(t, ids(all), "e1,e2,e3,e4,e5")
	}
	// Within one batch too.
	_, err = s.Append(ctx, []events.Event{msgEvent("", sess, "x1", "a"), msgEvent("", sess, "x1", "b")})
	require_Error(t, err, ErrIDConflict)
	require_True(t, strings.Contains(err.Error(), `"x1"`), "error does not name x1: %v", err)
}
