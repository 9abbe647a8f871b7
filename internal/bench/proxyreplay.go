package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/httplimit"
	"github.com/prunesched/prunesched/internal/bench/replay"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/proxy"
)

// ReplayRow is one replayed request sequence: a trace in one wire shape,
// streamed or not, sent three ways in the same run, interleaved request by
// request: straight to the fake upstream, through a bare
// httputil.ReverseProxy, and through the prunesched proxy. Added latencies
// are each request's time through a proxy minus its direct time (the
// whole response read: for a stream, up to its last event).
type ReplayRow struct {
	Trace  string `json:"trace"`
	API    string `json:"api"`
	Stream bool   `json:"stream"`
	// Requests is the number of requests replayed; MaxBodyKiB the largest.
	Requests   int     `json:"requests"`
	MaxBodyKiB float64 `json:"max_body_kib"`
	DirectP50  float64 `json:"direct_p50_ms"`
	DirectP99  float64 `json:"direct_p99_ms"`
	BareP50    float64 `json:"bare_added_p50_ms"`
	BareP99    float64 `json:"bare_added_p99_ms"`
	ProxyP50   float64 `json:"proxy_added_p50_ms"`
	ProxyP99   float64 `json:"proxy_added_p99_ms"`

	// MeanBodyKiB is the bodies' mean size.
	MeanBodyKiB float64 `json:"mean_body_kib"`
	// NewOutputKiB is, on a synthetic row, the size of the new tool
	// output each request adds; WindowTokens the context window its
	// client keeps the conversation within (0: none, the bodies grow past
	// any model's window), compacting Compactions times to do so.
	NewOutputKiB float64 `json:"new_output_kib,omitempty"`
	WindowTokens int     `json:"window_tokens,omitempty"`
	Compactions  int     `json:"compactions,omitempty"`

	// The added p50 split at the upstream: on the way to it (the request
	// read, decided on and forwarded) and on the way back (the answer
	// relayed and captured), for each proxy. The two p50s need not add up
	// to the whole's.
	BareToP50    float64 `json:"bare_added_to_p50_ms"`
	BareBackP50  float64 `json:"bare_added_back_p50_ms"`
	ProxyToP50   float64 `json:"proxy_added_to_p50_ms"`
	ProxyBackP50 float64 `json:"proxy_added_back_p50_ms"`
	// RatioP50 and RatioP99 are ProxyP50/BareP50 and ProxyP99/BareP99
	// (goals <= 1.5 and <= 3).
	RatioP50 float64 `json:"ratio_p50"`
	RatioP99 float64 `json:"ratio_p99"`
	// Rendered and FailedOpen count the proxy's outcomes: a request that
	// failed open skipped prunesched's work and would flatter the numbers.
	Rendered   int `json:"rendered"`
	FailedOpen int `json:"failed_open"`
	// BackToBack says the requests were sent back to back
	// (Config.BackToBack); otherwise each turn started once the proxy's
	// log writes and the pipeline were done with the turn before.
	BackToBack bool `json:"back_to_back,omitempty"`
	// ThinkMs is the fake upstream's wait before answering (Config.Think),
	// taken out of every way's time.
	ThinkMs float64 `json:"think_ms,omitempty"`
	// StageP50 is the p50 in ms of each proxy stage over the row's
	// requests (proxy.LatencyStages), read from the proxy's
	// prunesched_proxy_stage_seconds histogram as histogram_quantile
	// would (interpolated within its buckets), and "added", the whole
	// time before forwarding (prunesched_proxy_added_seconds). The record
	// stage runs after the response, off the client's path.
	StageP50 map[string]float64 `json:"stage_p50_ms,omitempty"`
	// StageP99 is each stage's p99 in ms, read the same way: whether a
	// stage's slowest requests grow with the size of a new output.
	StageP99 map[string]float64 `json:"stage_p99_ms,omitempty"`
	// StageMean is each stage's mean in ms (exact: the histogram's sum
	// over its count). Means add up where medians do not: the stages'
	// means before forwarding sum to about the mean of "added", the rest
	// being the budget goroutine's hand-offs and decoding.
	StageMean map[string]float64 `json:"stage_mean_ms,omitempty"`

	// Probe is, when proxy-replay runs probed (replayProbeEnv), each
	// request through each proxy, timed and with the runtime's events.
	Probe *ReplayProbe `json:"probe,omitempty"`

	// bare and via are each request's added time, bare and through the
	// proxy, for the pooled percentiles.
	bare, via []time.Duration
}

