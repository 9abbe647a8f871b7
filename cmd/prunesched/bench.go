package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/prunesched/prunesched/internal/bench"
)

func runBench(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "bench", "[flags]", `
Measure, in one run on temporary embedded servers: raw JetStream async
publish and ordered replay (the baselines, same message sizes as the
pipeline's events); the pipeline end to end (publish to projected bundle)
and the projection rebuild, as ratios to those baselines; the
render-at-request latency (live decision + bundle + Anthropic rendering)
at 200, 2,000 and 20,000 items; the eligibility core alone; memory per
session; the latency the proxy adds; and the cost of SyncAlways against
the default fsync interval; and (proxy-replay) the request sequences of
real Claude Code and OpenCode traces rebuilt as Anthropic Messages, Chat
Completions and Responses requests, streamed and not, sent straight to a
fake upstream, through a bare reverse proxy and through the proxy,
interleaved request by request. Goals are reported, never asserted. Progress
goes to stderr.`)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	quick := fs.Bool("quick", false, "smaller workloads: seconds instead of minutes, noisier numbers")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to FILE (go tool pprof FILE)")
	only := fs.String("only", "", "comma-separated sections to run ("+strings.Join(bench.Sections, ", ")+"); default all")
	policyPath := fs.String("policy", "", "policy file (YAML); empty = defaults")
	backToBack := fs.Bool("back-to-back", false, "proxy-replay: send each request right after the one before, without waiting for the proxy's log writes and the pipeline (default: each turn starts on a settled rig)")
	think := fs.Duration("think", bench.DefaultThink, "proxy-replay, proxy-load and fleet: how long the fake upstream waits before answering, as a model does before its first token; the proxy's background work runs meanwhile, and the wait is taken out of every latency compared (0: answer at once)")
	replayPeer := fs.Bool("replay-peer", false, "run proxy-replay's agent and fake model on standard input and output (the bench starts itself with it)")
	_ = fs.MarkHidden("replay-peer")
	fleetSpeedup := fs.Float64("fleet-speedup", bench.DefaultFleetSpeedup, "fleet: divide each agent's recorded gaps between requests (capped at 2 min) by this; 0 = back to back")
	fleetNode := fs.String("fleet-node", "", "run one node of the fleet bench's cluster, its spec in JSON (the bench starts itself with it)")
	_ = fs.MarkHidden("fleet-node")
	tracesDir := fs.String("traces", "", "directory with claude-code/*.jsonl and opencode/*.json traces for proxy-replay; empty = ../shared/traces next to the module root, if there")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *replayPeer {
		return bench.ServeReplayPeer(ctx, e.stdin, e.stdout)
	}
	if *fleetNode != "" {
		return bench.RunNode(ctx, *fleetNode, e.stdout, e.stdin)
	}
	if *fleetSpeedup < 0 {
		return usagef("--fleet-speedup: %g, want 0 (back to back) or more", *fleetSpeedup)
	}
	pol, err := loadPolicy(*policyPath)
	if err != nil {
		return err
	}
	if *think < 0 {
		return usagef("--think: %s is negative", *think)
	}
	cfg := bench.Config{Quick: *quick, Policy: &pol, BackToBack: *backToBack, Think: *think, FleetSpeedup: *fleetSpeedup}
	if *fleetSpeedup == 0 {
		cfg.FleetSpeedup = -1 // back to back
	}
	if exe, err := os.Executable(); err == nil {
		cfg.ReplayPeer = []string{exe, "bench", "--replay-peer"}
		cfg.FleetNode = []string{exe, "bench", "--fleet-node"}
	}
	if *only != "" {
		for _, s := range strings.Split(*only, ",") {
			s = strings.TrimSpace(s)
			if !slices.Contains(bench.Sections, s) {
				return usagef("--only: unknown section %q (want %s)", s, strings.Join(bench.Sections, ", "))
			}
			cfg.Only = append(cfg.Only, s)
		}
	}
	if !*quiet {
		cfg.Progress = e.stderr
	}
	if dir := *tracesDir; dir != "" || slices.Contains(cfg.Only, "proxy-replay") || len(cfg.Only) == 0 {
		if dir == "" {
			dir = defaultTracesDir()
		}
		if dir != "" {
			if cfg.Traces, err = bench.FindTraces(dir); err != nil && *tracesDir != "" {
				return usagef("--traces: %v", err)
			}
		}
		if len(cfg.Traces) == 0 && slices.Contains(cfg.Only, "proxy-replay") {
			return usagef("--only proxy-replay: no traces found; pass --traces DIR (with claude-code/*.jsonl, opencode/*.json)")
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.stdout, res)
	}
	bench.WriteTable(e.stdout, res)
	return nil
}

// defaultTracesDir is ../shared/traces next to the module root found
// from the working directory, or "" when there is none.
func defaultTracesDir() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			t := filepath.Join(dir, "..", "shared", "traces")
			if st, err := os.Stat(t); err == nil && st.IsDir() {
				return t
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
