// Package analyze runs prunesched end to end, offline, over trace files: a
// temporary embedded log, import, the whole pipeline (the same workers
// `serve` runs), and a per-session report of items, tokens and decisions. It
// owns the report's shape, not any decision in it.
package analyze

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// Config says what to analyze.
type Config struct {
	Files  []string
	Format string // "auto" or a format name
	Policy policy.Policy
	// DataDir keeps the log there (so `prunesched item --data DIR` works
	// afterwards); empty uses a temporary directory removed at the end.
	DataDir string
	// BundlesDir, when set, receives each session's final bundle as
	// ID.anthropic.json, ID.openai.json and ID.txt.
	BundlesDir string
	Logger     *slog.Logger
	// Progress receives one line per step; nil is silent.
	Progress io.Writer
	// Strict stops at the first file that fails; otherwise a failing file
	// is reported in Report.Failed and the others are analysed.
	Strict bool
	// Now is the clock progress ETAs are measured with (nil: time.Now).
	// It is never used by a decision.
	Now func() time.Time
}

// FileError is a file the analysis could not read, import or append.
type FileError struct {
	File  string `json:"file"`
	Error string `json:"error"`
}

// Report is the whole analysis.
type Report struct {
	Tokenizer     string          `json:"tokenizer"`
	PolicyVersion string          `json:"policy_version"`
	Sessions      []SessionReport `json:"sessions"`
	// Files counts the input files; Failed lists those that failed (each
	// error names the file and, for bad input, the line).
	Files  int         `json:"files"`
	Failed []FileError `json:"failed"`
	// Imported holds the imported sessions, in the order of Sessions (not
	// part of the JSON report), so later analyses need not import again.
	Imported []importers.Session `json:"-"`
}

// Tokens is a session's token ledger. Removed and Placeholder are ours;
// HostCompacted and HostPruned were removed by the agent host itself.
type Tokens struct {
	Raw           int `json:"raw"`
	Rendered      int `json:"rendered"`
	Removed       int `json:"removed"`
	Placeholder   int `json:"placeholder"`
	HostCompacted int `json:"host_compacted"`
	HostPruned    int `json:"host_pruned"`
}

// DecisionRow is the latest decision for one item: the projection's
// summary of it, whether the scheduler holds it back, and the tokens it
// frees.
type DecisionRow struct {
	projections.DecisionSummary
	// Pending is true when the timing scheduler holds the mark back (the
	// list 'prunesched pending' prints).
	Pending         bool `json:"pending"`
	TokensEstimated int  `json:"tokens_estimated"`
	// Tool and Source name the item for the readable report (not in the
	// JSON, whose rows stay the decisions alone).
	Tool   string `json:"-"`
	Source string `json:"-"`
}

// SessionReport is one session's figures.
type SessionReport struct {
	Source    string `json:"source"`
	Format    string `json:"format"`
	Session   string `json:"session"`
	SourceID  string `json:"source_id,omitempty"`
	Events    int    `json:"events"`
	Items     int    `json:"items"`
	ToolCalls int    `json:"tool_calls"`
	Requests  int    `json:"requests"`
	Tokens    Tokens `json:"tokens"`
	// DecisionCounts is the latest decision per item, by decision;
	// PrunesByRung the latest PRUNE decisions by rule (events.PruneRule:
	// the rung, "errored" for errored inputs, "manual" for a person's
	// prune), and TokensByRung
	// the tokens those prunes free (estimated, net of placeholders).
	DecisionCounts map[events.Decision]int `json:"decision_counts"`
	PrunesByRung   map[string]int          `json:"prunes_by_rung"`
	TokensByRung   map[string]int          `json:"tokens_by_rung"`
	// AbstentionRate is ABSTAIN over all decided items.
	AbstentionRate float64 `json:"abstention_rate"`
	// Applied counts the latest marks an application applied; Pending
	// those the timing scheduler holds back (its pending list).
	Applied   int           `json:"applied"`
	Pending   int           `json:"pending"`
	Decisions []DecisionRow `json:"decisions"`
	// Economics prices the session under no pruning, immediate
	// application and the timing scheduler; Applications are the
	// scheduler's applications in the log; Calibration compares the cache
	// model with the provider's reported cache tokens, where reported.
	Economics    *Economics             `json:"economics"`
	Applications []scheduler.AppSummary `json:"applications"`
	Calibration  *scheduler.Calibration `json:"calibration,omitempty"`
}