// ReplayPooled is every request of the real sequences together (the
// synthetic rows left out): a row's p99 over its 17 to 40 requests is its
// slowest request or next to it, one scheduling hiccup of the machine,
// where the p99 of some 1,500 requests is a percentile.
type ReplayPooled struct {
	Sequences int     `json:"sequences"`
	Requests  int     `json:"requests"`
	BareP50   float64 `json:"bare_added_p50_ms"`
	BareP99   float64 `json:"bare_added_p99_ms"`
	ProxyP50  float64 `json:"proxy_added_p50_ms"`
	ProxyP99  float64 `json:"proxy_added_p99_ms"`
	RatioP50  float64 `json:"ratio_p50"`
	RatioP99  float64 `json:"ratio_p99"`
}

// pool pools the rows' requests.
func pool(rows []ReplayRow) *ReplayPooled {
	var bare, via []time.Duration
	for _, r := range rows {
		bare, via = append(bare, r.bare...), append(via, r.via...)
	}
	if len(via) == 0 {
		return nil
	}
	p := &ReplayPooled{Sequences: len(rows), Requests: len(via)}
	p.BareP50, p.BareP99 = pctMs(bare)
	p.ProxyP50, p.ProxyP99 = pctMs(via)
	p.RatioP50, p.RatioP99 = ratio(p.ProxyP50, p.BareP50), ratio(p.ProxyP99, p.BareP99)
	return p
}

// FindTraces returns the Claude Code (claude-code/*.jsonl) and OpenCode
// (opencode/*.json) traces under dir, sorted.
func FindTraces(dir string) ([]string, error) {
	var out []string
	for _, pat := range []string{"claude-code/*.jsonl", "opencode/*.json"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, fmt.Errorf("traces %s: %w", dir, err)
		}
		sort.Strings(m)
		out = append(out, m...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("traces %s: no claude-code/*.jsonl or opencode/*.json files", dir)
	}
	return out, nil
}

// replayShapes are the wire shapes each trace format is replayed in:
// Claude Code as Anthropic Messages; OpenCode as Chat Completions and, for
// the Codex shape (no Codex trace is shared), as Responses.
func replayShapes(format string) []replay.API {
	switch format {
	case importers.FormatClaudeCode:
		return []replay.API{replay.Anthropic}
	case importers.FormatOpenCode:
		return []replay.API{replay.Chat, replay.Responses}
	}
	return nil
}

// turnHeader tells the fake upstream which answer to give.
const turnHeader = "X-Replay-Turn"

// atHeader is the fake upstream's answer header giving when it had read
// the request whole and when it began its answer, "RECV,ANSWER", in
// nanoseconds since the rig started (one process, one monotonic clock).
// Both proxies relay an answer's headers unchanged. The client splits a
// request's time into the way to the upstream and the way back, leaving
// out the upstream's think time (Config.Think).
const atHeader = "X-Replay-At"

// replayRig is the bare reverse proxy and the prunesched proxy (in
// process, on its own embedded JetStream), in front of the replay peer's
// fake upstream (replaypeer.go).
type replayRig struct {
	dir     string
	svc     *service.Service
	px      *proxy.Proxy
	reg     *prometheus.Registry
	servers []*http.Server
	peer    *peerConn
	// base URLs: direct (the peer's upstream), bare, prunesched.
	urls [3]string

	// backToBack: see Config.BackToBack.
	backToBack bool
	// think: see Config.Think.
	think time.Duration
	// probe times both proxies' requests (replayProbeEnv); nil: off.
	probe *probe
}

