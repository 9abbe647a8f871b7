package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	dto "github.com/prometheus/client_model/go"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/internal/bench/replay"
	rssmeter "github.com/prunesched/prunesched/internal/bench/rss"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/internal/jsask"
	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/pipeline"
	"github.com/prunesched/prunesched/proxy"
)

// FleetRow is one load step of the fleet section: K agents on three
// proxies (Config.Fleet) over a three-node JetStream cluster, every node
// in this process.
type FleetRow struct {
	// Agents is K: simulated agents, each replaying a real request
	// sequence in its own session, its requests spread round robin over
	// the proxies (no session affinity).
	Agents   int `json:"agents"`
	Requests int `json:"requests"`
	// AddedP50Ms and AddedP99Ms are the time the proxies spent on a
	// request before forwarding it (prunesched_proxy_added_seconds, all
	// three proxies, interpolated within its buckets).
	AddedP50Ms float64 `json:"added_p50_ms"`
	AddedP99Ms float64 `json:"added_p99_ms"`
	// FailOpenPct is the share of requests forwarded unchanged.
	FailOpenPct float64 `json:"fail_open_pct"`
	// EventsPerS is the log's events (facts, marks, applications) per
	// second of the step's wall time; FactsPerS the facts alone.
	EventsPerS float64 `json:"events_per_s"`
	FactsPerS  float64 `json:"facts_per_s"`
	// RequestsPerS is the requests per second of the step's wall time.
	RequestsPerS float64 `json:"requests_per_s"`
	// RSSMB is the bench process's resident memory at the step's end:
	// the workers, the proxies, the fake upstream and the agents, and the
	// three nodes too when they run in this process (NodePeakRSSMB empty).
	RSSMB float64 `json:"rss_mb"`
	// NodePeakRSSMB is each node's peak resident memory so far (VmHWM),
	// when the nodes run as processes of their own (Config.FleetNode).
	NodePeakRSSMB []float64 `json:"node_peak_rss_mb,omitempty"`
	// StageMeanMs is the mean time of each proxy stage, the three proxies
	// together: proxy.LatencyStages and proxy.FleetStages.
	StageMeanMs map[string]float64 `json:"stage_mean_ms"`
	// StageP99Ms is each stage's p99 (interpolated within its buckets)
	// and StageCount how many times it ran, the three proxies together.
	StageP99Ms map[string]float64 `json:"stage_p99_ms"`
	StageCount map[string]int     `json:"stage_count"`
	// Rebuilds is how many times a proxy read a whole session (the first
	// request of a session it had not met yet, or after a lost race);
	// Races how many requests lost a race and were decided again.
	Rebuilds int `json:"rebuilds"`
	Races    int `json:"races"`
	// PublishFirst is how many requests published their facts before
	// forwarding (another request of the session in flight); Unrecorded
	// how many lost a race after forwarding and were recorded as failed
	// open (proxy/fleet.go, rule 2).
	PublishFirst int `json:"publish_first"`
	Unrecorded   int `json:"unrecorded"`
	// CatchUps is how many requests found the session extended by other
	// proxies; Tailed how many of those took it from the proxy's tail of
	// the log instead of reading the log.
	CatchUps int `json:"catch_ups"`
	Tailed   int `json:"tailed"`
	// Advances is how many times a proxy fed a session's state what
	// other proxies appended from its tail between the session's
	// requests (proxy/fleet.go, advance).
	Advances int `json:"advances"`
	// NodeCPUMsPerRequest is the CPU time (user and system) the three
	// nodes spent over the step, per request, when they run as
	// processes of their own; ProcessCPUMsPerRequest the bench
	// process's (proxies, workers, upstream, agents).
	NodeCPUMsPerRequest    float64 `json:"node_cpu_ms_per_request,omitempty"`
	ProcessCPUMsPerRequest float64 `json:"process_cpu_ms_per_request"`
	// NATSPerRequest is the step's NATS messages per request by kind,
	// when counted (PRUNESCHED_LOAD_NATS).
	NATSPerRequest string `json:"nats_per_request,omitempty"`
	// OK says the step met the goals: added p99 <= 10 ms, < 1% failing
	// open.
	OK bool `json:"ok"`
}

