package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/permtest"
	"github.com/prunesched/prunesched/internal/testutil"
)

// TestConcurrentPutSameBlob: two processes (two service connections, as
// two proxies) store the same output at once, both having looked it up
// absent: the second put settles as soon as its description is refused
// (the first's names the same content), without purging anything (which
// the service user may not do: the put would wait for an answer that
// never comes), and the output reads back whole from a third store. One
// chunk and several.
func TestConcurrentPutSameBlob(t *testing.T) {
	t.Parallel()
	ctx, e := serviceServer(t)
	for _, size := range []int{4000, 3*blobChunkSize + 5} {
		data := outputOf(size)
		h := events.HashBytes(data)
		a, b := services(t, e, "proxy-a"), services(t, e, "proxy-b")
		var bErr error
		a.s.beforePut = func() {
			// b stores it between a's look-up and a's put.
			bErr = b.s.PutBlob(ctx, h, data)
		}
		done := make(chan error, 1)
		go func() { done <- a.s.PutBlob(ctx, h, data) }()
		select {
		case err := <-done:
			testutil.NoError(t, err)
			testutil.NoError(t, bErr)
		case err := <-a.viol:
			t.Fatalf("%d bytes: the second put was refused: %v", size, err)
		}
		select {
		case err := <-a.viol:
			t.Fatalf("%d bytes: the second put was refused: %v", size, err)
		case err := <-b.viol:
			t.Fatalf("%d bytes: the first put was refused: %v", size, err)
		default:
		}
		r := services(t, e, "reader")
		got, err := r.s.GetBlob(ctx, h)
		testutil.NoError(t, err)
		testutil.True(t, bytes.Equal(got, data), "%d bytes: read back differs", size)
	}
}

// TestConcurrentPutsSettle: three processes store the same outputs at
// the same moment; every put succeeds, none is refused a permission, and
// each output reads back whole.
func TestConcurrentPutsSettle(t *testing.T) {
	t.Parallel()
	ctx, e := serviceServer(t)
	stores := []serviceStore{services(t, e, "p1"), services(t, e, "p2"), services(t, e, "p3")}
	for _, size := range []int{100, blobChunkSize + 1} {
		data := outputOf(size)
		h := events.HashBytes(data)
		start := make(chan struct{})
		errs := make(chan error, len(stores))
		for _, st := range stores {
			go func() {
				<-start
				errs <- st.s.PutBlob(ctx, h, data)
			}()
		}
		close(start)
		for range stores {
			select {
			case err := <-errs:
				testutil.NoError(t, err)
			case err := <-stores[0].viol:
				t.Fatalf("%d bytes: a put was refused: %v", size, err)
			case err := <-stores[1].viol:
				t.Fatalf("%d bytes: a put was refused: %v", size, err)
			case err := <-stores[2].viol:
				t.Fatalf("%d bytes: a put was refused: %v", size, err)
			}
		}
		got, err := services(t, e, "reader").s.GetBlob(ctx, h)
		testutil.NoError(t, err)
		testutil.True(t, bytes.Equal(got, data), "%d bytes: read back differs", size)
	}
}

// serviceStore is a store on a service connection of its own, with the
// connection's permission violations.
type serviceStore struct {
	s    *Store
	viol <-chan error
}

// services opens a store on a new service connection to e.
func services(t *testing.T, e *Embedded, name string) serviceStore {
	t.Helper()
	onErr, viol := permtest.Violations()
	nc, err := e.Connect(name, onErr)
	testutil.NoError(t, err)
	t.Cleanup(nc.Close)
	return serviceStore{s: openStore(t, nc, Config{}), viol: viol}
}

// serviceServer starts an embedded server whose store an admin created
// (as the service starts it), with a context bounding the test.
func serviceServer(t *testing.T) (context.Context, *Embedded) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e := startEmbedded(t, "", false)
	openStore(t, connectAdmin(t, e), Config{})
	return ctx, e
}

// outputOf is a tool output of size bytes no other test stores.
func outputOf(size int) []byte {
	line := uniqueSession("output") + " line\n"
	return []byte(strings.Repeat(line, size/len(line)+1)[:size])
}

// TestClaimPartitionShape: service processes claiming one partition's
// shape at once, with different proposals, all read the one that won;
// a claimed partition does not ask for a proposal again; and another
// partition is claimed on its own.
func TestClaimPartitionShape(t *testing.T) {
	t.Parallel()
	ctx, e := serviceServer(t)
	stores := []serviceStore{services(t, e, "p1"), services(t, e, "p2"), services(t, e, "p3")}
	start := make(chan struct{})
	got := make(chan string, len(stores))
	for i, st := range stores {
		go func() {
			<-start
			shape, err := st.s.ClaimPartitionShape(ctx, 0, func(context.Context) (string, error) {
				return fmt.Sprintf("shape-%d", i), nil
			})
			if err != nil {
				shape = "error: " + err.Error()
			}
			got <- shape
		}()
	}
	close(start)
	won := <-got
	testutil.True(t, strings.HasPrefix(won, "shape-"), "claim: %s", won)
	for range len(stores) - 1 {
		testutil.Equal(t, <-got, won)
	}
	again, err := stores[0].s.ClaimPartitionShape(ctx, 0, func(context.Context) (string, error) {
		return "", errors.New("asked for a proposal on a claimed partition")
	})
	testutil.NoError(t, err)
	testutil.Equal(t, again, won)
	other, err := stores[1].s.ClaimPartitionShape(ctx, 1, func(context.Context) (string, error) { return "other", nil })
	testutil.NoError(t, err)
	testutil.Equal(t, other, "other")
	for _, st := range stores {
		select {
		case err := <-st.viol:
			t.Errorf("a claim was refused: %v", err)
		default:
		}
	}
}