func (b *runner) startReplayRig(ctx context.Context) (*replayRig, error) {
	dir, err := os.MkdirTemp(b.cfg.TempDir, "prunesched-replay-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	r := &replayRig{dir: dir, reg: prometheus.NewRegistry(), think: b.cfg.Think}
	if r.peer, err = startPeer(ctx, b.cfg.ReplayPeer); err != nil {
		r.close()
		return nil, err
	}
	r.urls[0] = r.peer.upstream
	r.svc, err = service.Start(ctx, service.Config{DataDir: dir, Policy: b.pol, Logger: b.log})
	if err != nil {
		r.close()
		return nil, fmt.Errorf("start prunesched: %w", err)
	}
	if envSet(replayProbeEnv) {
		r.probe = newProbe()
	}
	serve := func(way int, h http.Handler, setup func(*http.Server)) (string, error) {
		if r.probe != nil {
			h = r.probe.wrap(way, h)
		}
		return serveLoopback(&r.servers, h, setup)
	}
	up, _ := url.Parse(r.urls[0])
	if r.urls[1], err = serve(1, bareProxy(up), nil); err != nil {
		r.close()
		return nil, err
	}
	r.px, err = proxy.New(proxy.Config{Upstream: r.urls[0], Backend: service.NewProxyBackend(r.svc.Store, r.svc.Pipeline), Logger: b.log, Registry: r.reg})
	if err != nil {
		r.close()
		return nil, err
	}
	third, setup := r.px.Handler(), r.px.ConfigureServer
	switch {
	case envSet(replayAAEnv):
		third, setup = bareProxy(up), nil
	case envSet(replayHoldEnv):
		third, setup = holdingProxy(up), nil
	}
	if r.urls[2], err = serve(2, third, setup); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// bareProxy is the baseline: a plain httputil.ReverseProxy to up that
// flushes every write, as the prunesched proxy does. It runs full duplex:
// Go's HTTP/1 server otherwise closes a request body once the handler
// starts its response, and the transport, still finishing the request
// (its last read checks the body's end), tears down the connection to the
// upstream mid-answer (golang/go#40747): under load a streamed answer broke
// off and the bench aborted with "unexpected EOF".
func bareProxy(up *url.URL) http.Handler {
	rp := httputil.NewSingleHostReverseProxy(up)
	rp.FlushInterval = -1
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	})
}

// holdingProxy is bareProxy reading each request body whole before it
// forwards it (replayHoldEnv), as the proxy reads it (httplimit), sent as
// the proxy sends a body (with its length).
func holdingProxy(up *url.URL) http.Handler {
	bare := bareProxy(up)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rb, _, err := httplimit.ReadBodyOrStream(w, r, nil, proxy.DefaultMaxBodyBytes)
		if err != nil || rb == nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(rb.Bytes))
		r.ContentLength = int64(len(rb.Bytes))
		bare.ServeHTTP(w, r)
	})
}

func (r *replayRig) close() {
	for _, s := range r.servers {
		_ = s.Close()
	}
	if r.px != nil {
		// Records still running after their responses finish first.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = r.px.Close(ctx)
		cancel()
	}
	if r.svc != nil {
		r.svc.Close()
	}
	if r.peer != nil {
		_ = r.peer.close()
	}
	_ = os.RemoveAll(r.dir)
}

// legs is one request's time split at the upstream: to is from the
// client's send to the upstream having read the request whole, back from
// the upstream's first answer byte to the client having read the answer
// whole. The upstream's think time is in neither.
type legs struct{ to, back time.Duration }

func (l legs) total() time.Duration { return l.to + l.back }