// DefaultFleetSpeedup divides the recorded gaps between an agent's
// requests in the fleet bench (Config.FleetSpeedup): the Claude Code
// traces' median gap of about 8 s becomes about 160 ms.
const DefaultFleetSpeedup = 50

// fleetMaxGap caps a recorded gap between two requests before the speed-up:
// a user away for hours adds idle time, not load.
const fleetMaxGap = 2 * time.Minute

// fleetNoTimeGap stands for a gap the trace does not record (a turn
// without a time): about the traces' median.
const fleetNoTimeGap = 8 * time.Second

// fleetGaps are the pauses before each turn of a sequence after the first:
// the recorded gaps (capped at fleetMaxGap) divided by speedup; none when
// speedup is 0 (back to back).
func fleetGaps(turns []replay.Turn, speedup float64) []time.Duration {
	gaps := make([]time.Duration, len(turns))
	if speedup <= 0 {
		return gaps
	}
	for j := 1; j < len(turns); j++ {
		g := fleetNoTimeGap
		if a, b := turns[j-1].At, turns[j].At; !a.IsZero() && !b.IsZero() {
			g = min(max(b.Sub(a), 0), fleetMaxGap)
		}
		gaps[j] = time.Duration(float64(g) / speedup)
	}
	return gaps
}

// fleet measures a fleet: K agents replaying the traces' request
// sequences through three --fleet proxies on a three-node cluster, K
// doubling until the added p99 passes 10 ms or 1% of requests fail open.
func (b *runner) fleet(ctx context.Context) error {
	if len(b.cfg.Traces) == 0 {
		return fmt.Errorf("no traces to replay (see --traces)")
	}
	limit := b.pick(24, 12) // requests per agent
	var seqs [][]replay.Turn
	for _, path := range b.cfg.Traces {
		sessions, err := importers.Import(path, importers.FormatAuto)
		if err != nil {
			return fmt.Errorf("fleet: %w", err)
		}
		for _, s := range sessions {
			if apis := replayShapes(s.Format); len(apis) > 0 && apis[0] == replay.Anthropic {
				turns := replay.FromEvents(s.Events).Build(replay.Anthropic, false)
				if len(turns) > limit {
					turns = turns[:limit]
				}
				if len(turns) > 0 {
					seqs = append(seqs, turns)
				}
			}
		}
	}
	if len(seqs) == 0 {
		return fmt.Errorf("fleet: no Claude Code sequence in the traces")
	}
	speedup := b.cfg.FleetSpeedup
	if speedup == 0 {
		speedup = DefaultFleetSpeedup
	}
	if b.cfg.Smoke {
		speedup = -1 // back to back: the tiny traces' gaps are minutes
	}
	b.res.FleetSpeedup = max(speedup, 0)
	var gaps [][]time.Duration
	var recorded time.Duration
	for _, t := range seqs {
		g := fleetGaps(t, speedup)
		gaps = append(gaps, g)
		for _, d := range g {
			recorded += d
		}
	}
	rig, err := b.startFleetRig(ctx)
	if err != nil {
		return err
	}
	defer rig.close()
	rig.gaps = gaps
	// The upstream thinks as proxy-replay's does (Config.Think): a fleet
	// proxy publishes a request's facts while it waits (proxy/fleet.go).
	rig.up.prepare(b.cfg.Think, map[string]replay.Turn{})
	b.progress("fleet: the fake upstream waits %s before answering", b.cfg.Think)
	if speedup > 0 {
		b.progress("fleet: each agent paced at its trace's recorded gaps (capped at %s) / %g; mean paced gap %s", fleetMaxGap, speedup, (recorded / time.Duration(max(1, countTurns(seqs)-len(seqs)))).Round(time.Millisecond))
	}
	maxK := b.pick(192, 48)
	// One agent (its requests still alternate over the three proxies),
	// then three, then doubling while the goals hold; 1 and 3 always run
	// (3 alone in smoke runs).
	first := 1
	if b.cfg.Smoke {
		first = 3
	}
	for k := first; k <= maxK || k <= 3; k = max(3, 2*k) {
		row, err := rig.step(ctx, k, seqs)
		if err != nil {
			return err
		}
		b.res.Fleet = append(b.res.Fleet, row)
		b.progress("fleet: %d agents: %d requests, added p50 %.2f ms p99 %.2f ms, %.2f%% failed open, %.1f requests/s, %.0f facts/s (%.0f events/s), RSS %.0f MB (this process), nodes' peak RSS %s; CPU per request: nodes %.2f ms, this process %.2f ms; %d session reads, %d catch-ups (%d from the tail), %d advances from the tail, %d races, %d published first, %d unrecorded; stage means ms: %s; fleet stages (mean / p99 ms, times): %s",
			row.Agents, row.Requests, row.AddedP50Ms, row.AddedP99Ms, row.FailOpenPct, row.RequestsPerS, row.FactsPerS, row.EventsPerS, row.RSSMB, nodeRSS(row.NodePeakRSSMB), row.NodeCPUMsPerRequest, row.ProcessCPUMsPerRequest, row.Rebuilds, row.CatchUps, row.Tailed, row.Advances, row.Races, row.PublishFirst, row.Unrecorded,
			stageSummary(row.StageMeanMs), fleetStageSummary(row))
		if row.NATSPerRequest != "" {
			b.progress("fleet: %d agents: NATS messages per request: %s", row.Agents, row.NATSPerRequest)
		}
		if !row.OK && k >= 3 {
			break
		}
	}
	return nil
}

