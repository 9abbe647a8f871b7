// Package service assembles a running prunesched: NATS (embedded in-process
// by default, or an external server), the JetStream store, the pipeline
// workers and, optionally, the HTTP API. `serve`, `analyze` and the offline
// client commands all start through it, so there is one code path whether
// the log is embedded or external.
//
// It owns wiring and lifecycle only; it decides nothing.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/httplimit"
	"github.com/prunesched/prunesched/internal/api"
	"github.com/prunesched/prunesched/internal/httpguard"
	"github.com/prunesched/prunesched/pipeline"
)

// Service is a started prunesched.
type Service struct {
	Embedded *store.Embedded
	NC       *nats.Conn
	Store    *store.Store
	Pipeline *pipeline.Pipeline
	Registry *prometheus.Registry
	Tokens   *tokens.Counter
	API      *api.Server
	// HTTPAddr is the address the API listens on (resolved port).
	HTTPAddr string

	cancel  context.CancelFunc
	done    chan struct{}
	wg      sync.WaitGroup
	runErr  error
	httpSrv *http.Server
	logger  *slog.Logger
}

// Start starts everything Config asks for. Call Close to stop.
func Start(ctx context.Context, cfg Config) (*Service, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	s := &Service{logger: logger, Registry: prometheus.NewRegistry(), Tokens: tokens.New()}
	s.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := s.Tokens.Check(); err != nil {
		return nil, err
	}
	st, err := s.connect(ctx, cfg, logger)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.Store = st
	s.Pipeline, err = pipeline.NewFromConfig(st, pipeline.Config{
		Policy: cfg.Policy, Logger: logger, Registry: s.Registry,
		Partitions: cfg.OwnedPartitions, PinnedTTL: cfg.PinnedTTL, LagInterval: cfg.LagInterval,
		ProjectionBytes: cfg.ProjectionBytes,
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.done = make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(s.done)
		if err := s.Pipeline.Run(runCtx, cfg.Workers...); err != nil {
			logger.Error("pipeline stopped", "err", err)
			s.runErr = err
		}
	}()
	if cfg.HTTPListen != "" {
		s.API, err = api.New(api.Config{Pipeline: s.Pipeline, Store: st, Tokens: s.Tokens, Registry: s.Registry, NC: s.NC, Logger: logger.With("component", "api"), Auth: cfg.Auth, OpenMetrics: cfg.OpenMetrics, Bodies: cfg.Bodies, LineLimit: cfg.LineLimit})
		if err != nil {
			s.Close()
			return nil, err
		}
		ln, err := net.Listen("tcp", cfg.HTTPListen)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("listen for HTTP on %s: %w", cfg.HTTPListen, err)
		}
		s.HTTPAddr = ln.Addr().String()
		guard, err := httpguard.New(cfg.guardConfig(s.HTTPAddr))
		if err != nil {
			_ = ln.Close()
			s.Close()
			return nil, fmt.Errorf("HTTP API: %w", err)
		}
		s.httpSrv = cfg.HTTPTimeouts.Server(nil)
		s.httpSrv.Handler = guard.Handler(httplimit.WriteAfterWork(s.API.Handler(), s.httpSrv.WriteTimeout))
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("http server stopped", "err", err)
			}
		}()
	}
	return s, nil
}

// Check applies the start-time rules that need nothing running
// (Config.Validate over the defaults: an HTTP API beyond loopback needs
// Auth, first). Start applies the same; `--check` on the
// commands (and deploy/deploy_test.go through them) calls it alone, so a
// deployment file is held to the very rule the binary enforces.
func (cfg Config) Check() error {
	cfg.setDefaults()
	return cfg.Validate()
}

// connect opens the log: an external server at cfg.NATSURL, or the
// embedded one. Embedded, the admin identity (in-process only) creates or
// updates the stream and buckets, and the service then connects as its own
// user, which may not delete, purge or reconfigure them.
func (s *Service) connect(ctx context.Context, cfg Config, logger *slog.Logger) (*store.Store, error) {
	scfg := store.Config{Replicas: cfg.Replicas, Tokens: s.Tokens, Partitions: cfg.Partitions, AckWait: cfg.AckWait}
	storeLog := logger.With("component", "store")
	if cfg.NATSURL != "" {
		nc, err := nats.Connect(cfg.NATSURL, nats.Name("prunesched"), nats.MaxReconnects(-1), nats.Timeout(store.ConnectTimeout))
		if err != nil {
			return nil, fmt.Errorf("connect to NATS at %s: %w", RedactURL(cfg.NATSURL), err)
		}
		s.NC = nc
		return store.Open(ctx, nc, scfg, storeLog)
	}
	ecfg := store.EmbeddedConfig{DataDir: cfg.DataDir, SyncAlways: cfg.SyncAlways}
	if cfg.NATSListen != "" {
		host, port, err := splitListen(cfg.NATSListen)
		if err != nil {
			return nil, err
		}
		ecfg.Listen, ecfg.Host, ecfg.Port = true, host, port
	}
	emb, err := store.StartEmbedded(ctx, ecfg, logger.With("component", "nats"))
	if err != nil {
		return nil, fmt.Errorf("start embedded NATS in %s: %w", cfg.DataDir, err)
	}
	s.Embedded = emb
	admin, err := emb.ConnectAdmin("prunesched-admin")
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, admin, scfg, storeLog)
	admin.Close()
	if err != nil {
		return nil, fmt.Errorf("create the log: %w", err)
	}
	// The service adopts what the admin settled (partitions).
	scfg.Partitions = st.Partitions()
	nc, err := emb.Connect("prunesched", nats.MaxReconnects(-1))
	if err != nil {
		return nil, err
	}
	s.NC = nc
	// Without a listener no other process reaches the server: this store
	// is the only writer of facts.
	scfg.SoleWriter = !ecfg.Listen
	return store.Open(ctx, nc, scfg, storeLog)
}

// RedactURL drops the passwords from a NATS URL list (comma-separated), for
// logs and messages: nats://prunesched:xxxxx@host:4222.
func RedactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := neturl.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

// Err reports why the pipeline stopped, if it did. Read it after Done is
// closed.
func (s *Service) Err() error { return s.runErr }

// Done is closed when the pipeline's workers have stopped (on Close, or on
// their own after a failure; Err says why).
func (s *Service) Done() <-chan struct{} { return s.done }

// Close stops the API, the workers, the connection and the embedded server,
// in that order.
func (s *Service) Close() {
	if s.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.httpSrv.Shutdown(ctx)
		cancel()
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	if s.NC != nil {
		_ = s.NC.Drain()
		s.NC.Close()
	}
	if s.Embedded != nil {
		s.Embedded.Shutdown()
	}
}

func splitListen(addr string) (string, int, error) {
	if addr == "" {
		return "127.0.0.1", -1, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("NATS listen address %q: %w", addr, err)
	}
	if port == "-1" || port == "0" {
		return host, -1, nil
	}
	var p int
	if _, err := fmt.Sscanf(port, "%d", &p); err != nil || p <= 0 || p > 65535 {
		return "", 0, fmt.Errorf("NATS listen address %q: bad port", addr)
	}
	return host, p, nil
}

// loopbackAddr reports whether a listen address binds loopback only: a
// loopback IP or "localhost". An empty host (every interface) is not.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