// outcomes reads the proxy's request counters (rendered, fail_open).
func (r *replayRig) outcomes() (rendered, failed int) {
	mfs, err := r.reg.Gather()
	if err != nil {
		return 0, 0
	}
	for _, mf := range mfs {
		if mf.GetName() != "prunesched_proxy_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "outcome" {
					continue
				}
				switch l.GetValue() {
				case "rendered":
					rendered += int(m.GetCounter().GetValue())
				case "fail_open":
					failed += int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return rendered, failed
}

// stageHist is the proxy's stage histogram summed over APIs: per stage,
// the buckets' upper bounds and cumulative counts.
type stageHist map[string]struct {
	upper []float64
	cum   []uint64
	count uint64
	sum   float64
}

// stages reads prunesched_proxy_stage_seconds, and
// prunesched_proxy_added_seconds as the stage "added".
func (r *replayRig) stages() stageHist {
	out := stageHist{}
	out.gather(r.reg)
	return out
}

// gather adds a registry's prunesched_proxy_stage_seconds,
// prunesched_proxy_fleet_stage_seconds and prunesched_proxy_added_seconds
// (as the stage "added") to h.
func (out stageHist) gather(reg prometheus.Gatherer) {
	mfs, err := reg.Gather()
	if err != nil {
		return
	}
	for _, mf := range mfs {
		if name := mf.GetName(); name != proxy.StageSecondsMetric && name != proxy.FleetStageSecondsMetric && name != "prunesched_proxy_added_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			stage := "added"
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" {
					stage = l.GetValue()
				}
			}
			h := out[stage]
			bs := m.GetHistogram().GetBucket()
			if h.upper == nil {
				h.upper, h.cum = make([]float64, len(bs)), make([]uint64, len(bs))
			}
			for i, b := range bs {
				if i < len(h.upper) {
					h.upper[i] = b.GetUpperBound()
					h.cum[i] += b.GetCumulativeCount()
				}
			}
			h.count += m.GetHistogram().GetSampleCount()
			h.sum += m.GetHistogram().GetSampleSum()
			out[stage] = h
		}
	}
}

// p50Since is each stage's p50 in ms of the observations made since
// before (quantileSince).
func (h stageHist) p50Since(before stageHist) map[string]float64 { return h.quantileSince(before, 0.5) }

// quantileSince is each stage's q-quantile in ms of the observations made
// since before, interpolated linearly within a bucket as Prometheus's
// histogram_quantile does.
func (h stageHist) quantileSince(before stageHist, q float64) map[string]float64 {
	out := map[string]float64{}
	for stage, now := range h {
		prev := before[stage]
		n := len(now.cum)
		if n == 0 {
			continue
		}
		diff := func(i int) float64 {
			d := float64(now.cum[i])
			if i < len(prev.cum) {
				d -= float64(prev.cum[i])
			}
			return d
		}
		v := bucketQuantile(now.upper, diff, float64(now.count-prev.count), q)
		if math.IsNaN(v) {
			continue
		}
		out[stage] = v * 1e3
	}
	return out
}

// bucketQuantile is the q-quantile of a histogram's observations, from
// its buckets' upper bounds and cumulative counts (cum(i) for bucket i)
// over total observations, linearly interpolated within its bucket as
// Prometheus' histogram_quantile does. A quantile past the last finite
// bound is reported as that bound (JSON has no infinity); NaN when there
// are no observations.
func bucketQuantile(upper []float64, cum func(i int) float64, total, q float64) float64 {
	if total <= 0 || len(upper) == 0 {
		return math.NaN()
	}
	rank := total * q
	lower, below := 0.0, 0.0
	for i, ub := range upper {
		c := cum(i)
		if c >= rank {
			if c == below {
				return ub
			}
			return lower + (ub-lower)*(rank-below)/(c-below)
		}
		lower, below = ub, c
	}
	return upper[len(upper)-1]
}

// countSince is each stage's number of observations made since before.
func (h stageHist) countSince(before stageHist) map[string]int {
	out := map[string]int{}
	for stage, now := range h {
		if n := now.count - before[stage].count; n > 0 {
			out[stage] = int(n)
		}
	}
	return out
}

