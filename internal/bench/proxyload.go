package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prunesched/prunesched/internal/bench/replay"
	"github.com/prunesched/prunesched/internal/importers"
)

// LoadRow is one level of proxy-load: Sessions agents at once through one
// proxy, each replaying a real Claude Code request sequence (Anthropic
// Messages, not streamed), each request sent straight to the fake
// upstream and through the proxy, the upstream thinking Config.Think
// before each answer.
type LoadRow struct {
	Sessions int `json:"sessions"`
	// Requests is the number of requests sent through the proxy.
	Requests int `json:"requests"`
	// RatePerS is Requests per second of the level's wall time.
	RatePerS float64 `json:"requests_per_s"`
	// AddedP50 and AddedP99 are the added latency through the proxy
	// against the same request sent straight (ms), think time left out.
	AddedP50 float64 `json:"added_p50_ms"`
	AddedP99 float64 `json:"added_p99_ms"`
	// FailedOpen counts the requests the proxy sent on unchanged after a
	// failure or its budget (prunesched_proxy_requests_total).
	FailedOpen    int     `json:"failed_open"`
	FailedOpenPct float64 `json:"failed_open_pct"`
	// Facts is the number of facts the level appended to the log, and
	// CPUSeconds the bench process's CPU time (user and system,
	// getrusage) from the level's first request until its log writes and
	// the pipeline behind them finished: the proxy, the embedded server
	// and the workers (the agents and the fake upstream run in the replay
	// peer's process). FactsPerCPUSecond is Facts / CPUSeconds: facts per
	// second per core for the whole pipeline, request path included.
	Facts             int     `json:"facts"`
	CPUSeconds        float64 `json:"cpu_s"`
	FactsPerCPUSecond float64 `json:"facts_per_cpu_s"`
}

// Goals for proxy-load (issue 28): fewer than GoalLoadFailOpenPct percent
// of requests fail open at GoalLoadSessions sessions at once, and the
// rate reported is the highest at an added p99 of at most
// GoalLoadP99Ms.
const (
	GoalLoadSessions    = 50
	GoalLoadFailOpenPct = 1.0
	GoalLoadP99Ms       = 5.0
)

// loadLevels are proxy-load's numbers of sessions at once.
var loadLevels = []int{1, 2, 4, 8, 16, 32, 50}

// proxyLoad runs proxy-load: one proxy (fresh log), one level after the
// other, the rig settled between levels.
func (b *runner) proxyLoad(ctx context.Context) error {
	if len(b.cfg.Traces) == 0 {
		return fmt.Errorf("no traces to replay (see --traces)")
	}
	limit := b.pick(60, 20)
	var seqs [][]peerTurn
	var names []string
	for _, path := range b.cfg.Traces {
		sessions, err := importers.Import(path, importers.FormatAuto)
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		for _, s := range sessions {
			if s.Format != importers.FormatClaudeCode {
				continue
			}
			turns := replay.FromEvents(s.Events).Build(replay.Anthropic, false)
			if len(turns) > limit {
				turns = turns[:limit]
			}
			if len(turns) == 0 {
				continue
			}
			var seq []peerTurn
			for _, t := range turns {
				seq = append(seq, peerTurn{Body: t.Body, Answer: t.Answer, ContentType: t.ContentType})
			}
			seqs = append(seqs, seq)
			names = append(names, strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)))
		}
	}
	if len(seqs) == 0 {
		return fmt.Errorf("load: no Claude Code trace among %d traces", len(b.cfg.Traces))
	}
	rig, err := b.startReplayRig(ctx)
	if err != nil {
		return err
	}
	defer rig.close()
	levels := loadLevels
	if b.cfg.Smoke {
		levels = []int{1, 2}
	}
	if v := os.Getenv(loadLevelsEnv); v != "" {
		levels = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("load: %s=%q: want numbers of sessions, comma-separated", loadLevelsEnv, v)
			}
			levels = append(levels, n)
		}
	}
	b.progress("proxy-load: %d Claude Code sequences (%s), up to %d requests each, think %s", len(seqs), strings.Join(names, ", "), limit, b.cfg.Think)
	profDir := os.Getenv(loadProfEnv)
	var nc *natsCounter
	if os.Getenv(loadNATSEnv) != "" {
		if nc, err = countNATS(rig.svc.Store.JS().Conn()); err != nil {
			return err
		}
		defer nc.stop()
	}
	for _, n := range levels {
		if nc != nil {
			nc.take()
		}
		_, fail0 := rig.outcomes()
		st0 := rig.stages()
		facts0, err := countFacts(ctx, rig.svc.Store)
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		job := &peerJob{Session: fmt.Sprintf("load-%d", n), API: replay.Anthropic, URLs: rig.urls, Think: int64(b.cfg.Think),
			Load: &peerLoad{Sessions: n, Seqs: seqs}}
		// CPU and profiles start once the job (every request body) is
		// sent to the peer.
		stopProf := func() {}
		var cpu0 time.Duration
		var profErr error
		sent, wall, err := rig.peer.runLoad(job, func() {
			stopProf, profErr = startLoadProfile(profDir, n)
			cpu0 = processCPU()
		})
		if err == nil {
			err = profErr
		}
		if err != nil {
			if stopProf != nil {
				stopProf()
			}
			return err
		}
		_, fail1 := rig.outcomes()
		var natsSent map[string]int
		if nc != nil {
			natsSent = nc.take()
		}
		// The level's log writes and the pipeline behind them are its
		// work too: CPU and facts are read once they are done.
		if err := rig.settle(ctx); err != nil {
			stopProf()
			return err
		}
		cpu := processCPU() - cpu0
		stopProf()
		facts1, err := countFacts(ctx, rig.svc.Store)
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		var added, addedTo, addedBack []time.Duration
		for _, d := range sent {
			added = append(added, d[2].total()-d[0].total())
			addedTo = append(addedTo, d[2].to-d[0].to)
			addedBack = append(addedBack, d[2].back-d[0].back)
		}
		row := LoadRow{Sessions: n, Requests: len(sent), FailedOpen: fail1 - fail0, Facts: int(facts1 - facts0), CPUSeconds: cpu.Seconds()}
		if cpu > 0 {
			row.FactsPerCPUSecond = float64(row.Facts) / cpu.Seconds()
		}
		row.AddedP50, row.AddedP99 = pctMs(added)
		if wall > 0 {
			row.RatePerS = float64(len(sent)) / wall.Seconds()
		}
		if row.Requests > 0 {
			row.FailedOpenPct = 100 * float64(row.FailedOpen) / float64(row.Requests)
		}
		b.res.ProxyLoad = append(b.res.ProxyLoad, row)
		b.progress("proxy-load: %d sessions: %d requests, %.0f/s through the proxy, added p50 %.2f ms p99 %.2f ms, %d failed open (%.1f%%), %d facts, %.2f s CPU (%.0f facts/s per core)",
			n, row.Requests, row.RatePerS, row.AddedP50, row.AddedP99, row.FailedOpen, row.FailedOpenPct, row.Facts, row.CPUSeconds, row.FactsPerCPUSecond)
		to50, to99 := pctMs(addedTo)
		back50, back99 := pctMs(addedBack)
		b.progress("proxy-load: %d sessions: added on the way to the upstream p50 %.2f ms p99 %.2f ms, on the way back p50 %.2f ms p99 %.2f ms", n, to50, to99, back50, back99)
		if nc != nil {
			b.progress("proxy-load: %d sessions: NATS messages per request while the agents ran: %s", n, perRequest(natsSent, row.Requests))
			b.progress("proxy-load: %d sessions: NATS messages per request while the log writes and pipeline settled: %s", n, perRequest(nc.take(), row.Requests))
		}
		st1 := rig.stages()
		b.progress("proxy-load: %d sessions: the proxy's stages (ms), p50: added %.2f, %s; p99: added %.2f, %s", n,
			st1.quantileSince(st0, 0.5)["added"], stageSummary(st1.quantileSince(st0, 0.5)), st1.quantileSince(st0, 0.99)["added"], stageSummary(st1.quantileSince(st0, 0.99)))
	}
	return nil
}

