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
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/internal/bench/replay"
	"github.com/prunesched/prunesched/internal/importers"
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
	// second of the step's wall time.
	EventsPerS float64 `json:"events_per_s"`
	// RSSMB is the process's resident memory at the step's end: the three
	// nodes, the workers and the proxies share the process.
	RSSMB float64 `json:"rss_mb"`
	// StageMeanMs is the mean time of each proxy stage (one proxy's).
	StageMeanMs map[string]float64 `json:"stage_mean_ms"`
	// OK says the step met the goals: added p99 <= 10 ms, < 1% failing
	// open.
	OK bool `json:"ok"`
}

// fleetThink is the pause between an agent's requests: the recorded
// cadence of an agent (seconds between turns, the model's generation)
// sped up to a fixed 100 ms, since the replayed turns carry no times.
const fleetThink = 100 * time.Millisecond

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
	rig, err := b.startFleetRig(ctx)
	if err != nil {
		return err
	}
	defer rig.close()
	maxK := b.pick(192, 48)
	for k := 3; k <= maxK || k == 3; k *= 2 {
		row, err := rig.step(ctx, k, seqs)
		if err != nil {
			return err
		}
		b.res.Fleet = append(b.res.Fleet, row)
		b.progress("fleet: %d agents: %d requests, added p50 %.2f ms p99 %.2f ms, %.2f%% failed open, %.0f events/s, RSS %.0f MB; stage means ms: %s",
			row.Agents, row.Requests, row.AddedP50Ms, row.AddedP99Ms, row.FailOpenPct, row.EventsPerS, row.RSSMB, stageSummary(row.StageMeanMs))
		if !row.OK {
			break
		}
	}
	return nil
}

// fleetBench is the fleet bench's cluster, workers, proxies and upstream.
type fleetBench struct {
	dir     string
	srvs    []*server.Server
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
	r := &fleetBench{dir: dir, up: &peer{answers: map[string]replay.Turn{}, t0: time.Now()},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}}
	if err := r.startCluster(); err != nil {
		r.close()
		return nil, err
	}
	var urls []string
	for _, s := range r.srvs {
		urls = append(urls, s.ClientURL())
	}
	natsURL := strings.Join(urls, ",")
	r.svc, err = service.Start(ctx, service.Config{NATSURL: natsURL, Replicas: 3, Policy: b.pol, Logger: b.log})
	if err != nil {
		r.close()
		return nil, fmt.Errorf("fleet: start the workers: %w", err)
	}
	up, err := r.serve(http.HandlerFunc(r.up.upstream))
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
		u, err := r.serve(px.Handler())
		if err != nil {
			r.close()
			return nil, err
		}
		r.urls = append(r.urls, u)
	}
	return r, nil
}