// meanSince is each stage's mean in ms of the observations made since
// before.
func (h stageHist) meanSince(before stageHist) map[string]float64 {
	out := map[string]float64{}
	for stage, now := range h {
		prev := before[stage]
		if n := now.count - prev.count; n > 0 {
			out[stage] = (now.sum - prev.sum) / float64(n) * 1e3
		}
	}
	return out
}

// stageSummary prints StageP50 in proxy.LatencyStages order.
func stageSummary(p50 map[string]float64) string {
	var b strings.Builder
	for _, s := range proxy.LatencyStages {
		if v, ok := p50[s]; ok {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %.2f", s, v)
		}
	}
	return b.String()
}

// proxyReplay replays every trace's request sequence (see ReplayRow).
func (b *runner) proxyReplay(ctx context.Context) error {
	if len(b.cfg.Traces) == 0 {
		return fmt.Errorf("no traces to replay (see --traces)")
	}
	limit := b.pick(0, 40) // requests per sequence; 0: all
	for _, path := range b.cfg.Traces {
		sessions, err := importers.Import(path, importers.FormatAuto)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		for si, s := range sessions {
			seq := replay.FromEvents(s.Events)
			for _, api := range replayShapes(s.Format) {
				for _, stream := range []bool{false, true} {
					turns := seq.Build(api, stream)
					if limit > 0 && len(turns) > limit {
						turns = turns[:limit]
					}
					if len(turns) == 0 {
						continue
					}
					label := name
					if len(sessions) > 1 {
						label = fmt.Sprintf("%s#%d", name, si)
					}
					if !replayRowWanted(label) {
						continue
					}
					// A fresh proxy, log and token counter per sequence:
					// the shapes of one trace carry the same tool outputs,
					// which a shared store would find already counted and
					// stored, flattering every sequence after the first.
					row, err := b.replayFresh(ctx, label, api, stream, turns)
					if err != nil {
						return err
					}
					b.res.ProxyReplay = append(b.res.ProxyReplay, row)
					b.progress("proxy-replay: %s %s stream=%v: %d requests, added p50 %.2f ms (bare %.2f, x%.2f), p99 %.2f ms (bare %.2f, x%.2f), %d failed open; stage p50 ms: %s",
						label, api, stream, row.Requests, row.ProxyP50, row.BareP50, row.RatioP50, row.ProxyP99, row.BareP99, row.RatioP99, row.FailedOpen, stageSummary(row.StageP50))
				}
			}
		}
	}
	if p := pool(b.res.ProxyReplay); p != nil {
		b.res.ProxyReplayPooled = p
		b.progress("proxy-replay: all %d requests of the %d real sequences: added p50 %.2f ms (bare %.2f, x%.2f), p99 %.2f ms (bare %.2f, x%.2f)",
			p.Requests, p.Sequences, p.ProxyP50, p.BareP50, p.RatioP50, p.ProxyP99, p.BareP99, p.RatioP99)
	}
	if s := summarizeProbe(b.res.ProxyReplay); s != nil {
		b.res.ProxyReplayProbe = s
		b.progress("proxy-replay probe: bare, all %s", s.BareAll)
		b.progress("proxy-replay probe: bare, each row's slowest %s", s.BareSlowest)
		b.progress("proxy-replay probe: prunesched, all %s", s.ViaAll)
		b.progress("proxy-replay probe: prunesched, each row's slowest %s", s.ViaSlowest)
		b.progress("proxy-replay probe: prunesched, the slowest of rows over %gx at p99 %s", GoalReplayRatioP99, s.ViaSlowestOver)
	}
	// Synthetic sequences whose every request adds one new tool output of
	// a set size: the added p99 must not grow with that size. Each has 24
	// outputs, and no more than the limit on requests needs. Smoke runs,
	// which only check that the rows are there, have 4: the fewest with
	// which the 200 KiB row within the window still compacts (the
	// bodies' bytes, most of the section's time under -race, are half
	// those of 6).
	n := b.pick(24, 24)
	if b.cfg.Smoke {
		n = 4
	}
	if limit > 0 {
		n = min(n, limit)
	}
	for _, sr := range syntheticRows() {
		if !replayRowWanted(sr.label()) {
			continue
		}
		turns, compactions := largeOutputs(n, sr.outputBytes, sr.windowed).Build(replay.Anthropic, false), 0
		if limit > 0 && len(turns) > limit {
			turns = turns[:limit]
		}
		row, err := b.replayFresh(ctx, sr.label(), replay.Anthropic, false, turns)
		if err != nil {
			return err
		}
		for i := 1; i < len(turns); i++ {
			if len(turns[i].Body) < len(turns[i-1].Body) {
				compactions++
			}
		}
		row.NewOutputKiB, row.Compactions = float64(sr.outputBytes)/1024, compactions
		if sr.windowed {
			row.WindowTokens = contextWindowTokens
		}
		b.res.ProxyReplay = append(b.res.ProxyReplay, row)
		b.progress("proxy-replay: %s: %d requests (bodies up to %.0f KiB, mean %.0f, %d compactions), added p50 %.2f ms (bare %.2f, x%.2f), p99 %.2f ms (bare %.2f, x%.2f), %d failed open; stage p50 ms: %s; append p99 %.2f ms",
			row.Trace, row.Requests, row.MaxBodyKiB, row.MeanBodyKiB, row.Compactions, row.ProxyP50, row.BareP50, row.RatioP50, row.ProxyP99, row.BareP99, row.RatioP99, row.FailedOpen, stageSummary(row.StageP50), row.StageP99[proxy.StageAppend])
	}
	return nil
}

