package analyze

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/scheduler"
)

// sharedTraces returns the Claude Code and OpenCode traces, or skips.
//
// Under -race it returns raceTraces only, the full set costing about a
// minute of the race stage; .ci/run's stage "full input sets, without
// -race" runs the same tests on every trace.
func sharedTraces(t *testing.T) []string {
	t.Helper()
	root := filepath.Join("..", "..", "..", "..", "shared", "traces")
	var files []string
	for _, pat := range []string{"claude-code/*.jsonl", "opencode/*.json"} {
		m, _ := filepath.Glob(filepath.Join(root, pat))
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Skipf("no shared traces under %s", root)
	}
	if !testutil.Race {
		return files
	}
	var some []string
	for _, name := range raceTraces {
		f := filepath.Join(root, name)
		if !slices.Contains(files, f) {
			t.Fatalf("race subset: %s is not among the shared traces; choose another in raceTraces", f)
		}
		some = append(some, f)
	}
	return some
}

// raceTraces are the traces the tests read under -race (a fifth of the
// bytes of all): both formats, sessions side by side, applications,
// 22 placeholders, and the one smaller OpenCode trace whose host pruned
// outputs itself (for the host agreement).
var raceTraces = []string{
	"claude-code/entirecli-13-db96e5c261-0.jsonl",
	"opencode/darkfactory-curious-harbor.json",
	"opencode/darkfactory-hidden-river.json",
	"opencode/darkfactory-silent-panda.json",
}

// allTraces is one analysis of every shared Claude Code and OpenCode trace,
// shared by the tests that read it (the pipeline over all of them is the
// package's slowest step, and its report does not change between tests).
var allTraces struct {
	once  sync.Once
	files []string
	rep   *Report
	err   error
}

// analyzeAll returns the shared analysis of every trace, running it once.
func analyzeAll(t *testing.T) ([]string, *Report) {
	t.Helper()
	files := sharedTraces(t)
	allTraces.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		allTraces.files = files
		allTraces.rep, allTraces.err = Run(ctx, Config{Files: files, Policy: policy.Default()})
	})
	if allTraces.err != nil {
		t.Fatal(allTraces.err)
	}
	return allTraces.files, allTraces.rep
}

// TestAnalyzeRealTraces runs the whole pipeline over every Claude Code and
// OpenCode trace and checks the report's invariants: the token ledger adds
// up, every PRUNE names a rung, the applications the pipeline published are
// the ones the scheduler's own simulation makes (the pipeline is the pure
// core, whatever the interleaving), and the run is deterministic: a trace
// analysed alone gives what it gave among all the others.
func TestAnalyzeRealTraces(t *testing.T) {
	t.Parallel()
	files, rep := analyzeAll(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pol := policy.Default()
	if len(rep.Sessions) != len(files) {
		t.Fatalf("%d sessions from %d files", len(rep.Sessions), len(files))
	}
	prunes := 0
	for _, s := range rep.Sessions {
		tk := s.Tokens
		if tk.Rendered > tk.Raw {
			t.Errorf("%s: rendered %d > raw %d", s.Source, tk.Rendered, tk.Raw)
		}
		if tk.Removed < 0 || tk.Placeholder < 0 || (tk.Removed == 0) != (tk.Placeholder == 0) {
			t.Errorf("%s: removed %d, placeholder %d", s.Source, tk.Removed, tk.Placeholder)
		}
		for _, d := range s.Decisions {
			if d.Decision == events.Prune {
				prunes++
				if d.Rung == "" && d.Reason != events.ReasonManualPrune && d.Reason != events.ReasonErroredInput {
					t.Errorf("%s: PRUNE of %s without a rung", s.Source, d.Item)
				}
			}
		}
		if s.Economics == nil || s.Economics.TokensSent[scheduler.StrategyNone] == 0 {
			t.Errorf("%s: no economics", s.Source)
		}
	}
	if prunes == 0 {
		t.Fatal("no PRUNE decision over all real traces")
	}

	// The pipeline's applications equal a pure replay of its own log, on
	// the trace with the most applications.
	best := rep.Sessions[0]
	for _, s := range rep.Sessions {
		if len(s.Applications) > len(best.Applications) {
			best = s
		}
	}
	if len(best.Applications) == 0 {
		t.Fatal("no application over all real traces")
	}
	one := []string{best.Source}
	dir := t.TempDir()
	rep1, err := Run(ctx, Config{Files: one, Policy: pol, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.Start(ctx, service.Config{DataDir: dir, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	logged, err := svc.Store.ReadSession(ctx, events.DefaultTenant, rep1.Sessions[0].Session)
	svc.Close()
	if err != nil {
		t.Fatal(err)
	}
	var inLog []string
	for _, e := range logged {
		if a, ok := e.Data.(*events.Application); ok {
			inLog = append(inLog, a.Request+":"+string(a.Trigger))
		}
	}
	var simulated []string
	for _, a := range scheduler.Simulate(pol, logged, scheduler.StrategyScheduled).Applications {
		simulated = append(simulated, a.RequestID+":"+string(a.Trigger))
	}
	if len(inLog) == 0 || !reflect.DeepEqual(inLog, simulated) {
		t.Errorf("pipeline applications %v, pure simulation %v", inLog, simulated)
	}
	// Deterministic: the trace alone gives what it gave among all the
	// others (another run, another interleaving of sessions).
	if !reflect.DeepEqual(rep1.Sessions[0].Decisions, best.Decisions) ||
		!reflect.DeepEqual(rep1.Sessions[0].Applications, best.Applications) ||
		!reflect.DeepEqual(rep1.Sessions[0].Tokens, best.Tokens) {
		t.Error("two runs over the same trace disagree")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("kept log directory gone: %v", err)
	}
}

// TestRunPrevalenceEndToEnd runs analyze --prevalence's path (RunPrevalence
// is Run, then Prevalence over the imported sessions) over the real traces:
// the total adds up over formats and the host comparison covers every
// host-pruned output.
func TestRunPrevalenceEndToEnd(t *testing.T) {
	t.Parallel()
	files, rep := analyzeAll(t)
	pr, err := Prevalence(rep, rep.Imported, policy.Default(), tokens.New())
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Sessions) != len(files) {
		t.Fatalf("%d sessions for %d files", len(pr.Sessions), len(files))
	}
	sum := 0
	for _, g := range pr.Formats {
		sum += g.Tokens
	}
	if sum != pr.Total.Tokens || pr.Total.Tokens == 0 {
		t.Errorf("format tokens add up to %d, total %d", sum, pr.Total.Tokens)
	}
	if pr.Total.ToolOutputShare <= 0 || pr.Total.ToolOutputShare > 1 {
		t.Errorf("tool output share %v", pr.Total.ToolOutputShare)
	}
	h := pr.HostTotal
	if h.HostPruned == 0 || h.Both+h.OnlyHost != h.HostPruned {
		t.Errorf("host agreement does not cover the host's prunes: %+v", h)
	}
}
