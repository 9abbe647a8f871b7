// Package api is prunesched's HTTP API for adapters and people: append
// events, import traces, render the bundle at request time, read decisions,
// fetch an original item, pin/unpin/prune/restore, and the operational
// endpoints /healthz, /readyz and /metrics. It translates HTTP to calls on
// the store and the pipeline and owns no state of its own.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/httplimit"
	"github.com/prunesched/prunesched/internal/inspector"
	"github.com/prunesched/prunesched/pipeline"
)

// TenantHeader names the tenant of a request; the query parameter "tenant"
// does the same (both given must agree). Without either the tenant is
// events.DefaultTenant. With an auth file (Config.Auth) the tenant is the
// bearer token's, and these may only repeat it.
const TenantHeader = "X-Prunesched-Tenant"

// MaxBodyBytes is the default bound of one request body (an imported
// trace can be large).
const MaxBodyBytes = 256 << 20

// Config wires the API to a running pipeline. Pipeline, Store and Tokens
// are required; New fills the other fields' defaults and validates it
// (see Validate).
type Config struct {
	Pipeline *pipeline.Pipeline
	Store    *store.Store
	Tokens   *tokens.Counter
	// Registry is served on /metrics; nil serves no /metrics.
	Registry *prometheus.Registry
	// NC is the NATS connection /readyz checks; nil is never ready.
	NC *nats.Conn
	// Logger receives the API's logs; nil discards them.
	Logger *slog.Logger
	// Timeout bounds how long a request waits for the pipeline to catch up
	// (DefaultTimeout).
	Timeout time.Duration
	// Auth, when set, requires a bearer token on every route but /healthz
	// and /readyz, and binds each request to the token's tenant.
	Auth *Auth
	// OpenMetrics serves /metrics without a token even when Auth is set.
	OpenMetrics bool
	// MaxBodyBytes bounds one request body (0: MaxBodyBytes); a larger body
	// gets 413 naming the limit.
	MaxBodyBytes int64
	// LineLimit bounds one JSONL line, and one element of a JSON array of
	// events, of a body (zero: events.MaxLineBytes); a larger one gets 413
	// naming the limit.
	LineLimit events.LineLimit
	// Bodies is the byte budget shared by every request body being read
	// at once (shared with the proxy when both run in one process); nil is
	// unlimited. See httplimit.Budget.
	Bodies *httplimit.Budget
	// LoginTTL is how long an inspector login lasts (0: DefaultLoginTTL).
	LoginTTL time.Duration
	// Now is the clock of login expiry (nil: time.Now).
	Now func() time.Time
}

// Server serves the API.
type Server struct {
	cfg Config
	// bufs holds render buffers (*[]byte) for reuse across requests.
	bufs sync.Pool
	// ui is the inspector; logins its browsers' login sessions.
	ui     *inspector.Handler
	logins *logins
	limits *loginLimits
}

// New returns a Server over cfg with its defaults filled; an invalid field
// (see Config.Validate) is an error naming it.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newServer(cfg), nil
}

// newServer builds the Server over a cfg with its defaults filled.
func newServer(cfg Config) *Server {
	s := &Server{cfg: cfg, logins: newLogins(cfg.Now, cfg.LoginTTL), limits: newLoginLimits()}
	s.ui = s.inspectorHandler()
	return s
}

// Handler returns the routes. Serve them behind an httpguard.Guard (as
// service.Start does): the Host and cross-origin rules and the security
// headers are its.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	// The context inspector: HTML views over the same data, behind the
	// same handler chain; its buttons call the API's own handlers under
	// /ui/, where a browser's login cookie is accepted (login.go).
	mux.Handle("GET /{$}", s.ui)
	mux.Handle("/ui/", s.ui)
	mux.HandleFunc("GET /login", s.loginForm)
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("POST /logout", s.logout)
	mux.HandleFunc("GET /ui/sessions/{session}/original/{item...}", s.item)
	for action, t := range inspectorActions {
		mux.HandleFunc("POST /ui/sessions/{session}/"+action, s.control(t))
	}
	if s.cfg.Registry != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{Registry: s.cfg.Registry}))
	}
	mux.Handle("POST /v1/events", s.countInvalid(http.HandlerFunc(s.appendEvents)))
	mux.Handle("POST /v1/import", s.countInvalid(http.HandlerFunc(s.importTrace)))
	mux.HandleFunc("GET /v1/sessions", s.listSessions)
	mux.HandleFunc("GET /v1/sessions/{session}/bundle", s.caughtUp(s.bundle))
	mux.HandleFunc("POST /v1/sessions/{session}/render", s.caughtUp(s.render))
	mux.HandleFunc("GET /v1/sessions/{session}/decisions", s.caughtUp(s.decisions))
	mux.HandleFunc("GET /v1/sessions/{session}/stats", s.caughtUp(s.stats))
	mux.HandleFunc("GET /v1/sessions/{session}/items/{item...}", s.item)
	mux.HandleFunc("POST /v1/sessions/{session}/pin", s.control(events.TypePin))
	mux.HandleFunc("POST /v1/sessions/{session}/unpin", s.control(events.TypeUnpin))
	mux.HandleFunc("POST /v1/sessions/{session}/prune", s.control(events.TypePruneRequest))
	mux.HandleFunc("POST /v1/sessions/{session}/restore", s.control(events.TypeRestore))
	mux.HandleFunc("POST /v1/sessions/{session}/flush", s.control(events.TypeFlushRequest))
	mux.HandleFunc("GET /v1/sessions/{session}/pending", s.caughtUp(s.pending))
	mux.HandleFunc("GET /v1/sessions/{session}/economics", s.caughtUp(s.economics))
	return s.guard(mux)
}

// inspectorActions are the inspector's buttons: the control events it may
// record.
var inspectorActions = map[string]events.Type{
	"pin": events.TypePin, "unpin": events.TypeUnpin, "prune": events.TypePruneRequest, "restore": events.TypeRestore,
}

// guard is the chain in front of every route: authentication. The
// listener's httpguard (service.Start) stands in front of it and refuses
// foreign hosts and browsers' cross-origin changes before this.
func (s *Server) guard(next http.Handler) http.Handler {
	return s.authenticate(next)
}

// countInvalid counts every 400 answer of next (an event or trace that
// failed decoding or validation) as a validation error of component "api".
func (s *Server) countInvalid(next http.Handler) http.Handler {
	if s.cfg.Pipeline == nil || s.cfg.Pipeline.Metrics == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		if rec.status == http.StatusBadRequest {
			s.cfg.Pipeline.Metrics.ValidationError("api")
		}
	})
}

// statusRecorder remembers the status code written.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader records code and passes it on.
func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.cfg.NC == nil || !s.cfg.NC.IsConnected() {
		writeError(w, http.StatusServiceUnavailable, errors.New("not connected to NATS"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := s.cfg.Store.StreamLastSeq(ctx); err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("stream not reachable: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "projection_seq": s.cfg.Pipeline.Projection.Seq()})
}

func sessionOf(r *http.Request) (tenant, session string, err error) {
	tenant, err = tenantOf(r)
	if err != nil {
		return "", "", err
	}
	session = r.PathValue("session")
	if !events.ValidToken(session) {
		return "", "", &httpError{http.StatusBadRequest, fmt.Errorf("session %q: use letters, digits, '_' or '-'", session)}
	}
	return tenant, session, nil
}

// errorBody is every error response.
type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, errorBody{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