// replayRowsEnv, when set, keeps only the proxy-replay rows whose label
// contains it (for profiling one row with --cpuprofile: the pooled
// numbers then cover only the rows kept).
const replayRowsEnv = "PRUNESCHED_REPLAY_ROWS"

// replayRowWanted says whether the row labelled label runs
// (replayRowsEnv).
func replayRowWanted(label string) bool {
	want := os.Getenv(replayRowsEnv)
	return want == "" || strings.Contains(label, want)
}

// contextWindowTokens is the context window the synthetic rows' client
// keeps its conversation within: 200k tokens, Claude's (Claude Code
// compacts the conversation as it nears its window). The rows' body
// bound, windowBodyBytes, is derived from it.
const contextWindowTokens = 200_000

// windowBodyBytes is the largest request body a conversation within
// contextWindowTokens makes, at the bytes/4 estimate every count without
// a tokenizer uses (events.EstimateTokens): 800,000 bytes.
const windowBodyBytes = contextWindowTokens * 4

// bodyFraming is what a synthetic request's body holds besides its
// conversation's texts and outputs (the replay's system prompt of about
// 12 KiB, the tools, the JSON around the messages), counted against
// windowBodyBytes when the client decides to compact.
const bodyFraming = 32 << 10

// syntheticRow is one synthetic sequence: every request adds a new tool
// output of outputBytes, the conversation kept within contextWindowTokens
// (windowed) or growing past any window.
type syntheticRow struct {
	outputBytes int
	windowed    bool
}

// syntheticRows are the synthetic sequences, in the order they run: the
// new output's size the only variable within the window, then the 200 KiB
// row without one (bodies to 4.9 MB, about 1.25M tokens: no model's
// window holds them, kept so the cost of a body that large stays shown).
func syntheticRows() []syntheticRow {
	return []syntheticRow{{8 << 10, true}, {50 << 10, true}, {200 << 10, true}, {200 << 10, false}}
}

