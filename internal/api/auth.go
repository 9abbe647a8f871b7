package api

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/prunesched/prunesched/events"
)

// MinTokenLength is the shortest bearer token an auth file may hold: a
// token is a password, and a short one is guessable.
const MinTokenLength = 16

// Auth maps bearer tokens to tenants. Tokens are held only as SHA-256
// digests and compared in constant time; none is ever logged.
type Auth struct {
	entries []authEntry
}

type authEntry struct {
	digest [sha256.Size]byte
	tenant string
}

// LoadAuthFile reads an auth file: one "TOKEN TENANT" per line, separated
// by spaces or tabs; '#' starts a comment; blank lines are ignored. A bad
// line is an error naming file:line (never the token).
func LoadAuthFile(path string) (*Auth, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth file: %w", err)
	}
	defer f.Close()
	return ParseAuth(f, path)
}

// ParseAuth reads the auth file format (see LoadAuthFile) from r; name
// names it in errors.
func ParseAuth(r io.Reader, name string) (*Auth, error) {
	a := &Auth{}
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(text)
		switch {
		case len(fields) == 0:
			continue
		case len(fields) != 2:
			return nil, fmt.Errorf("%s:%d: want \"TOKEN TENANT\", got %d fields", name, line, len(fields))
		case len(fields[0]) < MinTokenLength:
			return nil, fmt.Errorf("%s:%d: token shorter than %d characters", name, line, MinTokenLength)
		case !events.ValidToken(fields[1]):
			return nil, fmt.Errorf("%s:%d: tenant %q: use letters, digits, '_' or '-'", name, line, fields[1])
		}
		d := sha256.Sum256([]byte(fields[0]))
		if prev, dup := seen[d]; dup {
			return nil, fmt.Errorf("%s:%d: token already given on line %d", name, line, prev)
		}
		seen[d] = line
		a.entries = append(a.entries, authEntry{digest: d, tenant: fields[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(a.entries) == 0 {
		return nil, fmt.Errorf("%s: no tokens", name)
	}
	return a, nil
}

// Tenant returns the tenant of token. Every entry is compared (in constant
// time, on digests of equal length), so the answer's timing says nothing
// about which token, or how much of one, matched.
func (a *Auth) Tenant(token string) (string, bool) {
	d := sha256.Sum256([]byte(token))
	tenant, found := "", 0
	for _, e := range a.entries {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			tenant, found = e.tenant, 1
		}
	}
	return tenant, found == 1
}

// Tenants returns how many tokens the file holds (for the startup log).
func (a *Auth) Tenants() int { return len(a.entries) }

type tenantKey struct{}

// authenticate wraps the API: with an Auth, every route but /healthz,
// /readyz, the login form and the inspector's static files (and /metrics
// when OpenMetrics) needs "Authorization: Bearer TOKEN" with a known
// token, and the request's tenant is the token's. The inspector's routes
// (GET / and /ui/...) also take a login cookie (see login.go); a browser
// without either is sent to the login form.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.cfg.Auth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case openPath(r.URL.Path):
			next.ServeHTTP(w, r)
			return
		case r.URL.Path == "/metrics" && s.cfg.OpenMetrics:
			next.ServeHTTP(w, r)
			return
		}
		hdr := r.Header.Get("Authorization")
		if hdr == "" && inspectorPath(r.URL.Path) {
			ctx, err := s.cookieTenant(r)
			switch {
			case err == nil:
				next.ServeHTTP(w, r.WithContext(ctx))
			case errors.Is(err, errNoLogin) && safeMethod(r.Method):
				loginRedirect(w, r)
			case errors.Is(err, errNoLogin):
				writeError(w, http.StatusUnauthorized, errors.New("not logged in: log in at /login, or send Authorization: Bearer TOKEN"))
			default:
				writeError(w, statusOf(err), err)
			}
			return
		}
		token, ok := strings.CutPrefix(hdr, "Bearer ")
		tenant, known := "", false
		if ok {
			tenant, known = s.cfg.Auth.Tenant(strings.TrimSpace(token))
		}
		if !known {
			w.Header().Set("WWW-Authenticate", `Bearer realm="prunesched"`)
			writeError(w, http.StatusUnauthorized, errors.New("missing or unknown bearer token (Authorization: Bearer TOKEN)"))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
	})
}

// httpError carries the status an error answers with.
type httpError struct {
	code int
	err  error
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

// tenantOf returns the request's tenant. Authenticated, it is the token's:
// a tenant header or ?tenant= naming another is refused (403). Otherwise
// it is the header's or the query's; both given and different is refused
// (400), so a query cannot override the header.
func tenantOf(r *http.Request) (string, error) {
	hdr, q := r.Header.Get(TenantHeader), r.URL.Query().Get("tenant")
	if authed, ok := r.Context().Value(tenantKey{}).(string); ok {
		for _, t := range []string{hdr, q} {
			if t != "" && t != authed {
				return "", &httpError{http.StatusForbidden, fmt.Errorf("tenant %q: the token belongs to tenant %q", t, authed)}
			}
		}
		return authed, nil
	}
	if hdr != "" && q != "" && hdr != q {
		return "", &httpError{http.StatusBadRequest, fmt.Errorf("tenant: header %s %q and query tenant=%q differ", TenantHeader, hdr, q)}
	}
	t := hdr
	if t == "" {
		t = q
	}
	if t == "" {
		return events.DefaultTenant, nil
	}
	if !events.ValidToken(t) {
		return "", &httpError{http.StatusBadRequest, fmt.Errorf("tenant %q: use letters, digits, '_' or '-'", t)}
	}
	return t, nil
}
