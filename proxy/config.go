package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/httplimit"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
)

// Defaults of Config.
const (
	// DefaultBudget bounds the time prunesched may add to one request
	// before the original goes upstream unchanged.
	DefaultBudget = 200 * time.Millisecond
	// DefaultRecordTimeout bounds appending facts that continue after the
	// budget ran out, and recording a response.
	DefaultRecordTimeout = 30 * time.Second
	// DefaultMaxBodyBytes bounds a client request body.
	DefaultMaxBodyBytes = 256 << 20
	// DefaultResponseHeaderTimeout bounds the wait for the upstream's
	// response headers. Ten minutes: a non-streamed answer's headers come
	// only when the whole answer is generated, which for a long output on
	// a loaded model takes minutes, and ten minutes is the default request
	// timeout of the Anthropic and OpenAI SDKs, so an agent would give up
	// at about the same time. A streamed answer sends its headers at once.
	DefaultResponseHeaderTimeout = 10 * time.Minute
	// DefaultStreamIdleTimeout bounds the silence between two reads of an
	// upstream response body once its headers arrived. Five minutes: a
	// streaming model API sends events (Anthropic: ping) far more often
	// while it generates, and even a long thinking phase streams
	// thinking deltas; a non-streamed answer arrives whole after its
	// headers.
	DefaultStreamIdleTimeout = 5 * time.Minute
	// DefaultSessionIdle is how long a session's in-memory state stays
	// after its last request (the pipeline's idle sweep default).
	DefaultSessionIdle = 10 * time.Minute
	// DefaultMaxCaptureBytes bounds how much of a non-streamed response is
	// kept to read its usage (the client gets all of it regardless).
	DefaultMaxCaptureBytes = 64 << 20
	// DefaultFleetHold bounds the wait of a response's end for its
	// record's log write in a fleet (Config.Fleet): it takes
	// milliseconds, unless the log is unreachable.
	DefaultFleetHold = 2 * time.Second
)

// Backend is what the proxy needs from a running prunesched: the log and
// the pipeline. service.ProxyBackend adapts the store and pipeline.
type Backend interface {
	// Append stores facts and returns them stored (Seq set).
	Append(ctx context.Context, evs []events.Event) ([]events.Event, error)
	// LastFactSeq is the stream sequence of the session's last fact (0:
	// none).
	LastFactSeq(ctx context.Context, tenant, session string) (uint64, error)
	// DecideLive decides the request at time at and returns the stored
	// application, or nil. lastFact is the stream sequence of the
	// session's last fact as the proxy knows it (0: ask the log).
	DecideLive(ctx context.Context, tenant, session string, lastFact uint64, at time.Time, req string) (*events.Event, error)
	// WaitSeq blocks until the projection has applied seq.
	WaitSeq(ctx context.Context, seq uint64) error
	// View runs fn on the session's projection; false when unknown.
	View(tenant, session string, fn func(*projections.Session)) bool
	// Judged blocks until eligibility has judged the session's facts up to
	// lastFact and the projection holds the marks it made for them.
	Judged(ctx context.Context, tenant, session string, lastFact uint64) error
	// Blob returns a payload stored by content address.
	Blob(ctx context.Context, hash string) ([]byte, error)
}