// label names the row: synthetic-<size>KiB-outputs-200k-window, or
// ...-beyond-window for the row without one.
func (s syntheticRow) label() string {
	if s.windowed {
		return fmt.Sprintf("synthetic-%dKiB-outputs-%dk-window", s.outputBytes>>10, contextWindowTokens/1000)
	}
	return fmt.Sprintf("synthetic-%dKiB-outputs-beyond-window", s.outputBytes>>10)
}

// largeOutputs is a synthetic session of n tool calls, each answered by a
// new output of size bytes (distinct words, so tokenizing it costs what a
// real output of that size does). windowed: the client compacts, as
// Claude Code does near its window, when the next request's body would
// pass windowBodyBytes: the conversation starts over from a summary of
// about 4 KiB (new each time: a new conversation under the same session)
// and the tool call just answered, and the request carries its output.
// Every request but the first still adds exactly one new output.
func largeOutputs(n, size int, windowed bool) *replay.Sequence {
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var evs []events.Event
	add := func(p events.Payload) {
		at = at.Add(time.Second)
		evs = append(evs, events.New(events.NewID(), "", "large", at, p))
	}
	first := "Read every file and summarise."
	add(&events.Message{Item: "u0", Role: events.RoleUser, Kind: events.KindText, Text: first})
	conv := bodyFraming + len(first) // the body's bytes so far, JSON-escaped
	compactions := 0
	var b strings.Builder
	for i := range n {
		add(&events.ModelRequest{Request: "r" + strconv.Itoa(i), Provider: "anthropic", Model: "claude-sonnet-4-5"})
		call := fmt.Sprintf("toolu_%04d", i)
		tc := &events.ToolCall{Item: call + "/input", CallID: call, Tool: "Read", Input: []byte(fmt.Sprintf(`{"file_path":"/src/f%d.go"}`, i))}
		add(tc)
		b.Reset()
		for j := 0; b.Len() < size; j++ {
			fmt.Fprintf(&b, "line %d of file %d: value_%x = compute(%d) // %x\n", j, i, i*7919+j*104729, j, j*2654435761)
		}
		out := b.String()
		grow := len(out) + strings.Count(out, "\n") + 200 // escaped newlines, the blocks around it
		if windowed && conv+grow > windowBodyBytes {
			compactions++
			summary := compactionSummary(compactions)
			add(&events.HostCompaction{})
			add(&events.Message{Item: fmt.Sprintf("summary%d", compactions), Role: events.RoleUser, Kind: events.KindText, Text: summary})
			add(&events.ToolCall{Item: call + "/input", CallID: call, Tool: "Read", Input: tc.Input})
			conv = bodyFraming + len(summary)
		}
		conv += grow
		add(&events.ToolResult{Item: call, CallID: call, Tool: "Read", Output: &out})
	}
	add(&events.ModelRequest{Request: "r" + strconv.Itoa(n), Provider: "anthropic", Model: "claude-sonnet-4-5"})
	return replay.FromEvents(evs)
}

// compactionSummary is the summary the k-th compaction starts the
// conversation over from: about 4 KiB, distinct for each k.
func compactionSummary(k int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "This session is being continued from a previous conversation (compaction %d). Summary:\n", k)
	for j := 0; b.Len() < 4<<10; j++ {
		fmt.Fprintf(&b, "%d. Read file /src/f%d.go and noted its values for the summary (part %d).\n", j, j, k)
	}
	return b.String()
}

// replayFresh replays one sequence on a rig of its own.
func (b *runner) replayFresh(ctx context.Context, trace string, api replay.API, stream bool, turns []replay.Turn) (ReplayRow, error) {
	rig, err := b.startReplayRig(ctx)
	if err != nil {
		return ReplayRow{}, err
	}
	defer rig.close()
	rig.backToBack = b.cfg.BackToBack
	return rig.replay(ctx, trace, api, stream, turns)
}

