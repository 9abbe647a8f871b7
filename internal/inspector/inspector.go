// Package inspector is the context inspector: server-rendered HTML views
// (with SVG and a little plain JavaScript, embedded in the binary) over the
// data the JSON API serves. It shows, per tenant, the sessions with their
// savings, one session's context strip, request timeline, economics,
// certificates and pending marks, and the fleet's totals over sessions and
// time. It reads only through a Source (the API implements it with the same
// projection, scheduler and economics calls its JSON handlers make) and
// records nothing itself: its buttons POST to the API's pin, unpin, prune
// and restore handlers (mounted by the API under /ui/sessions/{session}/,
// where a browser's login cookie is accepted), as the CLI does.
package inspector

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// ErrNotFound is what a Source wraps for an unknown session.
var ErrNotFound = errors.New("not found")

// errBadRequest marks a malformed page request (answered with 400).
var errBadRequest = errors.New("bad request")

// View is one session as the projection holds it now.
type View struct {
	Items     []projections.Item
	Decisions []projections.Decision
	Stats     projections.Stats
	Pending   []scheduler.PendingMark
}

// Source is where the inspector reads. Implementations wait until the
// pipeline has caught up with a session before answering View (read your
// writes), and scope everything to the tenant given.
type Source interface {
	// Sessions lists the tenant's session ids.
	Sessions(ctx context.Context, tenant string) ([]string, error)
	// View returns the session's projection (ErrNotFound when unknown).
	View(ctx context.Context, tenant, session string) (View, error)
	// Log returns the session's events in log order.
	Log(ctx context.Context, tenant, session string) ([]events.Event, error)
	// Economics prices the events under the strategies (scheduler
	// strategy names) with the server's policy.
	Economics(evs []events.Event, strategies ...string) map[string]scheduler.Ledger
}

// TenantFunc returns the request's tenant, or the status and error to
// answer with. It must be the rule the JSON API applies.
type TenantFunc func(r *http.Request) (tenant string, status int, err error)

// Config wires the inspector. Source and Tenant are required (without a
// Tenant every page answers 500); Logger defaults to discarding.
type Config struct {
	Source Source
	Tenant TenantFunc
	Logger *slog.Logger
	// SignedIn reports whether a request came with a login session (the
	// pages then offer to log out); nil: never.
	SignedIn func(r *http.Request) bool
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Handler serves the inspector's pages: GET / (sessions), GET
// /ui/sessions/{session}, GET /ui/fleet, and the fragments and static
// files under /ui/.
type Handler struct {
	cfg  Config
	mux  *http.ServeMux
	tmpl *template.Template
}

// New returns the inspector's handler.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Tenant == nil {
		cfg.Tenant = func(*http.Request) (string, int, error) {
			return "", http.StatusInternalServerError, errors.New("inspector: no tenant rule configured")
		}
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux()}
	h.tmpl = template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html"))
	static, _ := fs.Sub(staticFS, "static")
	h.mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	h.mux.HandleFunc("GET /{$}", h.page(h.sessionsPage))
	h.mux.HandleFunc("GET /ui/{$}", h.page(h.sessionsPage))
	h.mux.HandleFunc("GET /ui/fleet", h.page(h.fleetPage))
	h.mux.HandleFunc("GET /ui/sessions/{session}", h.page(h.sessionPage))
	h.mux.HandleFunc("GET /ui/sessions/{session}/items/{item...}", h.page(h.itemFragment))
	h.mux.HandleFunc("GET /ui/sessions/{session}/strip", h.page(h.stripFragment))
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// request is what every page handler gets: the tenant, and the query
// string that carries it on links and API calls ("" or "?tenant=X").
type request struct {
	*http.Request
	tenant   string
	query    string
	signedIn bool
}

// page wraps a page handler: it resolves the tenant and turns errors into
// an error page with the right status.
func (h *Handler) page(fn func(w http.ResponseWriter, r request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant, code, err := h.cfg.Tenant(r)
		if err != nil {
			h.fail(w, code, err)
			return
		}
		rq := request{Request: r, tenant: tenant, signedIn: h.cfg.SignedIn != nil && h.cfg.SignedIn(r)}
		if q := r.URL.Query().Get("tenant"); q != "" {
			rq.query = "?tenant=" + url.QueryEscape(q)
		}
		if err := fn(w, rq); err != nil {
			code := http.StatusInternalServerError
			switch {
			case errors.Is(err, ErrNotFound):
				code = http.StatusNotFound
			case errors.Is(err, errBadRequest):
				code = http.StatusBadRequest
			}
			h.fail(w, code, err)
		}
	}
}

// LoginPage is what the login form shows.
type LoginPage struct {
	// Next is the local path to go to after logging in.
	Next string
	// Error says why the last attempt failed ("" the first time).
	Error string
}

// Login writes the login form with status code.
func (h *Handler) Login(w http.ResponseWriter, code int, p LoginPage) {
	var b strings.Builder
	if err := h.tmpl.ExecuteTemplate(&b, "login.html", p); err != nil {
		h.fail(w, http.StatusInternalServerError, fmt.Errorf("render login.html: %w", err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, b.String())
}

// fail writes a minimal error page.
func (h *Handler) fail(w http.ResponseWriter, code int, err error) {
	if code >= 500 {
		h.cfg.Logger.Error("inspector", "err", err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_ = h.tmpl.ExecuteTemplate(w, "error.html", map[string]any{"Code": code, "Status": http.StatusText(code), "Error": err.Error()})
}

// render executes a template into a buffer first, so a failing template
// answers with an error page instead of half a page.
func (h *Handler) render(w http.ResponseWriter, name string, data any) error {
	var b strings.Builder
	if err := h.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		return fmt.Errorf("render %s: %w", name, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(b.String()))
	return nil
}