// countTurns is the number of turns of all sequences.
func countTurns(seqs [][]replay.Turn) int {
	n := 0
	for _, t := range seqs {
		n += len(t)
	}
	return n
}

// nodeRSS prints the nodes' peak RSS, or says they share this process.
func nodeRSS(mb []float64) string {
	if len(mb) == 0 {
		return "n/a (nodes in this process)"
	}
	var parts []string
	for _, v := range mb {
		parts = append(parts, fmt.Sprintf("%.0f MB", v))
	}
	return strings.Join(parts, ", ")
}

// fleetStageSummary prints the fleet stages' means, p99s and counts in
// proxy.FleetStages order.
func fleetStageSummary(row FleetRow) string {
	var parts []string
	for _, s := range proxy.FleetStages {
		if v, ok := row.StageMeanMs[s]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f / %.2f (%d)", s, v, row.StageP99Ms[s], row.StageCount[s]))
		}
	}
	return strings.Join(parts, ", ")
}

// fleetBench is the fleet bench's cluster, workers, proxies and upstream.
type fleetBench struct {
	dir  string
	srvs []*server.Server
	// nodes are the nodes when they run as processes of their own
	// (srvs is then empty).
	nodes []*nodeProc
	// gaps are the pauses before each turn, per sequence (fleetGaps).
	gaps    [][]time.Duration
	svc     *service.Service
	conns   []*nats.Conn
	proxies []*proxy.Proxy
	regs    []*prometheus.Registry
	urls    []string
	servers []*http.Server
	client  *http.Client
	// up is the fake upstream (the proxy-replay section's): it answers
	// each turn by its key.
	up *peer
}

