// Package bench measures prunesched against baselines taken in the same
// run: the pipeline against raw JetStream publish and replay on the same
// embedded server with the same message sizes, the render path and the
// proxy against the per-request budget, the eligibility core without NATS,
// memory per session, and the cost of fsyncing every write (SyncAlways).
// It is what `prunesched bench` runs.
//
// It owns measurement only: it starts its own temporary embedded servers
// and never touches a running prunesched's data. Results are numbers and
// ratios; whether a goal is met is reported, never asserted.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/prunesched/prunesched/policy"
)

// Config says what to run. The zero value runs the full bench with the
// default policy.
type Config struct {
	// Quick runs smaller workloads (seconds instead of minutes), for smoke
	// checks. Numbers are noisier.
	Quick bool
	// Smoke runs every section once on sessions a tenth of the usual
	// sizes, with the fewest repetitions that still go through each code
	// path. It is for tests, which check that the bench runs and what it
	// reports, never its numbers. It implies Quick.
	Smoke bool
	// Policy drives the cores. Zero value: policy.Default().
	Policy *policy.Policy
	// Progress receives one line per step; nil is silent.
	Progress io.Writer
	// TempDir is where the temporary servers keep their files. Default:
	// os.TempDir().
	TempDir string
	// Only, when not empty, runs only the named sections (see Sections).
	Only []string
	// Traces are the Claude Code and OpenCode traces proxy-replay replays
	// (FindTraces). Without them the section is skipped when every
	// section runs, and an error when it is asked for.
	Traces []string
	// BackToBack makes proxy-replay send each request right after the
	// one before, without waiting for the proxy's log writes and the
	// pipeline behind them to finish: the work one request leaves behind
	// then runs during the next requests' measurements (the bench's way
	// before issue 28). By default each turn starts on a settled rig, as
	// an agent's next request comes after the model's answer and the
	// tools ran (seconds).
	BackToBack bool
	// Think is how long the fake upstream of proxy-replay, proxy-load and
	// fleet waits, after reading a request, before it answers (a model's time to its first token,
	// which is seconds for a real model). Whatever the proxy does in the
	// background after forwarding (its log write, the pipeline behind
	// it) runs during that wait, as it does in front of a real model. The
	// wait, measured at the upstream, is taken out of every way's time,
	// so it adds nothing to the latencies compared. 0: answer at once (the
	// background work then competes with the relay of the answer).
	Think time.Duration
	// ReplayPeer is the command that runs proxy-replay's agent and model
	// (ServeReplayPeer on its standard input and output) in a process of
	// its own, as they are in a real deployment: `prunesched bench` gives
	// itself with --replay-peer. Empty: a goroutine of this process, which
	// shares the Go scheduler with the proxies (the smoke tests).
	ReplayPeer []string
	// FleetSpeedup divides the recorded gaps between each fleet agent's
	// requests (0: DefaultFleetSpeedup; negative: back to back). Smoke
	// runs send back to back.
	FleetSpeedup float64
	// FleetNode is the command that runs one node of the fleet bench's
	// cluster (RunNode, the node's spec as its last argument) in a
	// process of its own, so that each node's memory is its own and can
	// be read: `prunesched bench` gives itself with --fleet-node. Empty:
	// the nodes run in this process (the smoke tests).
	FleetNode []string
}

// DefaultThink is Config.Think's default for the bench command: far below
// any real model's time to first token, and longer than the proxy's
// background work per request on the shared traces.
const DefaultThink = 20 * time.Millisecond

// Goals for proxy-replay (issue 28): the added latency p50 and p99 at most
// this many times a bare reverse proxy's, in the same run.
const (
	GoalReplayRatioP50 = 3.0
	GoalReplayRatioP99 = 3.0
)

// Sections lists the bench's sections in the order they run.
var Sections = []string{"core", "memory", "session-memory", "log", "render", "durability", "proxy", "proxy-replay", "proxy-load", "fleet"}

