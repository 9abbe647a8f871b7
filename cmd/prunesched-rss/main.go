// Command prunesched-rss measures the resident memory of `prunesched
// serve` over time while driving it over HTTP (see package bench/rss), and
// writes the samples as CSV and an SVG chart. It is a measurement tool,
// not part of `go test`.
//
//	go build -o /tmp/prunesched ./cmd/prunesched
//	go run ./cmd/prunesched-rss --bin /tmp/prunesched --scenario events --events 1000000 --csv rss-events.csv --svg docs/rss-events.svg
//	go run ./cmd/prunesched-rss --bin /tmp/prunesched --scenario clients --clients 16 --duration 60s --svg docs/rss-clients.svg
//	go run ./cmd/prunesched-rss --bin /tmp/prunesched --scenario output --output-mb 60
//	go run ./cmd/prunesched-rss --bin /tmp/prunesched --scenario proxy-output --output-mb 200
//
// It measures `prunesched proxy` for the proxy-output scenario.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/prunesched/prunesched/internal/bench/rss"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "prunesched-rss:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("prunesched-rss", flag.ContinueOnError)
	fs.SetOutput(os.Stdout)
	bin := fs.String("bin", "", "prunesched binary (required)")
	scenario := fs.String("scenario", "events", "events (N small events appended), clients (concurrent appends and renders), output (one POST of one large tool output) or proxy-output (one large tool output through prunesched proxy)")
	outputMB := fs.Int("output-mb", 60, "output scenarios: the output's size in MB (10^6 bytes)")
	format := fs.String("format", "jsonl", "output scenario: the body as jsonl or array")
	settle := fs.Duration("settle", 5*time.Second, "output scenarios: sampling after the request is done")
	nEvents := fs.Int("events", 200000, "events scenario: events to append")
	batch := fs.Int("batch", 200, "events per POST (clients scenario: per append before each render)")
	sessionEvents := fs.Int("session-events", 100, "events per session")
	writers := fs.Int("writers", 4, "events scenario: concurrent appenders")
	clients := fs.Int("clients", 16, "clients scenario: concurrent clients")
	duration := fs.Duration("duration", 60*time.Second, "clients scenario: how long; proxy-output: the longest wait for the proxy's background append")
	interval := fs.Duration("interval", time.Second, "sampling interval")
	serveArgs := fs.String("serve-args", "", "extra arguments for serve, space-separated")
	label := fs.String("label", "", "series label in the chart (default: the scenario)")
	csvPath := fs.String("csv", "", "write the samples as CSV here")
	jsonPath := fs.String("json", "", "write the result as JSON here")
	svgPath := fs.String("svg", "", "write an SVG chart here (add more series from earlier --json runs with --with)")
	with := fs.String("with", "", "comma-separated label=file.json of earlier runs to draw in the same chart; without --bin, only plot them")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if *bin == "" {
		if *with == "" || *svgPath == "" {
			return fmt.Errorf("--bin is required (or --with and --svg to plot earlier runs only)")
		}
		runs, err := loadRuns(*with)
		if err != nil {
			return err
		}
		return writeChart(*svgPath, *scenario, runs)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := os.MkdirTemp("", "prunesched-rss-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	res, err := rss.Run(ctx, rss.Config{
		Bin: *bin, DataDir: dir, Scenario: *scenario, Events: *nEvents, Batch: *batch, SessionEvents: *sessionEvents,
		Writers: *writers, Clients: *clients, Duration: *duration, Interval: *interval,
		OutputBytes: *outputMB * 1000 * 1000, Format: *format, Settle: *settle,
		ServeArgs: strings.Fields(*serveArgs), Progress: os.Stdout,
	})
	if err != nil {
		return err
	}
	last := res.Samples[len(res.Samples)-1]
	fmt.Printf("scenario %s: %d events, %d renders in %.0fs; peak RSS %.1f MB, final %.1f MB; %d failed requests %s\n",
		res.Scenario, last.Events, last.Renders, last.Seconds, rss.MB(res.PeakRSS()), rss.MB(last.RSS), res.Errors, res.FirstError)
	if *csvPath != "" {
		f, err := os.Create(*csvPath)
		if err != nil {
			return err
		}
		if err := rss.WriteCSV(f, res); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if *jsonPath != "" {
		b, _ := json.Marshal(res)
		if err := os.WriteFile(*jsonPath, b, 0o644); err != nil {
			return err
		}
	}
	if *svgPath != "" {
		name := *label
		if name == "" {
			name = res.Scenario
		}
		runs := []labelled{{name, res}}
		if *with != "" {
			more, err := loadRuns(*with)
			if err != nil {
				return err
			}
			runs = append(runs, more...)
		}
		return writeChart(*svgPath, res.Scenario, runs)
	}
	return nil
}

// loadRuns reads label=file.json pairs, comma-separated.
func loadRuns(with string) ([]labelled, error) {
	var runs []labelled
	for _, lf := range strings.Split(with, ",") {
		l, file, ok := strings.Cut(lf, "=")
		if !ok {
			return nil, fmt.Errorf("--with %q: want label=file.json", lf)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var r rss.Result
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		runs = append(runs, labelled{l, r})
	}
	return runs, nil
}

func writeChart(path, scenario string, runs []labelled) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rss.WriteSVG(f, chart(scenario, runs)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

type labelled struct {
	label string
	res   rss.Result
}

var colors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}

// chart plots RSS against events appended (events scenario) or seconds.
func chart(scenario string, runs []labelled) rss.Chart {
	c := rss.Chart{YLabel: "RSS (MB)", Limit: 1000, LimitLabel: "1 GB target"}
	switch scenario {
	case "events":
		c.Title, c.XLabel = "prunesched serve RSS while appending small events over HTTP", "events appended"
	case "clients":
		c.Title, c.XLabel = "prunesched serve RSS under concurrent appends and renders", "seconds"
	default:
		c.Title, c.XLabel = "prunesched RSS through one large tool output ("+scenario+")", "seconds"
	}
	for i, r := range runs {
		s := rss.Series{Label: r.label, Color: colors[i%len(colors)]}
		for _, smp := range r.res.Samples {
			x := smp.Seconds
			if scenario == "events" {
				x = float64(smp.Events)
			}
			s.X, s.Y = append(s.X, x), append(s.Y, rss.MB(smp.RSS))
		}
		c.Series = append(c.Series, s)
	}
	return c
}