// Config configures a Proxy. The zero value plus Upstream and Backend is
// usable; setDefaults fills the rest.
type Config struct {
	// Upstream is the base URL requests are forwarded to (the Anthropic API
	// by default: https://api.anthropic.com). Required.
	Upstream string
	// OpenAIUpstream, when set, receives the OpenAI paths
	// (/v1/chat/completions, /v1/responses and other /v1 OpenAI paths);
	// otherwise they go to Upstream too.
	OpenAIUpstream string
	// Tenant is the tenant of every session unless a request names one in
	// the X-Prunesched-Tenant header. Default events.DefaultTenant.
	Tenant string
	// Budget is the time prunesched may add to a request (DefaultBudget).
	Budget time.Duration
	// RecordTimeout bounds background appends and recording a response,
	// which runs after the response under the session's lock (the end of
	// the response waits only for the lock; the session's next request
	// waits for the record) (DefaultRecordTimeout).
	RecordTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the upstream's response
	// headers (DefaultResponseHeaderTimeout); past it the client gets 502
	// and prunesched_proxy_upstream_errors_total{kind="timeout"} counts it.
	// It applies to the default Client only: a Client set here brings its
	// own timeouts.
	ResponseHeaderTimeout time.Duration
	// StreamIdleTimeout bounds the wait for the next bytes of an upstream
	// response body once its headers arrived (DefaultStreamIdleTimeout;
	// negative: no bound). Past it the upstream request is cancelled, the
	// stall is logged with the session, counted in
	// prunesched_proxy_upstream_errors_total{kind="idle"}, and the
	// client's response is aborted (never ended cleanly), as for a body
	// that broke off.
	StreamIdleTimeout time.Duration
	// AfterFunc starts the stream idle timer (tests fire it when they
	// choose); nil is time.AfterFunc.
	AfterFunc func(d time.Duration, f func()) Timer
	// MaxBodyBytes bounds a request body (DefaultMaxBodyBytes); a larger
	// body gets 413 naming the limit.
	MaxBodyBytes int64
	// Bodies is the byte budget shared by every request body being read at
	// once (with the API when both run in one process); nil is unlimited.
	// A body that does not fit waits, or gets 503 (see httplimit.Budget).
	Bodies *httplimit.Budget
	// WriteTimeout bounds each write of a response to the client
	// (httplimit.DefaultWriteTimeout). The server's own write timeout
	// would bound the whole response, which for a model's answer is
	// minutes: the proxy lifts it per request and extends the deadline
	// by WriteTimeout before every write instead.
	WriteTimeout time.Duration
	// Backend is the log and pipeline. Required.
	Backend Backend
	// LogFirst makes the proxy append a request's facts and wait for the
	// pipeline's live decision before forwarding it (the path before
	// issue 28), instead of deciding in memory and writing the log after
	// forwarding. It is kept to compare the two (the decisions are the
	// same); a Backend without ReadSession and Tokens (see logBackend)
	// always decides this way.
	LogFirst bool
	// Fleet says other proxies share the log (a fleet behind a load
	// balancer without session affinity; issue 29): before deciding, the
	// proxy catches a session up with the facts the others appended
	// (from its tail of the log when it has them); it publishes a
	// request's new facts and its application before forwarding it, as
	// one chain expecting the session's last fact (a lost race decides
	// the request again); and it holds the end of each response
	// until the log holds the response's record, so the next request
	// finds it whichever proxy it reaches. Every proxy of the fleet must use the same IdentityKey
	// (JoinFleet checks). It applies when the proxy decides in memory.
	// See fleet.go.
	Fleet bool
	// FleetHold bounds how long the end of a response waits for the log
	// to hold the response's record in a fleet (DefaultFleetHold).
	FleetHold time.Duration
	// ExactCounts makes the proxy count every new payload's tokens
	// exactly before deciding in memory, as Append does. By default a
	// payload larger than 256 bytes that the token counter does not
	// remember by content address is decided on events.EstimateTokens
	// (bytes/4), and the fact records that count, so the log decides as
	// the proxy did (a later copy of the same output is estimated alike).
	// The exact count is taken after forwarding, in the log write, and
	// stored beside the estimate for the economics (events.PricedTokens):
	// one count at a time in the whole proxy, on one goroutine, since the
	// parallel tokenizer running beside the next requests made them
	// slower than counting before forwarding had (exact.go).
	ExactCounts bool
	// SessionIdle is how long a session's state (its known items and, when
	// deciding in memory, its cores and projection) stays in memory after
	// its last request (DefaultSessionIdle); then it is dropped and the
	// session's next request rebuilds it from the log. See
	// Proxy.EvictIdle.
	SessionIdle time.Duration
	// Policy is the pipeline's policy: the context tools' answers name its
	// protections (recent turns) and its pressure threshold. The zero value
	// is policy.Default().
	Policy *policy.Policy
	// Logger receives the proxy's logs; nil discards them.
	Logger *slog.Logger
	// Registry receives the proxy's metrics; nil disables them.
	Registry prometheus.Registerer
	// Client forwards requests upstream; nil uses a client without a
	// timeout (responses stream for minutes) on a clone of the default
	// transport.
	Client *http.Client
	// Now returns the time a request arrives (tests); nil is time.Now.
	Now func() time.Time
	// RecordTimer starts the timer that ends the wait for a response's
	// record (RecordTimeout), so a test can end it when it chooses instead
	// of racing a clock; nil is time.After.
	RecordTimer func(time.Duration) <-chan time.Time
	// IdentityKey keys the HMAC of the request's credential that ends
	// every session id (see Proxy.identity), so a session never spans two
	// credentials. Keep it secret and stable: 'prunesched proxy' keeps it
	// in the data directory (LoadOrCreateIdentityKey). Nil makes New
	// generate a random key: sessions then do not continue across a
	// restart (the same conversation gets a new session id).
	IdentityKey []byte
}