// Result is one run's measurements. Rates are per second of wall time;
// latencies in milliseconds, keyed by session size in items.
type Result struct {
	Machine Machine `json:"machine"`
	Quick   bool    `json:"quick"`
	// Smoke says the run used Config.Smoke: its numbers are not
	// measurements.
	Smoke bool `json:"smoke,omitempty"`

	// RawPublishPerS is JetStream async publish of the pipeline's encoded
	// events (same sizes) to a plain stream: the baseline.
	RawPublishPerS float64 `json:"raw_publish_per_s"`
	// PipelinePerS is facts per second from the first publish (store
	// Append) until every fact is judged, scheduled and projected.
	PipelinePerS float64 `json:"pipeline_per_s"`
	// PipelineRatio is PipelinePerS / RawPublishPerS. The goal it had
	// (>= 0.5) is retired (issue 28): PipelinePerSPerCore is reported.
	PipelineRatio float64 `json:"pipeline_ratio"`
	// PipelinePerSPerCore is PipelinePerS over the cores the run had
	// (GOMAXPROCS): the embedded server, the writers and the workers
	// share them.
	PipelinePerSPerCore float64 `json:"pipeline_per_s_per_core"`
	// PipelineFacts and PipelineSessions describe that workload.
	PipelineFacts    int `json:"pipeline_facts"`
	PipelineSessions int `json:"pipeline_sessions"`
	// RawReplayPerS is an ordered consumer reading the whole event stream
	// without decoding: the baseline of the rebuild (the median over
	// RebuildPairs).
	RawReplayPerS float64 `json:"raw_replay_per_s"`
	// RebuildPerS is a fresh projection worker rebuilding every session
	// from the same stream (decode + project; the median over
	// RebuildPairs).
	RebuildPerS float64 `json:"rebuild_per_s"`
	// RebuildRatio is the median over RebuildPairs of each pair's
	// rebuild rate / raw replay rate (goal >= 0.8).
	RebuildRatio float64 `json:"rebuild_ratio"`
	// RebuildRatioMin and RebuildRatioMax are the lowest and highest pair
	// ratios: the run's own spread.
	RebuildRatioMin float64 `json:"rebuild_ratio_min"`
	RebuildRatioMax float64 `json:"rebuild_ratio_max"`
	// RebuildPairs are the adjacent (raw replay, rebuild) pairs the
	// ratio is the median of, in the order they ran.
	RebuildPairs []RebuildPair `json:"rebuild_pairs,omitempty"`
	// StreamMessages is how many messages the replays read.
	StreamMessages uint64 `json:"stream_messages"`

	// RenderP50Ms and RenderP99Ms are the render-at-request path: the
	// scheduler's live decision (DecideLive, publishing the application),
	// the projection catching up with it, the bundle, and the Anthropic
	// rendering with tool outputs fetched by content address (goal p99 <=
	// 2 ms at 2,000 items).
	RenderP50Ms map[string]float64 `json:"render_p50_ms"`
	RenderP99Ms map[string]float64 `json:"render_p99_ms"`
	// RenderRequests is the number of timed renders per size.
	RenderRequests int `json:"render_requests"`

	// CoreEventsPerS is the eligibility core alone (one goroutine, no
	// NATS) over a 20,000-item session: the median of CoreRoundsPerS
	// (goal >= 1M).
	CoreEventsPerS float64 `json:"core_events_per_s"`
	// CoreEventsPerSMin and CoreEventsPerSMax are the slowest and fastest
	// rounds (the fastest is what the bench reported before it took the
	// median).
	CoreEventsPerSMin float64 `json:"core_events_per_s_min"`
	CoreEventsPerSMax float64 `json:"core_events_per_s_max"`
	// CoreRoundsPerS is every round's rate, in the order they ran, each
	// on a fresh core.
	CoreRoundsPerS []float64 `json:"core_rounds_per_s,omitempty"`
	// CoreCPUNsPerEvent is the median round's CPU time per event, of the
	// whole process (user and system, the garbage collector's workers
	// included; nothing else runs then): another process taking a core
	// slows the wall-time rate, not this, so it compares runs at
	// different loads (0: not measured).
	CoreCPUNsPerEvent float64 `json:"core_cpu_ns_per_event"`
	// SchedulerDecideUs is the scheduler core's Decide at 2,000 items
	// (microseconds, median), for reference.
	SchedulerDecideUs float64 `json:"scheduler_decide_us"`

	// MemoryPerSessionBytes is the heap retained per session by the
	// projection and the eligibility and scheduler cores, keyed by size.
	MemoryPerSessionBytes map[string]float64 `json:"memory_per_session_bytes"`
	// SessionMemory is a session's memory in the running pipeline per
	// holder, hot and idle (evicted to its compact form), per size.
	SessionMemory []SessionMemory `json:"session_memory,omitempty"`
	// IdleRSS is the process's resident memory with many idle sessions.
	IdleRSS *IdleRSS `json:"idle_rss,omitempty"`

	// ProxyP50Ms and ProxyP99Ms are the latency the proxy adds per request
	// (MeasureOverhead; goal p99 <= 5 ms at 2,000 items).
	ProxyP50Ms map[string]float64 `json:"proxy_p50_ms"`
	ProxyP99Ms map[string]float64 `json:"proxy_p99_ms"`
	// ProxyReplay is the proxy on real request sequences, against a bare
	// reverse proxy in the same run (goals: GoalReplayRatioP50 and
	// GoalReplayRatioP99).
	ProxyReplay []ReplayRow `json:"proxy_replay,omitempty"`
	// ProxyReplayPooled is every request of the real sequences together.
	ProxyReplayPooled *ReplayPooled `json:"proxy_replay_pooled,omitempty"`
	// ProxyReplayProbe is, when proxy-replay runs probed
	// (PRUNESCHED_REPLAY_PROBE), where its real sequences' requests spent
	// their time, by class.
	ProxyReplayProbe *ProbeSummary `json:"proxy_replay_probe,omitempty"`
	// ProxyLoad is one proxy under 1 to 50 agents at once (LoadRow).
	ProxyLoad []LoadRow `json:"proxy_load,omitempty"`
	// Fleet is three --fleet proxies on a three-node cluster in this
	// process under K agents, K doubling until the added p99 passes 10 ms
	// or 1% fail open (the last row is then the first over).
	Fleet []FleetRow `json:"fleet,omitempty"`
	// FleetSpeedup is what the fleet's agents' recorded gaps between
	// requests were divided by (0: back to back).
	FleetSpeedup float64 `json:"fleet_speedup,omitempty"`

	// SyncAlways compares store appends with SyncAlways off (the default)
	// and on, single events and batches.
	SyncAlways []SyncRow `json:"sync_always"`

	// Targets says which goals the run met.
	Targets []Target `json:"targets"`
	// Seconds is the run's wall time.
	Seconds float64 `json:"seconds"`
}

