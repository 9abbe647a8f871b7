//go:build cluster

package service

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/pipeline"
)

// TestClusterRandomFailures imports the cluster test's sessions into a
// fresh three-node cluster and worker fleet (two eligibility workers, two
// schedulers, a projector, as separate processes) while, at points drawn
// from a seeded generator, one NATS server is shut down and one worker
// (of either kind) is SIGKILLed. Every view of every session must equal
// the embedded replay's byte for byte, with every mark and application
// stored once. The seed and the points are logged: a failure reproduces
// with the same seed.
func TestClusterRandomFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	input := clusterInput(t)
	want, embStore := embeddedViews(t, ctx, input)
	bin := buildBinary(t, ctx)
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			randomFailures(t, ctx, bin, seed, input, want, embStore)
		})
	}
	// Item 3 of issue 29: workers that compete are fine.
	t.Run("competing", func(t *testing.T) {
		competingWorkers(t, ctx, bin, input, want, embStore)
	})
}

// competingWorkers runs three eligibility workers and three schedulers,
// each its own process, on all partitions (pinned priority groups: one
// consumes a partition, the others stand by), with no failure: besides the
// views, each fact must be judged once, i.e. every mark and application
// in the log was published by exactly one process (the sum of their
// counters equals the log's count: a fact judged twice, by a standby that
// took a live worker's pin or got its facts redelivered, counts twice).
func competingWorkers(t *testing.T, ctx context.Context, bin string, input [][]events.Event, want map[string]map[string][]byte, embStore *store.Store) {
	_, urls, st := clusterStore(t, ctx)
	var workers []*worker
	for _, kind := range []string{"eligibility", "scheduler"} {
		for i := 1; i <= 3; i++ {
			// The defaults' pinned TTL and ack wait (the other cluster
			// tests shorten them for quick failovers).
			workers = append(workers, startWorker(t, bin, fmt.Sprintf("%s-%d", kind, i), kind, urls,
				"--pinned-ttl", "10s", "--ack-wait", "30s"))
		}
	}
	proj := startWorker(t, bin, "projector", "projector", urls)
	for _, b := range chunks(input, 6) {
		appendRetry(t, ctx, st, b)
	}
	projector := "http://" + proj.addr
	waitFleetIdle(t, ctx, st, projector)
	marks, apps := checkAgainstEmbedded(t, ctx, st, embStore, projector, want)
	published := map[string]float64{}
	for _, w := range workers {
		code, body := httpDo(t, "GET", "http://"+w.addr+"/metrics", nil)
		if code != 200 {
			t.Fatalf("%s /metrics: %d", w.name, code)
		}
		for _, line := range strings.Split(string(body), "\n") {
			for _, m := range []string{pipeline.MetricDecisions, pipeline.MetricApplications} {
				if rest, ok := strings.CutPrefix(line, m+"{"); ok {
					_, v, _ := strings.Cut(rest, "} ")
					n, err := strconv.ParseFloat(v, 64)
					if err != nil {
						t.Fatalf("%s: %q: %v", w.name, line, err)
					}
					published[m] += n
				}
			}
		}
	}
	if got := published[pipeline.MetricDecisions]; got != float64(marks) {
		t.Errorf("the eligibility workers published %v marks, the log holds %d: facts judged more than once", got, marks)
	}
	if got := published[pipeline.MetricApplications]; got != float64(apps) {
		t.Errorf("the schedulers published %v applications, the log holds %d: requests decided more than once", got, apps)
	}
}

func randomFailures(t *testing.T, ctx context.Context, bin string, seed uint64, input [][]events.Event, want map[string]map[string][]byte, embStore *store.Store) {
	rng := rand.New(rand.NewPCG(seed, seed))
	srvs, urls, st := clusterStore(t, ctx)
	workers := []*worker{
		startWorker(t, bin, "eligibility-1", "eligibility", urls),
		startWorker(t, bin, "eligibility-2", "eligibility", urls),
		startWorker(t, bin, "scheduler-1", "scheduler", urls),
		startWorker(t, bin, "scheduler-2", "scheduler", urls),
	}
	proj := startWorker(t, bin, "projector", "projector", urls)

	batches := chunks(input, 6)
	// Both failures fall within the import, neither on its first batch.
	downAt, killAt := 1+rng.IntN(len(batches)-1), 1+rng.IntN(len(batches)-1)
	downed, killed := srvs[rng.IntN(len(srvs))], workers[rng.IntN(len(workers))]
	t.Logf("seed %d: shut down %s before batch %d, SIGKILL %s before batch %d (of %d)",
		seed, downed.Name(), downAt, killed.name, killAt, len(batches))
	for i, b := range batches {
		if i == downAt {
			downed.Shutdown()
			downed.WaitForShutdown()
		}
		if i == killAt {
			killed.kill9(t)
		}
		appendRetry(t, ctx, st, b)
	}
	projector := "http://" + proj.addr
	waitFleetIdle(t, ctx, st, projector)
	checkAgainstEmbedded(t, ctx, st, embStore, projector, want)
}