func (c *Config) setDefaults() {
	if c.Policy == nil {
		d := policy.Default()
		c.Policy = &d
	}
	if c.Tenant == "" {
		c.Tenant = events.DefaultTenant
	}
	if c.Budget == 0 {
		c.Budget = DefaultBudget
	}
	if c.FleetHold == 0 {
		c.FleetHold = DefaultFleetHold
	}
	if c.SessionIdle == 0 {
		c.SessionIdle = DefaultSessionIdle
	}
	if c.RecordTimeout == 0 {
		c.RecordTimeout = DefaultRecordTimeout
	}
	if c.ResponseHeaderTimeout == 0 {
		c.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	if c.StreamIdleTimeout == 0 {
		c.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if c.AfterFunc == nil {
		c.AfterFunc = func(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = httplimit.DefaultWriteTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		t.ResponseHeaderTimeout = c.ResponseHeaderTimeout
		c.Client = &http.Client{Transport: t}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.RecordTimer == nil {
		c.RecordTimer = time.After
	}
}

// Validate checks the configuration; errors name the field.
func (c *Config) Validate() error {
	if c.Backend == nil {
		return errors.New("proxy config: Backend is required")
	}
	if _, err := parseUpstream("Upstream", c.Upstream, true); err != nil {
		return err
	}
	if _, err := parseUpstream("OpenAIUpstream", c.OpenAIUpstream, false); err != nil {
		return err
	}
	if !events.ValidToken(c.Tenant) {
		return fmt.Errorf("proxy config: Tenant %q: use letters, digits, '_' or '-'", c.Tenant)
	}
	if c.IdentityKey != nil && len(c.IdentityKey) < 16 {
		return errors.New("proxy config: IdentityKey must be at least 16 bytes")
	}
	if c.Budget < 0 || c.RecordTimeout < 0 || c.MaxBodyBytes < 0 || c.ResponseHeaderTimeout < 0 || c.WriteTimeout < 0 {
		return errors.New("proxy config: Budget, RecordTimeout, ResponseHeaderTimeout, WriteTimeout and MaxBodyBytes must not be negative")
	}
	if c.Fleet {
		// A fleet's rules (catch-up, guarded publish, hold) run only when
		// the proxy decides in memory on a backend that offers them; a
		// proxy that silently ran without them beside other proxies would
		// decide on a stale view of the log.
		if c.LogFirst {
			return errors.New("proxy config: Fleet needs the in-memory decision: unset LogFirst")
		}
		if _, ok := c.Backend.(logBackend); !ok {
			return fmt.Errorf("proxy config: Fleet: Backend %T cannot decide in memory (no ReadSession and Tokens)", c.Backend)
		}
		if _, ok := c.Backend.(fleetBackend); !ok {
			return fmt.Errorf("proxy config: Fleet: Backend %T has no fleet operations (FactsAndApplicationsAfter, AppendAfter, ReadSessionLeader)", c.Backend)
		}
	}
	return nil
}

func parseUpstream(field, s string, required bool) (*url.URL, error) {
	if s == "" {
		if required {
			return nil, fmt.Errorf("proxy config: %s is required", field)
		}
		return nil, nil
	}
	u, err := ParseUpstream(s)
	if err != nil {
		return nil, fmt.Errorf("proxy config: %s %w", field, err)
	}
	return u, nil
}

// ParseUpstream checks an upstream base URL: http or https, with a host.
// The error quotes the value (callers prefix the flag or field name), so a
// command can check its flags before it starts anything.
func ParseUpstream(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		hint := ""
		if u.Scheme == "" && !strings.Contains(s, "://") {
			hint = " (such as https://" + strings.TrimPrefix(s, "//") + ")"
		}
		return nil, fmt.Errorf("%q: want an http(s) URL with a host%s", s, hint)
	}
	return u, nil
}