// Run imports every file, runs the pipeline to idle and reports.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	progress, now := cfg.progressf(), cfg.clock()
	rep := &Report{Tokenizer: tokens.Name, PolicyVersion: cfg.Policy.Version(), Sessions: []SessionReport{}, Files: len(cfg.Files), Failed: []FileError{}}
	all, failed, err := importFiles(ctx, cfg, now, progress)
	if err != nil {
		return nil, err
	}
	rep.Failed = append(rep.Failed, failed...)
	dir := cfg.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "prunesched-analyze-")
		if err != nil {
			return nil, fmt.Errorf("temporary log directory: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	svc, err := service.Start(ctx, service.Config{DataDir: dir, Policy: cfg.Policy, Logger: logger})
	if err != nil {
		return nil, err
	}
	defer svc.Close()
	start := time.Now()
	total := 0
	kept := all[:0]
	for _, im := range all {
		if _, err := svc.Store.Append(ctx, im.s.Events); err != nil {
			err = fmt.Errorf("append %s: %w", im.path, err)
			if cfg.Strict || ctx.Err() != nil {
				return nil, err
			}
			rep.Failed = append(rep.Failed, FileError{File: im.path, Error: err.Error()})
			progress("FAILED %v", err)
			continue
		}
		kept = append(kept, im)
		total += len(im.s.Events)
		progress("appended %s: session %s, %d events", im.path, im.s.Events[0].Session, len(im.s.Events))
	}
	all = kept
	progress("running the pipeline over %d events ...", total)
	if err := waitIdle(ctx, svc, progress); err != nil {
		return nil, err
	}
	progress("pipeline idle after %s", time.Since(start).Round(time.Millisecond))
	for _, im := range all {
		sr, err := sessionReport(ctx, svc, im.path, im.s)
		if err != nil {
			return nil, err
		}
		sr.Economics, sr.Applications, sr.Calibration, err = economics(ctx, svc, cfg.Policy, im.s.Events[0].TenantOrDefault(), sr.Session)
		if err != nil {
			return nil, err
		}
		if cfg.BundlesDir != "" {
			if err := writeBundles(ctx, svc, cfg.BundlesDir, sr.Session); err != nil {
				return nil, err
			}
		}
		rep.Sessions = append(rep.Sessions, sr)
		rep.Imported = append(rep.Imported, im.s)
	}
	return rep, nil
}

// progressf returns the function progress lines go through (to
// cfg.Progress, or nowhere).
func (cfg Config) progressf() func(format string, args ...any) {
	return func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", args...)
		}
	}
}

// clock is cfg.Now, or time.Now.
func (cfg Config) clock() func() time.Time {
	if cfg.Now == nil {
		return time.Now
	}
	return cfg.Now
}

// imported is one session read from a file.
type imported struct {
	path string
	s    importers.Session
}

// importFiles imports every file of cfg first: with Strict, a bad file
// fails before anything starts; otherwise it is reported in failed and the
// others go on. Sessions without events are dropped; the same session in
// two inputs is kept twice, renamed apart.
func importFiles(ctx context.Context, cfg Config, now func() time.Time, progress func(string, ...any)) (all []imported, failed []FileError, err error) {
	format := cfg.Format
	if format == "" {
		format = "auto"
	}
	seen := map[string]int{}
	eta := newETA(cfg.Files, now)
	for i, path := range cfg.Files {
		if err := ctx.Err(); err != nil { // interrupted: stop between files
			return nil, nil, err
		}
		sessions, err := importers.Import(path, format)
		eta.done(path)
		if err != nil {
			if cfg.Strict {
				return nil, nil, err
			}
			failed = append(failed, FileError{File: path, Error: err.Error()})
			progress("[%d/%d] FAILED %v%s", i+1, len(cfg.Files), err, eta.String())
			continue
		}
		for _, s := range sessions {
			if len(s.Events) == 0 {
				continue
			}
			name := s.Events[0].Session
			if n := seen[name]; n > 0 {
				renamed := fmt.Sprintf("%s-%d", truncate(name, 120), n+1)
				for i := range s.Events {
					s.Events[i].Session = renamed
				}
			}
			seen[name]++
			all = append(all, imported{path, s})
		}
		progress("[%d/%d] read %s: %d session(s)%s", i+1, len(cfg.Files), path, len(sessions), eta.String())
	}
	return all, failed, nil
}

