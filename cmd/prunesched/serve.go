package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/prunesched/prunesched/service"
)

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "serve", "[flags]", `
Run prunesched: the append-only JetStream log, the eligibility, scheduler and
projection workers, and the HTTP API. By default NATS runs in-process with its
data under --data; --nats uses an external server instead (same code path).
Restarting on the same data directory keeps every session.`)
	data := fs.String("data", defaultDataDir(e.getenv), "data directory of the embedded NATS server ($PRUNESCHED_DATA, else $XDG_DATA_HOME/prunesched, else ~/.local/share/prunesched)")
	natsURL := fs.String("nats", "", "external NATS server URL (nats://host:4222); empty runs NATS embedded")
	natsListen := fs.String("nats-listen", "127.0.0.1:-1", "client address of the embedded NATS server (-1 = a free port); loopback unless told otherwise")
	listen := fs.String("listen", "127.0.0.1:7070", "HTTP API address; loopback unless told otherwise")
	policyPath := fs.String("policy", "", "policy file (YAML); empty = defaults (see 'prunesched policy')")
	sync := fs.String("sync", "default", "embedded durability: 'default' (fsync every 2 minutes, JetStream's default) or 'always' (fsync every write)")
	replicas := fs.Int("replicas", 1, "stream replicas (external clusters: 3)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	logJSON := fs.Bool("log-json", false, "log as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *sync != "default" && *sync != "always" {
		return usagef("--sync %q: want default or always", *sync)
	}
	logger, err := newLogger(e.stderr, *logLevel, *logJSON)
	if err != nil {
		return err
	}
	pol, err := loadPolicy(*policyPath)
	if err != nil {
		return err
	}
	svc, err := service.Start(ctx, service.Config{
		NATSURL: *natsURL, DataDir: *data, NATSListen: *natsListen, SyncAlways: *sync == "always",
		HTTPListen: *listen, Policy: pol, Logger: logger, Replicas: *replicas,
	})
	if err != nil {
		return err
	}
	defer svc.Close()
	where := "embedded NATS, data in " + *data
	if *natsURL != "" {
		where = "NATS at " + *natsURL
	} else if svc.Embedded != nil {
		where += " (NATS clients: " + svc.Embedded.ClientURL() + ")"
	}
	logger.Info("prunesched serving", "http", "http://"+svc.HTTPAddr, "log", where, "policy", pol.Version())
	fmt.Fprintf(e.stdout, "prunesched serving on http://%s (%s)\n", svc.HTTPAddr, where)
	<-ctx.Done()
	logger.Info("shutting down")
	return nil
}

func runWorker(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "worker", "eligibility|scheduler|projector --nats URL [flags]", `
Run one pipeline component as its own process against an external NATS
server, for fleets larger than one machine. The projector also serves the HTTP
API (render, decisions, items) when --listen is set.`)
	natsURL := fs.String("nats", "", "NATS server URL (required)")
	listen := fs.String("listen", "", "HTTP address for /metrics, /healthz, /readyz (and the API for the projector)")
	policyPath := fs.String("policy", "", "policy file (YAML)")
	replicas := fs.Int("replicas", 1, "stream replicas when creating the stream")
	logLevel := fs.String("log-level", "info", "log level")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want exactly one component: eligibility, scheduler or projector")
	}
	comp := fs.Arg(0)
	workers := map[string][]string{"eligibility": {"eligibility"}, "scheduler": {"scheduler"}, "projector": {"projection"}}[comp]
	if workers == nil {
		return usagef("unknown component %q: want eligibility, scheduler or projector", comp)
	}
	if *natsURL == "" {
		return usagef("--nats is required")
	}
	logger, err := newLogger(e.stderr, *logLevel, false)
	if err != nil {
		return err
	}
	pol, err := loadPolicy(*policyPath)
	if err != nil {
		return err
	}
	svc, err := service.Start(ctx, service.Config{NATSURL: *natsURL, HTTPListen: *listen, Workers: workers, Policy: pol, Logger: logger, Replicas: *replicas})
	if err != nil {
		return err
	}
	defer svc.Close()
	logger.Info("worker running", "component", comp, "nats", *natsURL, "http", svc.HTTPAddr)
	<-ctx.Done()
	return nil
}
