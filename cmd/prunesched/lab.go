package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/prunesched/prunesched/lab"
)

func runLab(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "lab", "[flags]", `
Run the Context Lab: generate seeded ground-truth fixture sessions, run the
spec's six conditions (A raw, B exact duplicates, C + errored inputs,
D + superseded: the shipped default, E aggressive heuristic, F oracle),
D+L3 (the opt-in L3 rung), D-span, G (D + a scripted agent that asks to
remove its closed subtasks' outputs) and the peers (DCP, Anthropic
clear_tool_uses, observation masking), and report four metric groups:
reduction, preservation, behaviour (evidence presence, not model success;
with and without one context_recover per removed item a probe needs,
priced) and economics. Writes results.json,
results.csv, saved-vs-false-prunes.svg and cost.svg into --out. The same
seed gives byte-identical results.json.`)
	seed := fs.Uint64("seed", 0, "fixture seed")
	sessions := fs.Int("sessions", 12, "number of fixture sessions")
	out := fs.String("out", "lab-out", "directory for results.json, results.csv and the SVG charts")
	asJSON := fs.Bool("json", false, "print results.json to stdout instead of the tables")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
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