// loadProfEnv names a directory: when set, proxy-load writes a CPU
// profile (cpu-N.pprof) and an execution trace (trace-N.out) of the bench
// process for each level of N sessions, from its first request until its
// log writes and pipeline are done (go tool pprof, go tool trace), and
// the fleet section the same for each step of K agents in its fleet/
// subdirectory, while the agents send.
const loadProfEnv = "PRUNESCHED_LOAD_PROF"

// loadLevelsEnv, when set, replaces proxy-load's levels with its own
// comma-separated numbers of sessions (for profiling one range of them,
// or more requests at a few levels without --quick).
const loadLevelsEnv = "PRUNESCHED_LOAD_LEVELS"

// startLoadProfile starts the CPU profile and execution trace of level n
// in dir ("" : none) and returns what stops them. A CPU profile already
// running (--cpuprofile) is left alone.
func startLoadProfile(dir string, n int) (stop func(), err error) {
	if dir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("load profile: %w", err)
	}
	cf, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", n)))
	if err != nil {
		return nil, fmt.Errorf("load profile: %w", err)
	}
	tf, err := os.Create(filepath.Join(dir, fmt.Sprintf("trace-%d.out", n)))
	if err != nil {
		cf.Close()
		return nil, fmt.Errorf("load profile: %w", err)
	}
	cpuOn := pprof.StartCPUProfile(cf) == nil
	if err := trace.Start(tf); err != nil {
		if cpuOn {
			pprof.StopCPUProfile()
		}
		cf.Close()
		tf.Close()
		return nil, fmt.Errorf("load trace: %w", err)
	}
	return func() {
		trace.Stop()
		if cpuOn {
			pprof.StopCPUProfile()
		}
		cf.Close()
		tf.Close()
	}, nil
}

// processCPU is this process's CPU time so far, user and system
// (getrusage); 0 where it cannot be read.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadBest is the highest rate of the levels with an added p99 within
// GoalLoadP99Ms and fewer than GoalLoadFailOpenPct failing open (0 when
// none), and its number of sessions.
func loadBest(rows []LoadRow) (rate float64, sessions int) {
	for _, r := range rows {
		if r.AddedP99 <= GoalLoadP99Ms && r.FailedOpenPct < GoalLoadFailOpenPct && r.RatePerS > rate {
			rate, sessions = r.RatePerS, r.Sessions
		}
	}
	return rate, sessions
}
