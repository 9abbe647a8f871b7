package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/httplimit"
	"github.com/prunesched/prunesched/internal/api"
	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/pipeline"
	"github.com/prunesched/prunesched/policy"
	"github.com/spf13/pflag"
)

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "serve", "[flags]", `
Run prunesched: the append-only JetStream log, the eligibility, scheduler and
projection workers, and the HTTP API. By default NATS runs in-process with its
data under --data; --nats uses an external server instead (same code path).
Restarting on the same data directory keeps every session.`)
	data := fs.String("data", defaultDataDir(e.getenv), "data directory of the embedded NATS server ($PRUNESCHED_DATA, else $XDG_DATA_HOME/prunesched, else ~/.local/share/prunesched)")
	natsURL := fs.String("nats", "", "external NATS server URL (nats://host:4222); empty runs NATS embedded")
	natsListen := fs.String("nats-listen", "", "also accept TCP clients of the embedded NATS server at this address (e.g. 127.0.0.1:4222; -1 = a free port) as user \"prunesched\" with the password in DATA/nats-service.password; empty: in-process only, no port")
	listen := fs.String("listen", defaultServeListen, "HTTP API address; loopback unless told otherwise (beyond loopback needs --auth-file)")
	common := addServerFlags(fs, "require 'Authorization: Bearer TOKEN' on the API; the file holds one 'TOKEN TENANT' per line and the tenant comes from the token (see docs/security.md)", "policy file (YAML); empty = defaults (see 'prunesched policy')")
	openMetrics := fs.Bool("open-metrics", false, "with --auth-file, serve /metrics without a token")
	sync := fs.String("sync", "default", "embedded durability: 'default' (fsync every 2 minutes, JetStream's default) or 'always' (fsync every write: appends about 7-10x slower, see docs/performance.md)")
	replicas := fs.Int("replicas", 1, "stream replicas (external clusters: 3)")
	partitions := fs.Int("partitions", 0, "session partitions when creating the stream (0: the existing stream's count, else 8); fixed once created")
	projBytes := fs.Int64("projection-bytes", pipeline.DefaultProjectionBytes, "memory budget (bytes, estimated) of the projection's sessions; the least recently used idle sessions are evicted past it and rebuilt from the log when next asked for")
	limits := addLimitFlags(fs)
	memLimit := sizeFlag(fs, "memory-limit", 0, memoryLimitUsage)
	check := addCheckFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *projBytes <= 0 {
		return usagef("--projection-bytes must be positive")
	}
	if *sync != "default" && *sync != "always" {
		return usagef("--sync %q: want default or always", *sync)
	}
	logger, pol, auth, err := common.load(e)
	if err != nil {
		return err
	}
	cfg := service.Config{
		NATSURL: *natsURL, DataDir: *data, NATSListen: *natsListen, SyncAlways: *sync == "always",
		HTTPListen: *listen, Policy: pol, Logger: logger, Replicas: *replicas, Partitions: *partitions,
		Auth: auth, OpenMetrics: *openMetrics,
		HTTPTimeouts: limits.timeouts(), Bodies: limits.budget(), ProjectionBytes: *projBytes,
	}
	cfg = common.guarded(cfg)
	if *check {
		return reportCheck(e, "serve", cfg)
	}
	applyMemoryLimit(e, logger, memoryLimitOf(fs, *memLimit, *limits.inflight, *projBytes))
	svc, err := service.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer svc.Close()
	where := "embedded NATS, data in " + *data
	if *natsURL != "" {
		where = "NATS at " + service.RedactURL(*natsURL)
	} else if svc.Embedded != nil && svc.Embedded.ClientURL() != "" {
		where += " (NATS clients: " + svc.Embedded.ClientURL() + ", user " + store.ServiceUser + ", password in " + svc.Embedded.CredentialsPath() + ")"
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
server (a JetStream cluster), for fleets larger than one machine. The
projector also serves the HTTP API (render, decisions, items) when --listen
is set; every worker serves /metrics, /healthz and /readyz there.

Eligibility and scheduler workers consume the stream's session partitions
(--owns, default all) through pinned priority-group consumers: run two or
more of each kind and every partition is consumed by exactly one of them at
a time; when it dies, another takes its partitions over after --pinned-ttl
(its unacknowledged event is redelivered after --ack-wait). See
docs/operating.md, "Running the fleet on a three-node cluster".`)
	natsURL := fs.String("nats", "", "NATS server URL(s), comma-separated (required)")
	listen := fs.String("listen", "", "HTTP address for /metrics, /healthz, /readyz (and the API for the projector); beyond loopback needs --auth-file")
	common := addServerFlags(fs, "require bearer tokens on the API (one 'TOKEN TENANT' per line, see docs/security.md)", "policy file (YAML)")
	openMetrics := fs.Bool("open-metrics", false, "with --auth-file, serve /metrics without a token")
	replicas := fs.Int("replicas", 1, "stream replicas when creating the stream (a three-node cluster: 3)")
	partitions := fs.Int("partitions", 0, "session partitions when creating the stream (0: the existing stream's count, else 8); fixed once created")
	owns := fs.String("owns", "", "partitions this worker consumes, e.g. 0-3,6 (empty: all)")
	pinnedTTL := fs.Duration("pinned-ttl", 10*time.Second, "a partition whose worker stops pulling for this long moves to a standby worker")
	ackWait := fs.Duration("ack-wait", 30*time.Second, "an event held this long without acknowledgement is redelivered (also after a crash)")
	lagInterval := fs.Duration("lag-interval", 5*time.Second, "how often consumer lag is polled for /metrics")
	check := addCheckFlag(fs)
	// The component may come first: `worker eligibility --nats URL`.
	var comp string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		comp, args = args[0], args[1:]
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if comp == "" && fs.NArg() == 1 {
		comp = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return usagef("want exactly one component: eligibility, scheduler or projector")
	}
	workers := map[string][]string{"eligibility": {"eligibility"}, "scheduler": {"scheduler"}, "projector": {"projection"}}[comp]
	if workers == nil {
		return usagef("unknown component %q: want eligibility, scheduler or projector", comp)
	}
	if *natsURL == "" {
		return usagef("--nats is required")
	}
	owned, err := parsePartitions(*owns)
	if err != nil {
		return usagef("--owns: %v", err)
	}
	if *pinnedTTL <= 0 || *ackWait < time.Second {
		return usagef("--pinned-ttl must be positive and --ack-wait at least 1s")
	}
	logger, pol, auth, err := common.load(e)
	if err != nil {
		return err
	}
	logger = logger.With("component", comp)
	cfg := service.Config{
		NATSURL: *natsURL, HTTPListen: *listen, Workers: workers, Policy: pol, Logger: logger, Auth: auth, OpenMetrics: *openMetrics,
		Replicas: *replicas, Partitions: *partitions, OwnedPartitions: owned,
		PinnedTTL: *pinnedTTL, AckWait: *ackWait, LagInterval: *lagInterval,
	}
	cfg = common.guarded(cfg)
	if *check {
		return reportCheck(e, "worker "+comp, cfg)
	}
	svc, err := service.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer svc.Close()
	logger.Info("worker running", "nats", service.RedactURL(*natsURL), "http", svc.HTTPAddr,
		"partitions", svc.Pipeline.Partitions(), "stream_partitions", svc.Store.Partitions())
	if svc.HTTPAddr != "" {
		fmt.Fprintf(e.stdout, "prunesched worker %s on http://%s\n", comp, svc.HTTPAddr)
	}
	select {
	case <-ctx.Done():
	case <-svc.Done():
		if err := svc.Err(); err != nil {
			return err
		}
	}
	return nil
}

// memoryLimitBase is the part of the default soft memory limit beyond
// the configured budgets: the runtime, the embedded NATS server's
// buffers, the workers' session tables and the tokenizer.
const memoryLimitBase = 128 << 20

// defaultMemoryLimit is the soft memory limit of serve and proxy when
// --memory-limit is not given, derived from the configured budgets: two
// copies of every body in flight (the bytes read and what is decoded
// from them), the projection's sessions, and memoryLimitBase (768 MiB
// with the defaults). Past it the collector runs more often, so garbage
// never doubles the heap on top of what the budgets allow, and lowering
// a budget lowers the limit with it.
func defaultMemoryLimit(inflightBody, projectionBytes int64) int64 {
	return 2*inflightBody + projectionBytes + memoryLimitBase
}

// memoryLimitOf is the soft memory limit in force for the flags: the
// flag's value when given, else defaultMemoryLimit.
func memoryLimitOf(fs *pflag.FlagSet, flag, inflightBody, projectionBytes int64) int64 {
	if fs.Changed("memory-limit") {
		return flag
	}
	return defaultMemoryLimit(inflightBody, projectionBytes)
}

// limitFlags are the HTTP server limits serve and proxy share.
type limitFlags struct {
	read, write, idle *time.Duration
	inflight          *int64
}

// addLimitFlags defines the HTTP server limit flags on fs.
func addLimitFlags(fs *pflag.FlagSet) limitFlags {
	return limitFlags{
		read:     fs.Duration("read-timeout", httplimit.DefaultReadTimeout, "HTTP: a request (headers and body) must arrive within this; a slower body gets 408 and the connection is closed (0: none)"),
		write:    fs.Duration("write-timeout", httplimit.DefaultWriteTimeout, "HTTP: a response must be written within this; streamed responses get it per write instead (0: none)"),
		idle:     fs.Duration("idle-timeout", httplimit.DefaultIdleTimeout, "HTTP: an idle kept-alive connection is closed after this (0: none)"),
		inflight: sizeFlag(fs, "max-inflight-body", httplimit.DefaultInflightBodyBytes, "HTTP: bytes of request bodies read at once, all requests together (a size: 256MiB); a body of known length waits for room, one of unknown length gets 503 when there is none, one larger than this gets 413 (the proxy forwards it unchanged as a stream, unrecorded)"),
	}
}

// timeouts returns the flags' timeouts (0 on the command line: none).
func (l limitFlags) timeouts() httplimit.Timeouts {
	none := func(d time.Duration) time.Duration {
		if d <= 0 {
			return -1
		}
		return d
	}
	return httplimit.Timeouts{ReadHeader: httplimit.DefaultReadHeaderTimeout, Read: none(*l.read), Write: none(*l.write), Idle: none(*l.idle)}
}

// budget returns the in-flight body budget the flags ask for.
func (l limitFlags) budget() *httplimit.Budget { return httplimit.NewBudget(*l.inflight) }

// parsePartitions parses a partition list like "0-3,6" (empty: nil, all).
func parsePartitions(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	seen := map[int]bool{}
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad partition %q", part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad partition range %q", part)
			}
		}
		for p := a; p <= b; p++ {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// addCheckFlag defines --check, shared by serve, worker and proxy.
func addCheckFlag(fs *pflag.FlagSet) *bool {
	return fs.Bool("check", false, "check the flags, the files they name (policy, auth file) and the start-time rules (an API beyond loopback needs --auth-file), print the result and exit without starting; deploy/deploy_test.go runs every deployed command this way")
}

// reportCheck applies the start-time rules to cfg (service.Config.Check,
// the ones Start applies) and says the result.
func reportCheck(e *env, cmd string, cfg service.Config) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "prunesched %s: configuration ok\n", cmd)
	return nil
}

// loadAuth loads an auth file (empty path: none).
func loadAuth(path string) (*api.Auth, error) {
	if path == "" {
		return nil, nil
	}
	return api.LoadAuthFile(path)
}

// serverFlags are the flags every long-running command (serve, worker,
// proxy) shares: logging, the policy and the API's auth file.
type serverFlags struct {
	authFile, policyPath, logLevel *string
	logJSON                        *bool
	// allowedHosts and publicURL name the hosts the HTTP listeners answer
	// for beyond their bind address (httpguard.Config).
	allowedHosts *[]string
	publicURL    *string
}

// addServerFlags defines them on fs, with each command's own help for
// --auth-file and --policy.
func addServerFlags(fs *pflag.FlagSet, authHelp, policyHelp string) serverFlags {
	return serverFlags{
		authFile:     fs.String("auth-file", "", authHelp),
		policyPath:   fs.String("policy", "", policyHelp),
		logLevel:     fs.String("log-level", "info", "log level: debug, info, warn, error"),
		logJSON:      fs.Bool("log-json", false, "log as JSON"),
		allowedHosts: fs.StringArray("allowed-host", nil, "a further host name (or name:port) the HTTP listeners answer for, beside their bind address and, on loopback, localhost, 127.0.0.1 and [::1]: a request naming another host is refused (421), which stops DNS rebinding; repeatable (see docs/security.md)"),
		publicURL:    fs.String("public-url", "", "URL browsers reach the API at, behind a reverse proxy (e.g. https://prunesched.example.com): its host is allowed, and https makes the login cookie Secure"),
	}
}

// guarded sets the HTTP guard fields of cfg from the flags.
func (f serverFlags) guarded(cfg service.Config) service.Config {
	cfg.AllowedHosts, cfg.PublicURL = *f.allowedHosts, *f.publicURL
	return cfg
}

// load builds the logger and loads the policy and the auth file the flags
// name.
func (f serverFlags) load(e *env) (*slog.Logger, policy.Policy, *api.Auth, error) {
	logger, err := newLogger(e.stderr, *f.logLevel, *f.logJSON)
	if err != nil {
		return nil, policy.Policy{}, nil, err
	}
	pol, err := loadPolicy(*f.policyPath)
	if err != nil {
		return nil, policy.Policy{}, nil, err
	}
	auth, err := loadAuth(*f.authFile)
	if err != nil {
		return nil, policy.Policy{}, nil, err
	}
	return logger, pol, auth, nil
}