// waitIdle waits for the pipeline, reporting progress every few seconds and
// failing if the pipeline stopped.
func waitIdle(ctx context.Context, svc *service.Service, progress func(string, ...any)) error {
	done := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { done <- svc.Pipeline.WaitIdle(wctx) }()
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if err := svc.Err(); err != nil {
				return err
			}
			progress("  ... projection at stream sequence %d", svc.Pipeline.Projection.Seq())
		}
	}
}

func sessionReport(ctx context.Context, svc *service.Service, path string, s importers.Session) (SessionReport, error) {
	ev0 := s.Events[0]
	sr := SessionReport{
		Source: path, Format: s.Format, Session: ev0.Session, SourceID: s.SourceID, Events: len(s.Events),
		DecisionCounts: map[events.Decision]int{}, PrunesByRung: map[string]int{}, TokensByRung: map[string]int{},
		Decisions: []DecisionRow{},
	}
	for _, e := range s.Events {
		if e.Type == events.TypeModelRequest {
			sr.Requests++
		}
	}
	var (
		st   projections.Stats
		ds   []projections.Decision
		serr error
	)
	ok := svc.Pipeline.Projection.View(ev0.TenantOrDefault(), ev0.Session, func(p *projections.Session) {
		st, serr = p.Stats(ctx, nil, svc.Tokens)
		ds = p.Decisions()
	})
	if !ok {
		return sr, fmt.Errorf("session %s from %s: not in the projection", ev0.Session, path)
	}
	if serr != nil {
		return sr, serr
	}
	sr.Items, sr.ToolCalls = st.Items, st.ToolCalls
	sr.Tokens = Tokens{Raw: st.Tokens.Raw, Rendered: st.Tokens.Rendered, Removed: st.Tokens.Removed, Placeholder: st.Tokens.Placeholder,
		HostCompacted: st.Tokens.HostCompacted, HostPruned: st.Tokens.HostPruned}
	// Pending is the scheduler's pending list, the one rule 'pending' and
	// 'decisions' use (a PRUNE of an item the host already compacted away,
	// or already pruned by another mark, waits for nothing).
	pend, err := svc.Pipeline.Scheduler.Pending(ctx, ev0.TenantOrDefault(), ev0.Session)
	if err != nil {
		return sr, err
	}
	waiting := map[string]bool{}
	for _, p := range pend {
		waiting[p.Mark] = true
	}
	sr.Applied = st.Applied
	decided := 0
	for _, d := range ds {
		if waiting[d.Mark] {
			sr.Pending++
		}
		sr.Decisions = append(sr.Decisions, DecisionRow{DecisionSummary: d.DecisionSummary, Pending: waiting[d.Mark], TokensEstimated: d.TokensEstimated, Tool: d.Tool, Source: d.Source})
		sr.DecisionCounts[d.Decision]++
		decided++
		if d.Decision == events.Prune {
			r := events.PruneRule(d.Rung, d.Reason)
			sr.PrunesByRung[r]++
			sr.TokensByRung[r] += d.TokensEstimated
		}
	}
	if decided > 0 {
		sr.AbstentionRate = float64(sr.DecisionCounts[events.Abstain]) / float64(decided)
	}
	return sr, nil
}

func writeBundles(ctx context.Context, svc *service.Service, dir, session string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bundles directory %s: %w", dir, err)
	}
	var b projections.Bundle
	svc.Pipeline.Projection.View(events.DefaultTenant, session, func(p *projections.Session) { b = p.Bundle() })
	renders := []struct {
		ext    string
		render func(context.Context, projections.Bundle, projections.BlobGetter, events.TokenCounter) ([]byte, error)
	}{
		{"anthropic.json", projections.RenderAnthropic},
		{"openai.json", projections.RenderOpenAI},
		{"txt", projections.RenderText},
	}
	for _, r := range renders {
		out, err := r.render(ctx, b, svc.Store, svc.Tokens)
		if err != nil {
			return fmt.Errorf("render %s as %s: %w", session, r.ext, err)
		}
		path := filepath.Join(dir, session+"."+r.ext)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return fmt.Errorf("write bundle %s: %w", path, err)
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
