package service

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/httplimit"
	"github.com/prunesched/prunesched/internal/api"
	"github.com/prunesched/prunesched/internal/httpguard"
	"github.com/prunesched/prunesched/policy"
)

// Config says how to start.
type Config struct {
	// NATSURL uses an external NATS server; empty starts one embedded.
	NATSURL string
	// DataDir is the embedded server's JetStream directory. Required
	// unless NATSURL is set.
	DataDir string
	// NATSListen, when set, makes the embedded server also accept TCP
	// clients there ("127.0.0.1:-1" picks a free port), authenticated as
	// the service user (store.CredentialsFile in DataDir). Empty (the
	// default): in-process connections only, no port at all.
	NATSListen string
	// SyncAlways makes the embedded server fsync every write.
	SyncAlways bool
	// HTTPListen starts the HTTP API there; empty starts none. An address
	// beyond loopback needs Auth.
	HTTPListen string
	// Auth requires bearer tokens on the API and binds each to a tenant
	// (see api.Config.Auth); nil serves loopback without authentication.
	Auth *api.Auth
	// OpenMetrics serves /metrics without a token when Auth is set.
	OpenMetrics bool
	// AllowedHosts and PublicURL name the hosts the HTTP API answers for
	// beyond its bind address (see httpguard.Config); an https PublicURL
	// makes the inspector's login cookie Secure.
	AllowedHosts []string
	PublicURL    string
	// Workers selects which workers run ("eligibility", "scheduler",
	// "projection"); empty runs all.
	Workers []string
	Policy  policy.Policy
	// Logger receives the service's logs; nil discards them.
	Logger *slog.Logger
	// Replicas for the stream and blob bucket (external clusters).
	Replicas int
	// Partitions is the stream's session partition count when this start
	// creates the stream; zero adopts an existing stream's count (default
	// events.DefaultPartitions for a new one). See store.Config.Partitions.
	Partitions int
	// OwnedPartitions lists the partitions this process's eligibility and
	// scheduler workers consume; empty means all (the single-process mode).
	OwnedPartitions []int
	// PinnedTTL, when positive, makes partition consumers pinned-client
	// priority-group consumers, so several worker processes can stand by
	// for one partition (see pipeline.Config.PinnedTTL). Zero in the
	// single-process mode.
	PinnedTTL time.Duration
	// AckWait is how long a worker may hold an event before the server
	// redelivers it (also how long a crashed worker's event waits). Zero
	// keeps store.DefaultAckWait.
	AckWait time.Duration
	// LagInterval is how often consumer lag is polled for /metrics. Zero
	// keeps the pipeline default (5s).
	LagInterval time.Duration
	// HTTPTimeouts are the API server's read, write and idle timeouts
	// (zero fields: the httplimit defaults).
	HTTPTimeouts httplimit.Timeouts
	// Bodies is the byte budget shared by the API's request bodies being
	// read at once; nil makes one of httplimit.DefaultInflightBodyBytes.
	// The proxy passes its own so both share one.
	Bodies *httplimit.Budget
	// LineLimit bounds one JSONL line, or one element of a JSON array of
	// events, of an API request body (see api.Config.LineLimit); zero
	// keeps events.MaxLineBytes.
	LineLimit events.LineLimit
	// ProjectionBytes is the projection's memory budget for idle sessions
	// (see pipeline.Config.ProjectionBytes); zero keeps the default.
	ProjectionBytes int64
}

// setDefaults fills every unset field that has a default: a discarding
// Logger, and with the HTTP API a body budget of
// httplimit.DefaultInflightBodyBytes. The rest keep their zero value,
// which the store and the pipeline default (see their Config).
func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.HTTPListen != "" && c.Bodies == nil {
		c.Bodies = httplimit.NewBudget(httplimit.DefaultInflightBodyBytes)
	}
}

// Validate reports the invalid fields of what Start wires itself; the
// fields it passes on are checked by store.Config.Validate and
// pipeline.Config.Validate, which name them too.
func (c Config) Validate() error {
	// Refused on its own, first, with the remedy: a listener beyond
	// loopback without authentication.
	if c.HTTPListen != "" && c.Auth == nil && !loopbackAddr(c.HTTPListen) {
		return fmt.Errorf("refusing to serve the HTTP API on %s without authentication: bind to loopback (127.0.0.1) or pass --auth-file (see docs/security.md)", c.HTTPListen)
	}
	var errs []error
	if c.HTTPListen != "" {
		if err := c.guardConfig("").Validate(); err != nil {
			errs = append(errs, fmt.Errorf("HTTP API: %w", err))
		}
	}
	if c.NATSURL == "" && c.DataDir == "" {
		errs = append(errs, errors.New("data dir: required for the embedded NATS server (or set the NATS URL)"))
	}
	if c.NATSURL == "" && c.NATSListen != "" {
		if _, _, err := splitListen(c.NATSListen); err != nil {
			errs = append(errs, fmt.Errorf("nats listen: %w", err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("service config: %w", errors.Join(errs...))
	}
	return nil
}

// guardConfig is the httpguard of the HTTP API listening on HTTPListen,
// bound to addr ("" before it is bound).
func (c Config) guardConfig(addr string) httpguard.Config {
	return httpguard.Config{Listen: c.HTTPListen, Addr: addr, AllowedHosts: c.AllowedHosts, PublicURL: c.PublicURL, Logger: c.Logger}
}