// replay sends one sequence three ways, request by request, rotating
// which way goes first so the machine's noise falls on all three alike.
func (r *replayRig) replay(ctx context.Context, trace string, api replay.API, stream bool, turns []replay.Turn) (ReplayRow, error) {
	session := fmt.Sprintf("replay-%s-%s-%v", trace, api, stream)
	row := ReplayRow{Trace: trace, API: string(api), Stream: stream, Requests: len(turns), BackToBack: r.backToBack, ThinkMs: ms(r.think)}
	job := &peerJob{Session: session, API: api, URLs: r.urls, Think: int64(r.think), Settle: !r.backToBack, Probe: r.probe != nil}
	for _, t := range turns {
		job.Turns = append(job.Turns, peerTurn{Body: t.Body, Answer: t.Answer, ContentType: t.ContentType})
		row.MaxBodyKiB = max(row.MaxBodyKiB, float64(len(t.Body))/1024)
		row.MeanBodyKiB += float64(len(t.Body)) / 1024 / float64(len(turns))
	}
	rend0, fail0 := r.outcomes()
	stages0 := r.stages()
	prev := stages0
	sent, peerGC, err := r.peer.run(job, func() error {
		if err := r.settle(ctx); err != nil {
			return err
		}
		if r.probe != nil {
			now := r.stages()
			r.probe.settled(now, prev)
			prev = now
		}
		return nil
	})
	if err != nil {
		return row, err
	}
	if r.probe != nil {
		row.Probe = r.probe.probed(func(i int) string { return session + "/" + strconv.Itoa(i) }, sent, peerGC)
	}
	var direct, bare, via, bareTo, bareBack, viaTo, viaBack []time.Duration
	for _, d := range sent {
		direct = append(direct, d[0].total())
		bare = append(bare, d[1].total()-d[0].total())
		via = append(via, d[2].total()-d[0].total())
		bareTo, bareBack = append(bareTo, d[1].to-d[0].to), append(bareBack, d[1].back-d[0].back)
		viaTo, viaBack = append(viaTo, d[2].to-d[0].to), append(viaBack, d[2].back-d[0].back)
	}
	rend1, fail1 := r.outcomes()
	row.Rendered, row.FailedOpen = rend1-rend0, fail1-fail0
	stages1 := r.stages()
	row.StageP50, row.StageMean = stages1.p50Since(stages0), stages1.meanSince(stages0)
	row.StageP99 = stages1.quantileSince(stages0, 0.99)
	row.DirectP50, row.DirectP99 = pctMs(direct)
	row.BareP50, row.BareP99 = pctMs(bare)
	row.ProxyP50, row.ProxyP99 = pctMs(via)
	row.BareToP50, _ = pctMs(bareTo)
	row.BareBackP50, _ = pctMs(bareBack)
	row.ProxyToP50, _ = pctMs(viaTo)
	row.ProxyBackP50, _ = pctMs(viaBack)
	row.RatioP50, row.RatioP99 = ratio(row.ProxyP50, row.BareP50), ratio(row.ProxyP99, row.BareP99)
	row.bare, row.via = bare, via
	return row, nil
}

// settle waits until the proxy's log writes are done and the pipeline
// has handled them (not timed; the peer asks after each turn unless the
// rig runs back to back): the next turn starts on a rig with nothing left
// over from this one, as a real agent's next request finds it after the
// model's answer and the tools.
func (r *replayRig) settle(ctx context.Context) error {
	if err := r.px.Flush(ctx); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if err := r.svc.Pipeline.WaitIdle(ctx); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	return nil
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// pctMs is p50 and p99 in milliseconds.
func pctMs(ds []time.Duration) (p50, p99 float64) {
	a, b := percentiles(ds)
	return ms(a), ms(b)
}

// serveLoopback serves h on a free loopback port, adds the server to
// servers (for the caller to close) and returns its base URL. setup (nil:
// none) configures the server first, as a proxy's ConfigureServer.
func serveLoopback(servers *[]*http.Server, h http.Handler, setup func(*http.Server)) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: h}
	if setup != nil {
		setup(srv)
	}
	*servers = append(*servers, srv)
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}