func (b *runner) startFleetRig(ctx context.Context) (*fleetBench, error) {
	dir, err := os.MkdirTemp(b.cfg.TempDir, "prunesched-fleet-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	r := &fleetBench{dir: dir, up: newPeer(),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}}
	natsURL, err := r.startCluster(ctx, b.cfg.FleetNode)
	if err != nil {
		r.close()
		return nil, err
	}
	r.svc, err = service.Start(ctx, service.Config{NATSURL: natsURL, Replicas: 3, Policy: b.pol, Logger: b.log})
	if err != nil {
		r.close()
		return nil, fmt.Errorf("fleet: start the workers: %w", err)
	}
	b.waitWorkers(ctx, r.svc.Store)
	up, err := r.serve(http.HandlerFunc(r.up.upstream), nil)
	if err != nil {
		r.close()
		return nil, err
	}
	key, err := proxy.NewIdentityKey()
	if err != nil {
		r.close()
		return nil, err
	}
	for range 3 {
		nc, err := nats.Connect(natsURL, nats.MaxReconnects(-1))
		if err != nil {
			r.close()
			return nil, fmt.Errorf("fleet: connect a proxy: %w", err)
		}
		r.conns = append(r.conns, nc)
		st, err := store.Open(ctx, nc, store.Config{Tokens: r.svc.Tokens, Replicas: 3}, b.log)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("fleet: a proxy's store: %w", err)
		}
		if err := proxy.JoinFleet(ctx, st.JS(), key, 3); err != nil {
			r.close()
			return nil, err
		}
		reg := prometheus.NewRegistry()
		px, err := proxy.New(proxy.Config{Upstream: up, Backend: service.NewProxyBackend(st, pipeline.New(st, b.pol, b.log, nil)),
			Fleet: true, IdentityKey: key, Policy: &b.pol, Registry: reg, Logger: b.log})
		if err != nil {
			r.close()
			return nil, err
		}
		r.proxies, r.regs = append(r.proxies, px), append(r.regs, reg)
		u, err := r.serve(px.Handler(), px.ConfigureServer)
		if err != nil {
			r.close()
			return nil, err
		}
		r.urls = append(r.urls, u)
	}
	return r, nil
}

// workersStart bounds how long the fleet bench waits for the workers
// to start (waitWorkers).
const workersStart = time.Minute

// waitWorkers waits until the workers consume every partition: each
// partition's shared durable is listed on the stream. They start in the
// background: each partition's shape claimed in a replicated key-value
// bucket, then its R3 durable created, each a proposal of the cluster's
// meta group that every node applies. Without the wait that start-up ran
// inside the first step (K = 1) and was priced as its requests' (its
// nodes' CPU per request and, in some runs, its slowest request).
//
// It lists the stream's consumers (the meta group's leader answers)
// rather than asking each durable for its state: that request goes to
// the durable's own leader and is not answered while its group elects
// one, which took over a minute under -race. A list left unanswered is
// asked again (missingConsumers). The bench measures; it does not check the
// workers: when they are not all listed within workersStart, it says so
// and goes on, the first step then pricing the rest of their start-up.
func (b *runner) waitWorkers(ctx context.Context, st *store.Store) {
	ctx, cancel := context.WithTimeout(ctx, workersStart)
	defer cancel()
	want := map[string]bool{}
	for p := range st.Partitions() {
		want[pipeline.DurableName(pipeline.DurableJudge, p)] = true
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		missing, err := missingConsumers(ctx, st, want)
		if err == nil && missing == 0 {
			return
		}
		select {
		case <-ctx.Done():
			b.progress("fleet: %d of the workers' %d durables not listed after %s (last error: %v); the first step includes the rest of their start-up", missing, len(want), workersStart, err)
			return
		case <-tick.C:
		}
	}
}

// missingConsumers counts the consumers in want that the event stream
// does not list. A list left unanswered is asked again, as the store's
// state requests are (jsask.Ask), until ctx ends.
func missingConsumers(ctx context.Context, st *store.Store, want map[string]bool) (int, error) {
	missing, err := jsask.Ask(ctx, store.DefaultRequestAgain, func(ctx context.Context) (int, error) {
		stream, err := st.JS().Stream(ctx, events.StreamName)
		if err != nil {
			return 0, fmt.Errorf("stream %s: %w", events.StreamName, err)
		}
		names := stream.ConsumerNames(ctx)
		missing := len(want)
		for name := range names.Name() {
			if want[name] {
				missing--
			}
		}
		if err := names.Err(); err != nil {
			return 0, fmt.Errorf("list consumers: %w", err)
		}
		return missing, nil
	})
	if err != nil {
		return len(want), err
	}
	return missing, nil
}

