//go:build benchprof

package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestFleetConsumerCPU prices a worker's durable consumer in the nodes'
// CPU, on the fleet bench's three-node cluster (each node a process of
// its own, PRUNESCHED_FLEET_BIN as for TestFleetNodeCPU): requests of
// five events published at once (as a request's atomic batch), paced at
// 100 ms, on an R3 stream, with no consumer, with one durable consumer
// in each of several shapes, and with four ordered consumers (the
// projection and three proxies' tails), in rounds that alternate them
// (so a busy machine weighs on all alike). The durable shapes:
// acknowledging every event explicitly (the workers' way today: each
// event acknowledged, the last of a burst confirmed), AckAll with only
// the last event of a burst acknowledged (one ack proposal per burst
// instead of five), and the explicit way on a consumer in memory and on
// an R1 consumer (no state files; no Raft group). It logs the nodes' CPU
// per request; it asserts nothing.
//
//	go build -o /tmp/prunesched ./cmd/prunesched
//	PRUNESCHED_FLEET_BIN=/tmp/prunesched go test -tags benchprof -run TestFleetConsumerCPU -v ./internal/bench/
func TestFleetConsumerCPU(t *testing.T) {
	ctx := context.Background()
	r, nc := priceCluster(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const (
		n     = 60 // requests per shape and round
		burst = 5  // events per request
		gap   = 100 * time.Millisecond
	)
	durable := func(cfg jetstream.ConsumerConfig) jetstream.ConsumerConfig {
		cfg.Durable, cfg.MaxAckPending = "d", 1024 // the zero AckPolicy is explicit
		return cfg
	}
	shapes := []struct {
		name    string
		cfg     *jetstream.ConsumerConfig // nil: no durable
		ackAll  bool
		ordered int
	}{
		{name: "no consumer"},
		{name: "explicit, each", cfg: &jetstream.ConsumerConfig{}},
		{name: "all, last of burst", cfg: &jetstream.ConsumerConfig{AckPolicy: jetstream.AckAllPolicy}, ackAll: true},
		{name: "explicit, in memory", cfg: &jetstream.ConsumerConfig{MemoryStorage: true}},
		{name: "explicit, R1", cfg: &jetstream.ConsumerConfig{Replicas: 1}},
		{name: "4 ordered consumers", ordered: 4},
	}
	for round := range 3 {
		for si, sh := range shapes {
			name := fmt.Sprintf("PRICE%d%d", round, si)
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Replicas: 3}); err != nil {
				t.Fatal(err)
			}
			got := make(chan struct{}, (1+n*burst)*max(sh.ordered, 1))
			var ccs []jetstream.ConsumeContext
			consume := func(c jetstream.Consumer, fn func(jetstream.Msg)) {
				cc, err := c.Consume(func(m jetstream.Msg) {
					fn(m)
					got <- struct{}{}
				})
				if err != nil {
					t.Fatal(err)
				}
				ccs = append(ccs, cc)
			}
			for range sh.ordered {
				oc, err := js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{})
				if err != nil {
					t.Fatal(err)
				}
				consume(oc, func(jetstream.Msg) {})
			}
			if sh.cfg != nil {
				cons, err := js.CreateOrUpdateConsumer(ctx, name, durable(*sh.cfg))
				if err != nil {
					t.Fatal(err)
				}
				i := 0
				consume(cons, func(m jetstream.Msg) {
					// The first event is the warm-up, then bursts.
					last := i%burst == 0
					i++
					switch {
					case last:
						_ = m.DoubleAck(ctx)
					case !sh.ackAll:
						_ = m.Ack()
					}
				})
			}
			want := max(sh.ordered, 1)
			if sh.cfg == nil && sh.ordered == 0 {
				want = 0
			}
			// A warm-up event: the consumers are running before the count.
			if _, err := js.Publish(ctx, name+".warm", nil); err != nil {
				t.Fatal(err)
			}
			for range want {
				<-got
			}
			time.Sleep(500 * time.Millisecond)
			nodes, start := r.nodesCPU(), time.Now()
			for i := range n {
				for j := range burst {
					if _, err := js.PublishAsync(fmt.Sprintf("%s.s%d", name, i%8), fmt.Appendf(nil, "event %d %d", i, j)); err != nil {
						t.Fatal(err)
					}
				}
				<-js.PublishAsyncComplete()
				time.Sleep(gap)
			}
			for range want * n * burst {
				<-got
			}
			// What the events leave the nodes to do (state flushes)
			// counts too.
			time.Sleep(500 * time.Millisecond)
			t.Logf("round %d, %-20s per request: nodes' CPU %v (wall %v)", round, sh.name, (r.nodesCPU()-nodes)/n, time.Since(start)/n)
			for _, cc := range ccs {
				cc.Stop()
			}
			if err := js.DeleteStream(ctx, name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFleetIdleCPU logs the nodes' CPU per second of the fleet bench's
// whole rig (the three nodes as processes, the workers, three proxies)
// with no agent sending: the part of a step's CPU per request that is
// not the requests'. It asserts nothing.
//
//	PRUNESCHED_FLEET_BIN=/tmp/prunesched go test -tags benchprof -run TestFleetIdleCPU -v ./internal/bench/
func TestFleetIdleCPU(t *testing.T) {
	ctx := context.Background()
	b := newRunner(Config{TempDir: t.TempDir(), FleetNode: fleetNodeArgv(t)}, fleetPolicy(t), &Result{})
	rig, err := b.startFleetRig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rig.close()
	time.Sleep(2 * time.Second)
	for range 3 {
		nodes := rig.nodesCPU()
		time.Sleep(3 * time.Second)
		t.Logf("idle: nodes' CPU %v a second", (rig.nodesCPU()-nodes)/3)
	}
}
