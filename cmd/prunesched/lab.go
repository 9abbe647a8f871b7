package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prunesched/prunesched/internal/eval/lab"
	"github.com/prunesched/prunesched/internal/eval/lab/modelrun"
)

func runLab(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "lab", "[flags]", `
Run the Context Lab: generate seeded ground-truth fixture sessions and run
one row per policy: the conditions A raw (no pruning), B exact duplicates,
C + errored inputs, D + superseded (the shipped default), E aggressive
heuristic and F oracle; the variants D+L3 (the opt-in L3 rung), D-span
(without span references) and R (the opt-in recoverable policy); G (D + a
scripted agent that asks to remove its closed subtasks' outputs); and the
peers (DCP, Anthropic clear_tool_uses, observation masking). The text
output opens with this legend (ROWS) and ends with the claims the design
rests on, each "holds" or "does not hold" and why. It reports four metric
groups:
reduction, preservation, behaviour (evidence presence, not model success;
with and without one context_recover per removed item a probe needs,
priced) and economics. Writes results.json,
results.csv, saved-vs-false-prunes.svg and cost.svg into --out. The same
seed gives byte-identical results.json.

With --model URL it runs the probe tasks against a model behind an
OpenAI-compatible chat endpoint instead (POST URL/chat/completions: vLLM,
Ollama, llama.cpp server or a provider): each probe's bundle as the row
leaves it, the context_recover tool offered, the answer scored against the
fixture's ground truth; it prints task success per row beside the
evidence-presence scores (nothing is written to --out).`)
	seed := fs.Uint64("seed", 0, "fixture seed")
	sessions := fs.Int("sessions", 12, "number of fixture sessions")
	out := fs.String("out", "lab-out", "directory for results.json, results.csv and the SVG charts")
	asJSON := fs.Bool("json", false, "print results.json to stdout instead of the tables")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	model := fs.String("model", "", "run the probe tasks against the OpenAI-compatible chat endpoint at this base URL (e.g. http://127.0.0.1:8000/v1)")
	modelName := fs.String("model-name", "default", "with --model: the model name sent in each request (vLLM and Ollama need the served name)")
	keyEnv := fs.String("api-key-env", "", "with --model: the environment variable holding the API key, sent as a bearer token (never printed)")
	maxRec := fs.Int("max-recoveries", 3, "with --model: context_recover calls answered per probe")
	rows := fs.String("conditions", "", "with --model: comma-separated rows to run (default: every row)")
	timeout := fs.Duration("model-timeout", 10*time.Minute, "with --model: time limit of one chat request")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments: %v", fs.Args())
	}
	if *sessions < 1 {
		return usagef("--sessions must be at least 1")
	}
	if err := ctx.Err(); err != nil { // interrupted before it started
		return err
	}
	cfg := lab.Config{Seed: *seed, Sessions: *sessions}
	if *model == "" {
		for _, f := range []string{"model-name", "api-key-env", "max-recoveries", "conditions", "model-timeout"} {
			if fs.Changed(f) {
				return usagef("--%s needs --model", f)
			}
		}
	} else {
		mc, err := modelConfig(e, cfg, *model, *modelName, *keyEnv, *rows, *maxRec, *timeout)
		if err != nil {
			return err
		}
		if !*quiet {
			mc.Progress = e.stderr
		}
		return runLabModel(ctx, e, mc, *asJSON)
	}
	if !*quiet {
		cfg.Progress = e.stderr
	}
	res, err := lab.Run(ctx, cfg)
	if err != nil {
		return err
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("lab: encode results: %w", err)
	}
	js = append(js, '\n')
	if err := writeLabFiles(*out, res, js); err != nil {
		return err
	}
	if !*quiet {
		fmt.Fprintf(e.stderr, "lab: wrote results.json, results.csv, saved-vs-false-prunes.svg and cost.svg to %s\n", *out)
	}
	if *asJSON {
		_, err := e.stdout.Write(js)
		return err
	}
	return lab.WriteTable(e.stdout, res)
}

// writeLabFiles writes the result files into dir.
func writeLabFiles(dir string, res *lab.Results, js []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lab: create %s: %w", dir, err)
	}
	files := []struct {
		name  string
		write func(io.Writer, *lab.Results) error
	}{
		{"results.csv", lab.WriteCSV},
		{"saved-vs-false-prunes.svg", lab.WriteSavedVsFalseSVG},
		{"cost.svg", lab.WriteCostSVG},
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), js, 0o644); err != nil {
		return fmt.Errorf("lab: write results.json: %w", err)
	}
	for _, f := range files {
		var buf bytes.Buffer
		if err := f.write(&buf, res); err != nil {
			return fmt.Errorf("lab: render %s: %w", f.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("lab: write %s: %w", f.name, err)
		}
	}
	return nil
}

// modelConfig checks the --model flags and builds the model run's
// configuration. The API key is read from the environment variable
// --api-key-env names, and never printed.
func modelConfig(e *env, cfg lab.Config, model, name, keyEnv, rows string, maxRec int, timeout time.Duration) (modelrun.Config, error) {
	u, err := url.Parse(model)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return modelrun.Config{}, usagef("--model: %q is not an http(s) URL (want the API base, e.g. http://127.0.0.1:8000/v1)", model)
	}
	if strings.TrimSpace(name) == "" {
		return modelrun.Config{}, usagef("--model-name: empty")
	}
	if maxRec < 0 {
		return modelrun.Config{}, usagef("--max-recoveries: %d is negative", maxRec)
	}
	if timeout <= 0 {
		return modelrun.Config{}, usagef("--model-timeout: %s is not positive", timeout)
	}
	key := ""
	if keyEnv != "" {
		if key = e.getenv(keyEnv); key == "" {
			return modelrun.Config{}, usagef("--api-key-env: environment variable %s is not set or empty", keyEnv)
		}
	}
	var names []string
	if rows != "" {
		known, err := lab.ConditionNames()
		if err != nil {
			return modelrun.Config{}, err
		}
		for _, r := range strings.Split(rows, ",") {
			r = strings.TrimSpace(r)
			if !slices.Contains(known, r) {
				return modelrun.Config{}, usagef("--conditions: no row %q (rows: %s)", r, strings.Join(known, ", "))
			}
			names = append(names, r)
		}
	}
	return modelrun.Config{Lab: cfg, Conditions: names, MaxRecoveries: maxRec,
		Endpoint: modelrun.Endpoint{URL: model, Model: name, APIKey: key, Flag: "--model", HTTP: &http.Client{Timeout: timeout}}}, nil
}

// runLabModel runs the probe tasks with the model and prints the report.
func runLabModel(ctx context.Context, e *env, mc modelrun.Config, asJSON bool) error {
	rep, err := modelrun.Run(ctx, mc)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if asJSON {
		js, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return fmt.Errorf("lab: encode the model report: %w", err)
		}
		_, err = e.stdout.Write(append(js, '\n'))
		return err
	}
	return modelrun.WriteTable(e.stdout, rep)
}
