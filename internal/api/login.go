package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prunesched/prunesched/internal/httpguard"
	"github.com/prunesched/prunesched/internal/inspector"
)

// Browsers cannot send a bearer token with a page load, so with an auth
// file the inspector has a login: POST /login takes a token once and sets
// a cookie holding an opaque, random session id (never the token), mapped
// in memory to the token's tenant until it expires. The cookie is accepted
// on the inspector's routes only (GET / and everything under /ui/, its
// reads and its POST actions); /v1 and /metrics keep requiring the bearer
// token, so a cookie never reaches them.

// SessionCookie names the inspector's login cookie.
const SessionCookie = "prunesched_session"

// DefaultLoginTTL is how long a login lasts (Config.LoginTTL).
const DefaultLoginTTL = 12 * time.Hour

// maxLoginsPerTenant bounds the login sessions one tenant holds; past it
// that tenant's session closest to expiry is forgotten (its browser logs
// in again). Another tenant's sessions are never touched, and tenants are
// bounded by the auth file, so the whole table is bounded.
const maxLoginsPerTenant = 100

// loginSession is one browser's login.
type loginSession struct {
	tenant  string
	expires time.Time
}

// logins maps digests of session ids to logins. Only SHA-256 digests are
// kept, so memory holds nothing a cookie could be rebuilt from.
type logins struct {
	mu  sync.Mutex
	now func() time.Time
	ttl time.Duration
	m   map[[sha256.Size]byte]loginSession
	// byTenant holds each tenant's session digests.
	byTenant map[string]map[[sha256.Size]byte]struct{}
}

func newLogins(now func() time.Time, ttl time.Duration) *logins {
	return &logins{now: now, ttl: ttl, m: map[[sha256.Size]byte]loginSession{}, byTenant: map[string]map[[sha256.Size]byte]struct{}{}}
}

// add starts a login for tenant and returns its session id (32 random
// bytes, base64url).
func (l *logins) add(tenant string) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("login session id: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(raw[:])
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	mine := l.byTenant[tenant]
	if mine == nil {
		mine = map[[sha256.Size]byte]struct{}{}
		l.byTenant[tenant] = mine
	}
	if len(mine) >= maxLoginsPerTenant {
		var oldest [sha256.Size]byte
		var first time.Time
		for k := range mine {
			s := l.m[k]
			if !s.expires.After(now) {
				l.removeLocked(k)
				continue
			}
			if first.IsZero() || s.expires.Before(first) {
				oldest, first = k, s.expires
			}
		}
		if len(mine) >= maxLoginsPerTenant {
			l.removeLocked(oldest)
		}
	}
	k := sha256.Sum256([]byte(id))
	l.m[k] = loginSession{tenant: tenant, expires: now.Add(l.ttl)}
	mine[k] = struct{}{}
	return id, nil
}

// removeLocked forgets login k; the caller holds mu.
func (l *logins) removeLocked(k [sha256.Size]byte) {
	s, ok := l.m[k]
	if !ok {
		return
	}
	delete(l.m, k)
	delete(l.byTenant[s.tenant], k)
}

// tenant returns the tenant of a live login (an expired one is removed).
func (l *logins) tenant(id string) (string, bool) {
	if id == "" {
		return "", false
	}
	k := sha256.Sum256([]byte(id))
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.m[k]
	if !ok {
		return "", false
	}
	if !s.expires.After(l.now()) {
		l.removeLocked(k)
		return "", false
	}
	return s.tenant, true
}

// remove ends a login.
func (l *logins) remove(id string) {
	k := sha256.Sum256([]byte(id))
	l.mu.Lock()
	l.removeLocked(k)
	l.mu.Unlock()
}

// inspectorPath reports whether a path is the inspector's: where a login
// cookie is accepted.
func inspectorPath(p string) bool {
	return p == "/" || strings.HasPrefix(p, "/ui/")
}

// openPath reports whether a path needs no credentials at all.
func openPath(p string) bool {
	switch p {
	case "/healthz", "/readyz", "/login", "/logout":
		return true
	}
	return strings.HasPrefix(p, "/ui/static/")
}

type signedInKey struct{}

// signedIn reports whether a request was authenticated by a login cookie.
func signedIn(r *http.Request) bool {
	v, _ := r.Context().Value(signedInKey{}).(bool)
	return v
}

// cookieTenant authenticates an inspector request by its login cookie. A
// request that changes something must also be JSON (a cross-site HTML form
// can send neither that content type nor, with SameSite=Strict, the
// cookie; the listener's httpguard refuses it before this).
func (s *Server) cookieTenant(r *http.Request) (context.Context, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return nil, errNoLogin
	}
	tenant, ok := s.logins.tenant(c.Value)
	if !ok {
		return nil, errNoLogin
	}
	if !safeMethod(r.Method) {
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if mt != "application/json" {
			return nil, &httpError{http.StatusForbidden, errors.New("a change through the inspector's login must be sent as application/json")}
		}
	}
	ctx := context.WithValue(r.Context(), tenantKey{}, tenant)
	return context.WithValue(ctx, signedInKey{}, true), nil
}

var errNoLogin = errors.New("no login")

func safeMethod(m string) bool { return m == http.MethodGet || m == http.MethodHead }

// loginForm serves GET /login.
func (s *Server) loginForm(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Auth == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.ui.Login(w, http.StatusOK, inspector.LoginPage{Next: localPath(r.URL.Query().Get("next"))})
}

// login serves POST /login: a known token starts a login session for its
// tenant. The token is not logged, echoed or stored.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Auth == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		s.ui.Login(w, http.StatusBadRequest, inspector.LoginPage{Error: "the form could not be read"})
		return
	}
	next := localPath(r.PostForm.Get("next"))
	now := s.cfg.Now()
	if ok, retry := s.limits.client(r.RemoteAddr, now); !ok {
		s.cfg.Logger.Info("login refused: too many attempts from this client", "client", clientKey(r.RemoteAddr))
		s.tooManyLogins(w, next, retry)
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	tenant, ok := s.cfg.Auth.Tenant(token)
	if !ok {
		s.ui.Login(w, http.StatusUnauthorized, inspector.LoginPage{Next: next, Error: "unknown token"})
		return
	}
	if ok, retry := s.limits.token(token, now); !ok {
		s.cfg.Logger.Info("login refused: too many logins with one token", "tenant", tenant)
		s.tooManyLogins(w, next, retry)
		return
	}
	id, err := s.logins.add(tenant)
	if err != nil {
		writeError(w, http.StatusInternalServerError, errors.New("cannot make a login session"))
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: id, Path: "/", MaxAge: int(s.logins.ttl / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: httpguard.Secure(r),
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// tooManyLogins answers a rate-limited login: 429, with Retry-After.
func (s *Server) tooManyLogins(w http.ResponseWriter, next string, retry time.Duration) {
	secs := int((retry + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	s.ui.Login(w, http.StatusTooManyRequests, inspector.LoginPage{Next: next, Error: fmt.Sprintf("too many login attempts: try again in %d s", max(secs, 1))})
}

// logout serves POST /logout: the login session ends and the cookie is
// cleared.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil && s.logins != nil {
		s.logins.remove(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: httpguard.Secure(r)})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// localPath keeps a redirect target on this server: an absolute path, not
// "//host" or "/\host" (which browsers read as another host); else "/".
func localPath(p string) string {
	u, err := url.Parse(p)
	if err != nil || p == "" || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") || u.Host != "" || u.Scheme != "" {
		return "/"
	}
	return p
}

// loginRedirect sends a browser that asked for an inspector page without
// credentials to the login form, coming back afterwards.
func loginRedirect(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
}