// startCluster starts three JetStream nodes routed on loopback, in this
// process or, with the command argv (Config.FleetNode), each as a
// process of its own, and returns their client URLs.
func (r *fleetBench) startCluster(ctx context.Context, argv []string) (string, error) {
	ports, clusterPorts := make([]int, 3), make([]int, 3)
	for i := range ports {
		for _, p := range []*int{&ports[i], &clusterPorts[i]} {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return "", fmt.Errorf("fleet: %w", err)
			}
			*p = ln.Addr().(*net.TCPAddr).Port
			ln.Close()
		}
	}
	var urls []string
	for _, p := range ports {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	natsURL := strings.Join(urls, ",")
	for _, spec := range nodeSpecs(r.dir, ports, clusterPorts) {
		if len(argv) > 0 {
			n, err := startNodeProc(ctx, argv, spec)
			if err != nil {
				return "", err
			}
			r.nodes = append(r.nodes, n)
			continue
		}
		srv, err := server.NewServer(nodeOptions(spec))
		if err != nil {
			return "", fmt.Errorf("fleet: node %s: %w", spec.Name, err)
		}
		srv.Start()
		r.srvs = append(r.srvs, srv)
	}
	for _, s := range r.srvs {
		if !s.ReadyForConnections(30 * time.Second) {
			return "", fmt.Errorf("fleet: node %s not ready", s.Name())
		}
	}
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return "", fmt.Errorf("fleet: connect to the cluster: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", fmt.Errorf("fleet: %w", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		// The account's JetStream answers once the nodes elected a meta
		// leader.
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.AccountInfo(actx)
		cancel()
		if err == nil {
			return natsURL, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", fmt.Errorf("%w: %v", errNoMetaLeader, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *fleetBench) serve(h http.Handler, setup func(*http.Server)) (string, error) {
	return serveLoopback(&r.servers, h, setup)
}

func (r *fleetBench) close() {
	for _, s := range r.servers {
		_ = s.Close()
	}
	for _, px := range r.proxies {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = px.Close(ctx)
		cancel()
	}
	for _, nc := range r.conns {
		nc.Close()
	}
	if r.svc != nil {
		r.svc.Close()
	}
	for _, s := range r.srvs {
		s.Shutdown()
		s.WaitForShutdown()
	}
	for _, n := range r.nodes {
		n.stop()
	}
	_ = os.RemoveAll(r.dir)
}

// step runs k agents, each replaying one sequence (cycled) in a session
// of its own, request j of agent i to proxy (i+j) mod 3.
func (r *fleetBench) step(ctx context.Context, k int, seqs [][]replay.Turn) (FleetRow, error) {
	before := r.snapshot()
	stBefore := r.stages()
	startSeq, err := r.svc.Store.StreamLastSeq(ctx)
	if err != nil {
		return FleetRow{}, err
	}
	startFacts, err := r.facts(ctx)
	if err != nil {
		return FleetRow{}, err
	}
	// With PRUNESCHED_LOAD_PROF set, the step's CPU profile and execution
	// trace of this process (proxies, workers, upstream, agents) go to
	// its fleet/ subdirectory (cpu-K.pprof, trace-K.out).
	// The nodes' profiles go there too (node-nI-K.pprof).
	stopProf := func() {}
	if dir := os.Getenv(loadProfEnv); dir != "" {
		if stopProf, err = startLoadProfile(filepath.Join(dir, "fleet"), k); err != nil {
			return FleetRow{}, err
		}
		for i, n := range r.nodes {
			if err := n.command(fmt.Sprintf("%s%s", nodeProfileCmd, filepath.Join(dir, "fleet", fmt.Sprintf("node-n%d-%d.pprof", i+1, k)))); err != nil {
				return FleetRow{}, err
			}
		}
	}
	// With PRUNESCHED_LOAD_NATS set, the step's NATS messages are counted
	// by kind (natsKind) and reported per request.
	var nc *natsCounter
	if os.Getenv(loadNATSEnv) != "" {
		if nc, err = countNATS(r.svc.Store.JS().Conn()); err != nil {
			return FleetRow{}, err
		}
		defer nc.stop()
	}
	cpuBefore, nodeCPUBefore := processCPU(), r.nodesCPU()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, k)
	for i := range k {
		wg.Go(func() {
			session := fmt.Sprintf("fleet-k%d-a%d", k, i)
			gaps := r.gaps[i%len(seqs)]
			// Agents start spread over their first gap, each request at
			// its paced time after the agent's first (at once when late).
			var first time.Duration
			if len(gaps) > 1 {
				first = gaps[1] * time.Duration(i) / time.Duration(k)
			}
			next := start.Add(first)
			for j, turn := range seqs[i%len(seqs)] {
				next = next.Add(gaps[j])
				select {
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				case <-time.After(time.Until(next)):
				}
				key := session + "/" + strconv.Itoa(j)
				r.up.mu.Lock()
				r.up.answers[key] = turn
				r.up.mu.Unlock()
				if err := postTurn(ctx, r.client, r.urls[(i+j)%len(r.urls)], replay.Anthropic, session, key, turn.Body); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(start).Seconds()
	cpu, nodeCPU := processCPU()-cpuBefore, r.nodesCPU()-nodeCPUBefore
	stopProf()
	if os.Getenv(loadProfEnv) != "" {
		for _, n := range r.nodes {
			if err := n.command(nodeProfileEnd); err != nil {
				return FleetRow{}, err
			}
		}
	}
	close(errs)
	if err := <-errs; err != nil {
		return FleetRow{}, fmt.Errorf("fleet: %w", err)
	}
	endSeq, err := r.svc.Store.StreamLastSeq(ctx)
	if err != nil {
		return FleetRow{}, err
	}
	endFacts, err := r.facts(ctx)
	if err != nil {
		return FleetRow{}, err
	}
	after := r.snapshot()
	row := FleetRow{Agents: k, Requests: int(after.requests - before.requests), RSSMB: float64(rss()) / (1 << 20),
		EventsPerS: float64(endSeq-startSeq) / wall, FactsPerS: float64(endFacts-startFacts) / wall,
		RequestsPerS: float64(after.requests-before.requests) / wall,
		Races:        int(after.races - before.races), CatchUps: int(after.catchUps - before.catchUps), Tailed: int(after.tailed - before.tailed),
		PublishFirst: int(after.first - before.first), Unrecorded: int(after.unrecorded - before.unrecorded),
		Advances: int(after.advances - before.advances)}
	for _, n := range r.nodes {
		peak, err := rssmeter.ReadPeakRSS(n.cmd.Process.Pid)
		if err != nil {
			return FleetRow{}, fmt.Errorf("fleet: %w", err)
		}
		row.NodePeakRSSMB = append(row.NodePeakRSSMB, float64(peak)/(1<<20))
	}
	row.AddedP50Ms = after.quantile(before, 0.50) * 1000
	row.AddedP99Ms = after.quantile(before, 0.99) * 1000
	if row.Requests > 0 {
		row.FailOpenPct = 100 * (after.failOpen - before.failOpen) / float64(row.Requests)
		row.ProcessCPUMsPerRequest = float64(cpu) / float64(time.Millisecond) / float64(row.Requests)
		if len(r.nodes) > 0 {
			row.NodeCPUMsPerRequest = float64(nodeCPU) / float64(time.Millisecond) / float64(row.Requests)
		}
	}
	row.OK = row.AddedP99Ms <= 10 && row.FailOpenPct < 1
	if nc != nil {
		// The log writes of the step's last requests settle first.
		time.Sleep(time.Second)
		row.NATSPerRequest = perRequest(nc.take(), row.Requests)
	}
	stAfter := r.stages()
	row.StageMeanMs = stAfter.meanSince(stBefore)
	row.StageP99Ms = stAfter.quantileSince(stBefore, 0.99)
	row.StageCount = stAfter.countSince(stBefore)
	row.Rebuilds = int(stAfter[proxy.StageRebuild].count - stBefore[proxy.StageRebuild].count)
	return row, nil
}

// nodesCPU is the CPU time the node processes spent so far (0 when the
// nodes run in this process).
func (r *fleetBench) nodesCPU() time.Duration {
	var d time.Duration
	for _, n := range r.nodes {
		d += n.cpu()
	}
	return d
}

// stages is the three proxies' stage histograms summed.
func (r *fleetBench) stages() stageHist {
	h := stageHist{}
	for _, reg := range r.regs {
		h.gather(reg)
	}
	return h
}

// facts is the number of facts on the log (countFacts).
func (r *fleetBench) facts(ctx context.Context) (uint64, error) {
	n, err := countFacts(ctx, r.svc.Store)
	if err != nil {
		return 0, fmt.Errorf("fleet: %w", err)
	}
	return n, nil
}

// countFacts is the number of facts on st's log: the messages on the fact
// subjects.
func countFacts(ctx context.Context, st *store.Store) (uint64, error) {
	s, err := st.JS().Stream(ctx, events.StreamName)
	if err != nil {
		return 0, fmt.Errorf("count facts: %w", err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(events.SubjectPrefix+".*.*."+string(events.KindFact)+".*"))
	if err != nil {
		return 0, fmt.Errorf("count facts: %w", err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
}

// postTurn posts one replayed request to the proxy at base under
// upstream key key and reads the whole answer.
func postTurn(ctx context.Context, client *http.Client, base string, api replay.API, session, key string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+api.Path(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(api.SessionHeader(), session)
	req.Header.Set(turnHeader, key)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d, %v", key, resp.StatusCode, err)
	}
	return nil
}

// fleetCounts are the proxies' counters summed: requests, fail-opens and
// the added-latency histogram's cumulative buckets.
type fleetCounts struct {
	requests, failOpen, races, catchUps, tailed float64
	first, unrecorded, advances                 float64
	bounds                                      []float64
	cum                                         []float64
	count                                       float64
	// native is the added latency's native histogram: observations per
	// bucket index at schema (nil when the proxies export none).
	native map[int]float64
	schema int32
}

func (r *fleetBench) snapshot() fleetCounts {
	var c fleetCounts
	for _, reg := range r.regs {
		mfs, err := reg.Gather()
		if err != nil {
			continue
		}
		counters := map[string]*float64{
			"prunesched_proxy_requests_total":              &c.requests,
			"prunesched_proxy_fail_open_total":             &c.failOpen,
			"prunesched_proxy_fleet_races_total":           &c.races,
			"prunesched_proxy_fleet_catchups_total":        &c.catchUps,
			"prunesched_proxy_fleet_tailed_catchups_total": &c.tailed,
			"prunesched_proxy_fleet_publish_first_total":   &c.first,
			"prunesched_proxy_fleet_unrecorded_total":      &c.unrecorded,
			"prunesched_proxy_fleet_advances_total":        &c.advances,
		}
		for _, mf := range mfs {
			if sum, ok := counters[mf.GetName()]; ok {
				for _, m := range mf.GetMetric() {
					*sum += m.GetCounter().GetValue()
				}
				continue
			}
			switch mf.GetName() {
			case "prunesched_proxy_added_seconds":
				for _, m := range mf.GetMetric() {
					h := m.GetHistogram()
					if c.bounds == nil {
						for _, bk := range h.GetBucket() {
							c.bounds = append(c.bounds, bk.GetUpperBound())
						}
						c.cum = make([]float64, len(c.bounds))
					}
					for i, bk := range h.GetBucket() {
						c.cum[i] += float64(bk.GetCumulativeCount())
					}
					c.count += float64(h.GetSampleCount())
					c.addNative(h)
				}
			}
		}
	}
	return c
}

// addNative adds h's native buckets (positive only: latencies) to c's.
// Spans give bucket indexes, the first offset absolute and the next ones
// relative to the end of the span before; counts are delta-encoded
// across all spans. The zero bucket is counted at the lowest index.
func (c *fleetCounts) addNative(h *dto.Histogram) {
	if len(h.GetPositiveSpan()) == 0 && h.GetZeroCount() == 0 {
		return
	}
	if c.native == nil {
		c.native, c.schema = map[int]float64{}, h.GetSchema()
	}
	if h.GetSchema() != c.schema {
		c.native = nil // schemas differ: fall back to the classic buckets
		return
	}
	deltas := h.GetPositiveDelta()
	idx, di, n := 0, 0, int64(0)
	lowest := math.MaxInt
	for _, sp := range h.GetPositiveSpan() {
		idx += int(sp.GetOffset())
		for range sp.GetLength() {
			if di >= len(deltas) {
				return
			}
			n += deltas[di]
			c.native[idx] += float64(n)
			lowest = min(lowest, idx)
			idx++
			di++
		}
	}
	if z := h.GetZeroCount(); z > 0 {
		if lowest == math.MaxInt {
			lowest = 0
		}
		c.native[lowest-1] += float64(z)
	}
}

// nativeQuantile is the q-quantile (seconds) of the native buckets'
// observations since before: the upper bound of the bucket holding it
// (within the bucket factor of the true value, never below it).
func (c fleetCounts) nativeQuantile(before fleetCounts, q float64) (float64, bool) {
	if c.native == nil || (before.native != nil && before.schema != c.schema) {
		return 0, false
	}
	idxs := make([]int, 0, len(c.native))
	total := 0.0
	for i, n := range c.native {
		if d := n - before.native[i]; d > 0 {
			idxs = append(idxs, i)
			total += d
		}
	}
	if total == 0 {
		return 0, false
	}
	slices.Sort(idxs)
	rank, cum := q*total, 0.0
	for _, i := range idxs {
		cum += c.native[i] - before.native[i]
		if cum >= rank {
			return math.Exp2(float64(i) * math.Exp2(-float64(c.schema))), true
		}
	}
	i := idxs[len(idxs)-1]
	return math.Exp2(float64(i) * math.Exp2(-float64(c.schema))), true
}

// quantile is the q-quantile (seconds) of the added latency observed
// since before: from the native buckets when the proxies export them
// (within 10%), else linearly interpolated within its classic bucket (as
// Prometheus' histogram_quantile).
func (c fleetCounts) quantile(before fleetCounts, q float64) float64 {
	if v, ok := c.nativeQuantile(before, q); ok {
		return v
	}
	v := bucketQuantile(c.bounds, func(i int) float64 {
		if before.cum != nil {
			return c.cum[i] - before.cum[i]
		}
		return c.cum[i]
	}, c.count-before.count, q)
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// writeFleet renders the fleet section.
func writeFleet(w io.Writer, rows []FleetRow, speedup float64) {
	if len(rows) == 0 {
		return
	}
	where := "the nodes in this process"
	if len(rows[0].NodePeakRSSMB) > 0 {
		where = "each node its own process"
	}
	cadence := "back to back"
	if speedup > 0 {
		cadence = fmt.Sprintf("each agent at its trace's recorded gaps between requests (capped at %s) / %g", fleetMaxGap, speedup)
	}
	fmt.Fprintf(w, "\nfleet: three --fleet proxies, three-node JetStream cluster (%s); K agents replaying real request sequences, requests round robin over the proxies, %s\n", where, cadence)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	row := func(cols ...string) { fmt.Fprintln(tw, "| "+strings.Join(cols, "\t| ")+"\t|") }
	row("agents (K)", "requests", "added p50 / p99 ms (p99 <= 10)", "failed open (< 1%)", "facts/s", "log events/s", "nodes' peak RSS", "bench process RSS")
	row("---", "---", "---", "---", "---", "---", "---", "---")
	best := 0
	for _, x := range rows {
		if x.OK {
			best = max(best, x.Agents)
		}
		row(strconv.Itoa(x.Agents), strconv.Itoa(x.Requests), fmt.Sprintf("%.2f / %.2f%s", x.AddedP50Ms, x.AddedP99Ms, mark(x.AddedP99Ms <= 10)),
			fmt.Sprintf("%.2f%%%s", x.FailOpenPct, mark(x.FailOpenPct < 1)), fmt.Sprintf("%.0f", x.FactsPerS), fmt.Sprintf("%.0f", x.EventsPerS),
			nodeRSS(x.NodePeakRSSMB), fmt.Sprintf("%.0f MB", x.RSSMB))
	}
	tw.Flush()
	fmt.Fprintf(w, "largest K meeting both goals: %d\n", best)
}
