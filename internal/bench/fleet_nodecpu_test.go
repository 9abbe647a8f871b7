//go:build benchprof

package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
)

// TestFleetNodeCPU prices the requests a fleet makes of its nodes in the
// nodes' CPU: the fleet bench's three-node cluster, each node a process
// of its own (the prunesched binary named by PRUNESCHED_FLEET_BIN, as
// `bench --only fleet` starts them), and one store (R3, no blob cache)
// in this process making each kind of request 100 times, in rounds that
// alternate them (so a busy machine weighs on all alike): a read of a
// session's last fact at the stream's leader and by a direct get, a new
// output's put, and a stored output's read by the object store's own
// read (a consumer created and deleted per object) and by
// store.GetBlob. It logs wall time, the nodes' CPU (/proc, 10 ms ticks
// over 100 requests) and this process's per request; it asserts
// nothing.
//
//	go build -o /tmp/prunesched ./cmd/prunesched
//	PRUNESCHED_FLEET_BIN=/tmp/prunesched go test -tags benchprof -run TestFleetNodeCPU -v ./internal/bench/
func TestFleetNodeCPU(t *testing.T) {
	ctx := context.Background()
	r, nc := priceCluster(t)
	st, err := store.Open(ctx, nc, store.Config{Replicas: 3, BlobCacheBytes: -1, Tokens: quarterTokens{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := st.JS().ObjectStore(ctx, store.DefaultBlobBucket)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	output := func(round, i int) string {
		return strings.Repeat(fmt.Sprintf("round %d, line %d of an output\n", round, i), 200) // about 6 KB: one chunk
	}
	var stored []string
	for i := range n {
		data := output(-1, i)
		h := events.HashString(data)
		if err := st.PutBlobString(ctx, h, data); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, h)
	}
	time.Sleep(time.Second) // the puts' replication settles
	ops := []struct {
		name string
		do   func(round, i int) error
	}{
		{"last fact, leader", func(int, int) error {
			_, err := st.LastSeqLeader(ctx, events.DefaultTenant, "s", events.KindFact)
			return err
		}},
		{"last fact, direct", func(int, int) error {
			_, err := st.LastSeq(ctx, events.DefaultTenant, "s", events.KindFact)
			return err
		}},
		{"new output put", func(round, i int) error {
			data := output(round, i)
			return st.PutBlobString(ctx, events.HashString(data), data)
		}},
		{"read, object store", func(_, i int) error {
			_, err := obs.GetBytes(ctx, stored[i])
			return err
		}},
		{"read, GetBlob", func(_, i int) error {
			_, err := st.GetBlob(ctx, stored[i])
			return err
		}},
	}
	for round := range 3 {
		for _, op := range ops {
			cpu, nodes, start := processCPU(), r.nodesCPU(), time.Now()
			for i := range n {
				if err := op.do(round, i); err != nil {
					t.Fatalf("%s: %v", op.name, err)
				}
			}
			wall := time.Since(start)
			// What the requests leave the nodes to do (a consumer's
			// deletion, state flushes) counts too, and so does the
			// nodes' idle work in that half second (about 0.2 ms a
			// request here).
			time.Sleep(500 * time.Millisecond)
			t.Logf("round %d, %-19s per request: wall %v, nodes' CPU %v, this process %v", round, op.name, wall/n, (r.nodesCPU()-nodes)/n, (processCPU()-cpu)/n)
		}
	}
}

// quarterTokens counts a token per four bytes: the store needs a counter,
// and this test counts nothing it reports.
type quarterTokens struct{}

func (quarterTokens) Count(s string) int { return len(s) / 4 }

// fleetNodeArgv is the command that runs one node of the fleet bench's
// cluster for the pricing tests: the prunesched binary named by
// PRUNESCHED_FLEET_BIN. Without one the test is skipped.
func fleetNodeArgv(t *testing.T) []string {
	t.Helper()
	bin := os.Getenv("PRUNESCHED_FLEET_BIN")
	if bin == "" {
		t.Skip("PRUNESCHED_FLEET_BIN names no prunesched binary to run the nodes")
	}
	return []string{bin, "bench", "--fleet-node"}
}

// priceCluster starts the fleet bench's three-node cluster, each node a
// process of its own, and connects to it; both end with the test.
func priceCluster(t *testing.T) (*fleetBench, *nats.Conn) {
	t.Helper()
	argv := fleetNodeArgv(t)
	r := &fleetBench{dir: t.TempDir()}
	t.Cleanup(r.close)
	url, err := r.startCluster(context.Background(), argv)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return r, nc
}