// startCluster starts three JetStream nodes routed on loopback.
func (r *fleetBench) startCluster() error {
	ports := make([]int, 3)
	var routes []string
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("fleet: %w", err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[i]))
	}
	for i, p := range ports {
		srv, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("bench-n%d", i+1), Host: "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: filepath.Join(r.dir, strconv.Itoa(i)), MaxPayload: store.DefaultMaxPayload,
			NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: "bench", Host: "127.0.0.1", Port: p},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		})
		if err != nil {
			return fmt.Errorf("fleet: node %d: %w", i+1, err)
		}
		srv.Start()
		r.srvs = append(r.srvs, srv)
	}
	for _, s := range r.srvs {
		if !s.ReadyForConnections(30 * time.Second) {
			return fmt.Errorf("fleet: node %s not ready", s.Name())
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		for _, s := range r.srvs {
			if s.JetStreamIsLeader() {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fleet: no JetStream meta leader within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *fleetBench) serve(h http.Handler) (string, error) { return serveLoopback(&r.servers, h) }

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
	_ = os.RemoveAll(r.dir)
}

// step runs k agents, each replaying one sequence (cycled) in a session
// of its own, request j of agent i to proxy (i+j) mod 3.
func (r *fleetBench) step(ctx context.Context, k int, seqs [][]replay.Turn) (FleetRow, error) {
	before := r.snapshot()
	stBefore := (&replayRig{reg: r.regs[0]}).stages()
	startSeq, err := r.svc.Store.StreamLastSeq(ctx)
	if err != nil {
		return FleetRow{}, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, k)
	for i := range k {
		wg.Go(func() {
			session := fmt.Sprintf("fleet-k%d-a%d", k, i)
			for j, turn := range seqs[i%len(seqs)] {
				key := session + "/" + strconv.Itoa(j)
				r.up.mu.Lock()
				r.up.answers[key] = turn
				r.up.mu.Unlock()
				if err := postTurn(ctx, r.client, r.urls[(i+j)%len(r.urls)], replay.Anthropic, session, key, turn.Body); err != nil {
					errs <- err
					return
				}
				select {
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				case <-time.After(fleetThink):
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return FleetRow{}, fmt.Errorf("fleet: %w", err)
	}
	wall := time.Since(start).Seconds()
	endSeq, err := r.svc.Store.StreamLastSeq(ctx)
	if err != nil {
		return FleetRow{}, err
	}
	after := r.snapshot()
	row := FleetRow{Agents: k, Requests: int(after.requests - before.requests), RSSMB: float64(rss()) / (1 << 20),
		EventsPerS: float64(endSeq-startSeq) / wall}
	row.AddedP50Ms = after.quantile(before, 0.50) * 1000
	row.AddedP99Ms = after.quantile(before, 0.99) * 1000
	if row.Requests > 0 {
		row.FailOpenPct = 100 * (after.failOpen - before.failOpen) / float64(row.Requests)
	}
	row.OK = row.AddedP99Ms <= 10 && row.FailOpenPct < 1
	row.StageMeanMs = (&replayRig{reg: r.regs[0]}).stages().meanSince(stBefore)
	return row, nil
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
	requests, failOpen float64
	bounds             []float64
	cum                []float64
	count              float64
}

func (r *fleetBench) snapshot() fleetCounts {
	var c fleetCounts
	for _, reg := range r.regs {
		mfs, err := reg.Gather()
		if err != nil {
			continue
		}
		for _, mf := range mfs {
			switch mf.GetName() {
			case "prunesched_proxy_requests_total":
				for _, m := range mf.GetMetric() {
					c.requests += m.GetCounter().GetValue()
				}
			case "prunesched_proxy_fail_open_total":
				for _, m := range mf.GetMetric() {
					c.failOpen += m.GetCounter().GetValue()
				}
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
				}
			}
		}
	}
	return c
}

// quantile is the q-quantile (seconds) of the added latency observed
// since before, linearly interpolated within its bucket (as Prometheus'
// histogram_quantile).
func (c fleetCounts) quantile(before fleetCounts, q float64) float64 {
	n := c.count - before.count
	if n <= 0 || len(c.bounds) == 0 {
		return 0
	}
	rank := q * n
	lower, prev := 0.0, 0.0
	for i, ub := range c.bounds {
		cum := c.cum[i]
		if before.cum != nil {
			cum -= before.cum[i]
		}
		if cum >= rank {
			if cum == prev {
				return ub
			}
			return lower + (ub-lower)*(rank-prev)/(cum-prev)
		}
		lower, prev = ub, cum
	}
	return math.Inf(1)
}

// writeFleet renders the fleet section.
func writeFleet(w io.Writer, rows []FleetRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nfleet: three --fleet proxies, three-node JetStream cluster, all in this process; K agents replaying real request sequences, requests round robin over the proxies, 100 ms between an agent's requests")
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	row := func(cols ...string) { fmt.Fprintln(tw, "| "+strings.Join(cols, "\t| ")+"\t|") }
	row("agents (K)", "requests", "added p50 / p99 ms (p99 <= 10)", "failed open (< 1%)", "log events/s", "process RSS (3 nodes + workers + proxies)")
	row("---", "---", "---", "---", "---", "---")
	best := 0
	for _, x := range rows {
		if x.OK {
			best = max(best, x.Agents)
		}
		row(strconv.Itoa(x.Agents), strconv.Itoa(x.Requests), fmt.Sprintf("%.2f / %.2f%s", x.AddedP50Ms, x.AddedP99Ms, mark(x.AddedP99Ms <= 10)),
			fmt.Sprintf("%.2f%%%s", x.FailOpenPct, mark(x.FailOpenPct < 1)), fmt.Sprintf("%.0f", x.EventsPerS), fmt.Sprintf("%.0f MB", x.RSSMB))
	}
	tw.Flush()
	fmt.Fprintf(w, "largest K meeting both goals: %d\n", best)
}
