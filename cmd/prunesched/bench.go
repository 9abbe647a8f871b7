package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/prunesched/prunesched/bench"
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
the default fsync interval. Goals are reported, never asserted. Progress
goes to stderr.`)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	quick := fs.Bool("quick", false, "smaller workloads: seconds instead of minutes, noisier numbers")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to FILE (go tool pprof FILE)")
	only := fs.String("only", "", "comma-separated sections to run ("+strings.Join(bench.Sections, ", ")+"); default all")
	policyPath := fs.String("policy", "", "policy file (YAML); empty = defaults")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	pol, err := loadPolicy(*policyPath)
	if err != nil {
		return err
	}
	cfg := bench.Config{Quick: *quick, Policy: &pol}
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
