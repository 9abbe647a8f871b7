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
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/prunesched/prunesched/api"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/pipeline"
	"github.com/prunesched/prunesched/policy"
)

// Config says how to start.
type Config struct {
	// NATSURL uses an external NATS server; empty starts one embedded.
	NATSURL string
	// DataDir is the embedded server's JetStream directory.
	DataDir string
	// NATSListen is the embedded server's client listen address
	// ("127.0.0.1:-1" picks a free port).
	NATSListen string
	// SyncAlways makes the embedded server fsync every write.
	SyncAlways bool
	// HTTPListen starts the HTTP API there; empty starts none.
	HTTPListen string
	// Workers selects which workers run ("eligibility", "scheduler",
	// "projection"); empty runs all.
	Workers []string
	Policy  policy.Policy
	Logger  *slog.Logger
	// Replicas for the stream and blob bucket (external clusters).
	Replicas int
}

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
	wg      sync.WaitGroup
	runErr  error
	httpSrv *http.Server
	logger  *slog.Logger
}

// Start starts everything Config asks for. Call Close to stop.
func Start(ctx context.Context, cfg Config) (*Service, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{logger: logger, Registry: prometheus.NewRegistry(), Tokens: tokens.New()}
	s.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := s.Tokens.Check(); err != nil {
		return nil, err
	}
	url := cfg.NATSURL
	if url == "" {
		host, port, err := splitListen(cfg.NATSListen)
		if err != nil {
			return nil, err
		}
		emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{DataDir: cfg.DataDir, Host: host, Port: port, SyncAlways: cfg.SyncAlways}, logger.With("component", "nats"))
		if err != nil {
			return nil, fmt.Errorf("start embedded NATS in %s: %w", cfg.DataDir, err)
		}
		s.Embedded = emb
		url = emb.ClientURL()
	}
	nc, err := nats.Connect(url, nats.Name("prunesched"), nats.MaxReconnects(-1))
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	s.NC = nc
	st, err := store.Open(ctx, nc, store.Config{Replicas: cfg.Replicas, Tokens: s.Tokens}, logger.With("component", "store"))
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	s.Store = st
	s.Pipeline = pipeline.New(st, cfg.Policy, logger, s.Registry)
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.Pipeline.Run(runCtx, cfg.Workers...); err != nil {
			logger.Error("pipeline stopped", "err", err)
			s.runErr = err
		}
	}()
	if cfg.HTTPListen != "" {
		s.API = api.New(api.Config{Pipeline: s.Pipeline, Store: st, Tokens: s.Tokens, Registry: s.Registry, NC: nc, Logger: logger.With("component", "api")})
		ln, err := net.Listen("tcp", cfg.HTTPListen)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("listen for HTTP on %s: %w", cfg.HTTPListen, err)
		}
		s.HTTPAddr = ln.Addr().String()
		s.httpSrv = &http.Server{Handler: s.API.Handler(), ReadHeaderTimeout: 10 * time.Second}
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

// Err reports why the pipeline stopped, if it did.
func (s *Service) Err() error { return s.runErr }

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