// SyncRow is one durability measurement: store appends of Batch events at
// a time, on a server with SyncAlways off and on.
type SyncRow struct {
	Batch          int     `json:"batch"`
	DefaultPerS    float64 `json:"default_per_s"`
	SyncAlwaysPerS float64 `json:"sync_always_per_s"`
	// Ratio is SyncAlwaysPerS / DefaultPerS.
	Ratio float64 `json:"ratio"`
}

// Target is one goal and whether this run met it.
type Target struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Goal  string  `json:"goal"`
	Met   bool    `json:"met"`
}

// Machine describes where the run happened.
type Machine struct {
	CPU        string `json:"cpu"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	MemTotal   string `json:"mem_total"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
}

// Run runs the bench. It fails on the first section that cannot run;
// measurements never fail it.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	start := time.Now()
	pol := policy.Default()
	if cfg.Policy != nil {
		pol = *cfg.Policy
	}
	if cfg.TempDir == "" {
		cfg.TempDir = os.TempDir()
	}
	if cfg.Smoke {
		cfg.Quick = true
	}
	r := &Result{
		Machine: machine(), Quick: cfg.Quick, Smoke: cfg.Smoke,
		RenderP50Ms: map[string]float64{}, RenderP99Ms: map[string]float64{},
		MemoryPerSessionBytes: map[string]float64{},
		ProxyP50Ms:            map[string]float64{}, ProxyP99Ms: map[string]float64{},
	}
	b := newRunner(cfg, pol, r)
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"core", b.core},
		{"memory", b.memory},
		{"session-memory", b.sessionMemory},
		{"log", b.logRates},
		{"render", b.render},
		{"durability", b.durability},
		{"proxy", b.proxy},
		{"proxy-replay", b.proxyReplay},
		{"proxy-load", b.proxyLoad},
		{"fleet", b.fleet},
	}
	for _, s := range steps {
		if !b.want(s.name) {
			continue
		}
		if (s.name == "proxy-replay" || s.name == "proxy-load" || s.name == "fleet") && len(cfg.Traces) == 0 && len(cfg.Only) == 0 {
			b.progress("%s skipped: no traces (--traces)", s.name)
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		b.progress("%s ...", s.name)
		t := time.Now()
		if err := s.fn(ctx); err != nil {
			return nil, fmt.Errorf("bench %s: %w", s.name, err)
		}
		b.progress("%s done in %.1fs", s.name, time.Since(t).Seconds())
	}
	r.Targets = targets(r)
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// runner carries one run's state.
type runner struct {
	cfg Config
	pol policy.Policy
	res *Result
	w   *workload
	log *slog.Logger
}

func (b *runner) want(section string) bool {
	if len(b.cfg.Only) == 0 {
		return true
	}
	for _, s := range b.cfg.Only {
		if s == section {
			return true
		}
	}
	return false
}

func (b *runner) progress(format string, args ...any) {
	if b.cfg.Progress != nil {
		fmt.Fprintf(b.cfg.Progress, "bench: "+format+"\n", args...)
	}
}

// pick returns quick in quick mode (a quarter of it, at least 1, in smoke
// mode), full otherwise.
func (b *runner) pick(full, quick int) int {
	switch {
	case b.cfg.Smoke:
		return max(1, quick/4)
	case b.cfg.Quick:
		return quick
	}
	return full
}

// size returns a session size in items: n, or a tenth of it in smoke mode.
// Results are keyed by the size actually run.
func (b *runner) size(n int) int {
	if b.cfg.Smoke {
		return max(1, n/10)
	}
	return n
}

func targets(r *Result) []Target {
	var out []Target
	add := func(name string, v float64, goal string, met bool, measured bool) {
		if measured {
			out = append(out, Target{Name: name, Value: v, Goal: goal, Met: met})
		}
	}
	// The rebuild ratio and the core's rate are medians (of adjacent
	// replay and rebuild pairs, of rounds): the goal holds for the
	// typical pair or round, not the luckiest.
	add("rebuild_ratio", r.RebuildRatio, fmt.Sprintf(">= 0.8 (median of %d pairs)", len(r.RebuildPairs)), r.RebuildRatio >= 0.8, r.RawReplayPerS > 0)
	if v, ok := r.RenderP99Ms["2000"]; ok {
		add("render_p99_ms@2000", v, "<= 2", v <= 2, true)
	}
	add("core_events_per_s", r.CoreEventsPerS, fmt.Sprintf(">= 1000000 (median of %d rounds)", len(r.CoreRoundsPerS)), r.CoreEventsPerS >= 1e6, r.CoreEventsPerS > 0)
	for _, m := range r.SessionMemory {
		if m.Items == 2000 {
			add("idle_session_bytes@2000", m.IdleBytes, "<= 65536 + fact-id index", m.IdleBytes <= 64<<10, true)
		}
	}
	if v, ok := r.ProxyP99Ms["2000"]; ok {
		add("proxy_p99_ms@2000", v, "<= 5", v <= 5, true)
	}
	if len(r.ProxyReplay) > 0 {
		var w50, w99 float64
		for _, row := range r.ProxyReplay {
			w50, w99 = max(w50, row.RatioP50), max(w99, row.RatioP99)
		}
		add("proxy_replay_ratio_p50 (worst)", w50, fmt.Sprintf("<= %g", GoalReplayRatioP50), w50 <= GoalReplayRatioP50, true)
		add("proxy_replay_ratio_p99 (worst)", w99, fmt.Sprintf("<= %g", GoalReplayRatioP99), w99 <= GoalReplayRatioP99, true)
	}
	if p := r.ProxyReplayPooled; p != nil {
		add("proxy_replay_ratio_p50 (all requests)", p.RatioP50, fmt.Sprintf("<= %g", GoalReplayRatioP50), p.RatioP50 <= GoalReplayRatioP50, true)
		add("proxy_replay_ratio_p99 (all requests)", p.RatioP99, fmt.Sprintf("<= %g", GoalReplayRatioP99), p.RatioP99 <= GoalReplayRatioP99, true)
	}
	if len(r.ProxyLoad) > 0 {
		rate, n := loadBest(r.ProxyLoad)
		add(fmt.Sprintf("proxy_load_requests_per_s at p99 <= %g ms (%d sessions)", GoalLoadP99Ms, n), rate, "reported", true, true)
		for _, row := range r.ProxyLoad {
			if row.Sessions == GoalLoadSessions {
				add(fmt.Sprintf("proxy_load_failed_open_pct@%d", GoalLoadSessions), row.FailedOpenPct, fmt.Sprintf("< %g", GoalLoadFailOpenPct), row.FailedOpenPct < GoalLoadFailOpenPct, true)
			}
		}
	}
	return out
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	m.CPU, m.MemTotal = cpuAndMemory()
	return m
}

// errNoProgress is returned when a measured stage stops moving.
var errNoProgress = errors.New("no progress")

// newRunner is a runner of the sections with cfg and pol, writing res:
// the workload built, its log discarded.
func newRunner(cfg Config, pol policy.Policy, res *Result) *runner {
	return &runner{cfg: cfg, pol: pol, res: res, w: newWorkload(), log: slog.New(slog.DiscardHandler)}
}
