package api

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prunesched/prunesched/internal/httpguard"
)

const (
	acmeToken   = "acme-token-0123456789abcdef"
	globexToken = "globex-token-0123456789abcdef"
)

// clock is a settable clock for login expiry.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// loginServer is a Server with an auth file of two tenants and a clock,
// and the handler chain in front of a route that answers the request's
// tenant (for paths the login routes do not serve).
func loginServer(t *testing.T) (*Server, *clock, http.Handler) {
	t.Helper()
	auth, err := ParseAuth(strings.NewReader(acmeToken+" acme\n"+globexToken+" globex\n"), "auth")
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := bareServer(Config{Auth: auth, Now: clk.now, LoginTTL: time.Hour})
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant, err := tenantOf(r)
		if err != nil {
			writeError(w, statusOf(err), err)
			return
		}
		_, _ = io.WriteString(w, tenant)
	})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", s.loginForm)
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("POST /logout", s.logout)
	mux.Handle("/", echo)
	return s, clk, listenerGuard(t).Handler(s.guard(mux))
}

// listenerGuard is the httpguard of a listener httptest's requests name
// (Host example.com), as service.Start puts in front of the API.
func listenerGuard(t *testing.T) *httpguard.Guard {
	t.Helper()
	g, err := httpguard.New(httpguard.Config{Listen: "example.com:80"})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

type reqOpt func(*http.Request)

func withCookie(c *http.Cookie) reqOpt { return func(r *http.Request) { r.AddCookie(c) } }
func withHeader(k, v string) reqOpt    { return func(r *http.Request) { r.Header.Set(k, v) } }

func do(h http.Handler, method, target, body string, opts ...reqOpt) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	for _, o := range opts {
		o(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// logIn posts the login form as the browser does (same origin) and
// returns the session cookie.
func logIn(t *testing.T, h http.Handler, token string) *http.Cookie {
	t.Helper()
	w := do(h, "POST", "/login", url.Values{"token": {token}, "next": {"/ui/fleet"}}.Encode(),
		withHeader("Content-Type", "application/x-www-form-urlencoded"), withHeader("Origin", "http://example.com"), withHeader("Sec-Fetch-Site", "same-origin"))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/fleet" {
		t.Fatalf("login: %d %q %s", w.Code, w.Header().Get("Location"), w.Body)
	}
	for _, c := range w.Result().Cookies() {
		if c.Name == SessionCookie {
			return c
		}
	}
	t.Fatalf("login set no %s cookie", SessionCookie)
	return nil
}

func TestLoginSetsOpaqueCookie(t *testing.T) {
	_, _, h := loginServer(t)
	c := logIn(t, h, acmeToken)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/" || c.MaxAge != 3600 {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, not Secure without TLS, Path=/, Max-Age=3600", c)
	}
	if c.Value == "" || strings.Contains(c.Value, acmeToken) || strings.Contains(acmeToken, c.Value) || len(c.Value) < 43 {
		t.Errorf("cookie value %q: want an opaque random id of 32 bytes, not the token", c.Value)
	}
	if c2 := logIn(t, h, acmeToken); c2.Value == c.Value {
		t.Error("two logins got the same session id")
	}
	// Over TLS the cookie is Secure.
	r := httptest.NewRequest("POST", "/login", strings.NewReader("token="+acmeToken))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.TLS = &tls.ConnectionState{}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if cs := w.Result().Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Errorf("login over TLS: cookies %+v, want one Secure cookie", cs)
	}
	// The form itself.
	w = do(h, "GET", "/login?next=/ui/fleet", "")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `name="token"`) || !strings.Contains(w.Body.String(), `value="/ui/fleet"`) {
		t.Errorf("GET /login: %d %s", w.Code, w.Body)
	}
}

func TestLoginWrongToken(t *testing.T) {
	_, _, h := loginServer(t)
	const guess = "not-a-token-but-long-enough"
	w := do(h, "POST", "/login", "token="+guess, withHeader("Content-Type", "application/x-www-form-urlencoded"))
	if w.Code != http.StatusUnauthorized || len(w.Result().Cookies()) != 0 {
		t.Fatalf("wrong token: %d, cookies %v; want 401 and none", w.Code, w.Result().Cookies())
	}
	if strings.Contains(w.Body.String(), guess) || !strings.Contains(w.Body.String(), "unknown token") {
		t.Errorf("wrong token: the page must say so without echoing it: %s", w.Body)
	}
	// A made-up cookie is no login.
	w = do(h, "GET", "/ui/fleet", "", withCookie(&http.Cookie{Name: SessionCookie, Value: acmeToken}))
	if w.Code != http.StatusSeeOther {
		t.Errorf("the token itself as cookie: %d, want 303 to the login form", w.Code)
	}
}

// TestLoginCookieScope: the cookie authenticates the inspector's routes
// as the token's tenant and nothing else; /v1 and /metrics keep bearer
// tokens.
func TestLoginCookieScope(t *testing.T) {
	_, _, h := loginServer(t)
	c := logIn(t, h, acmeToken)
	cases := []struct {
		name, method, target string
		opts                 []reqOpt
		code                 int
		body                 string
	}{
		{"sessions page", "GET", "/", nil, 200, "acme"},
		{"fleet page", "GET", "/ui/fleet", nil, 200, "acme"},
		{"another tenant by query", "GET", "/ui/fleet?tenant=globex", nil, 403, "belongs to tenant"},
		{"another tenant by header", "GET", "/ui/fleet", []reqOpt{withHeader(TenantHeader, "globex")}, 403, "belongs to tenant"},
		{"same tenant by query", "GET", "/ui/fleet?tenant=acme", nil, 200, "acme"},
		{"API", "GET", "/v1/sessions", nil, 401, "bearer token"},
		{"API write", "POST", "/v1/sessions/s/restore", []reqOpt{withHeader("Content-Type", "application/json")}, 401, "bearer token"},
		{"metrics", "GET", "/metrics", nil, 401, "bearer token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := do(h, tc.method, tc.target, "{}", append([]reqOpt{withCookie(c)}, tc.opts...)...)
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
				t.Errorf("%s %s: %d %q, want %d containing %q", tc.method, tc.target, w.Code, w.Body, tc.code, tc.body)
			}
		})
	}
	// A bearer token still works on the inspector, as its own tenant.
	w := do(h, "GET", "/ui/fleet", "", withCookie(c), withHeader("Authorization", "Bearer "+globexToken))
	if w.Code != 200 || w.Body.String() != "globex" {
		t.Errorf("bearer on the inspector: %d %q, want globex", w.Code, w.Body)
	}
	// Without credentials a page goes to the login form and comes back.
	w = do(h, "GET", "/ui/fleet?x=1", "")
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/login?next=%2Fui%2Ffleet%3Fx%3D1" {
		t.Errorf("no login: %d %q", w.Code, w.Header().Get("Location"))
	}
	// Each login is its token's tenant.
	g := logIn(t, h, globexToken)
	if w := do(h, "GET", "/ui/fleet", "", withCookie(g)); w.Body.String() != "globex" {
		t.Errorf("globex's login reads tenant %q", w.Body)
	}
}

func TestLoginExpiresAndLogsOut(t *testing.T) {
	_, clk, h := loginServer(t)
	c := logIn(t, h, acmeToken)
	clk.add(59 * time.Minute)
	if w := do(h, "GET", "/ui/fleet", "", withCookie(c)); w.Code != 200 {
		t.Fatalf("before expiry: %d", w.Code)
	}
	clk.add(time.Minute)
	if w := do(h, "GET", "/ui/fleet", "", withCookie(c)); w.Code != http.StatusSeeOther {
		t.Errorf("at expiry: %d, want 303 to the login form", w.Code)
	}
	if w := do(h, "POST", "/ui/sessions/s/restore", "{}", withCookie(c), withHeader("Content-Type", "application/json")); w.Code != http.StatusUnauthorized {
		t.Errorf("action after expiry: %d, want 401", w.Code)
	}

	c = logIn(t, h, acmeToken)
	w := do(h, "POST", "/logout", "", withCookie(c), withHeader("Origin", "http://example.com"))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/login" {
		t.Errorf("logout: %d %q", w.Code, w.Header().Get("Location"))
	}
	if cs := w.Result().Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 {
		t.Errorf("logout: cookies %+v, want the session cookie cleared", cs)
	}
	if w := do(h, "GET", "/ui/fleet", "", withCookie(c)); w.Code != http.StatusSeeOther {
		t.Errorf("the old cookie after logout: %d, want 303", w.Code)
	}
}

// TestInspectorCSRF: a page on another site cannot make a logged-in
// browser (or a loopback server without auth) record anything.
func TestInspectorCSRF(t *testing.T) {
	_, _, h := loginServer(t)
	c := logIn(t, h, acmeToken)
	form := withHeader("Content-Type", "application/x-www-form-urlencoded")
	json := withHeader("Content-Type", "application/json")
	cases := []struct {
		name string
		opts []reqOpt
		code int
	}{
		{"cross-site form", []reqOpt{form, withHeader("Origin", "https://evil.example"), withHeader("Sec-Fetch-Site", "cross-site")}, 403},
		{"cross-site form, Origin only", []reqOpt{form, withHeader("Origin", "https://evil.example")}, 403},
		{"cross-site JSON", []reqOpt{json, withHeader("Sec-Fetch-Site", "cross-site")}, 403},
		{"same-site sibling JSON", []reqOpt{json, withHeader("Sec-Fetch-Site", "same-site")}, 403},
		{"same-origin form", []reqOpt{form, withHeader("Sec-Fetch-Site", "same-origin")}, 403},
		{"same-origin text/plain", []reqOpt{withHeader("Content-Type", "text/plain"), withHeader("Origin", "http://example.com")}, 403},
		{"same-origin JSON", []reqOpt{json, withHeader("Sec-Fetch-Site", "same-origin"), withHeader("Origin", "http://example.com")}, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := do(h, "POST", "/ui/sessions/s/restore", `{"item":"i"}`, append([]reqOpt{withCookie(c)}, tc.opts...)...)
			if w.Code != tc.code {
				t.Errorf("%d %s, want %d", w.Code, w.Body, tc.code)
			}
		})
	}
	// Logging in from another site is refused too (login CSRF).
	w := do(h, "POST", "/login", "token="+acmeToken, form, withHeader("Origin", "https://evil.example"))
	if w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
		t.Errorf("cross-site login: %d, cookies %v", w.Code, w.Result().Cookies())
	}
	// Without an auth file (loopback): a cross-site form cannot post either.
	open := listenerGuard(t).Handler(bareServer(Config{}).guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })))
	w = do(open, "POST", "/v1/sessions/s/restore", `{"item":"i"}`, withHeader("Content-Type", "text/plain"), withHeader("Origin", "https://evil.example"), withHeader("Sec-Fetch-Site", "cross-site"))
	if w.Code != http.StatusForbidden {
		t.Errorf("cross-site post without auth: %d, want 403", w.Code)
	}
	w = do(open, "POST", "/v1/sessions/s/restore", `{"item":"i"}`) // a CLI: no browser headers
	if w.Code != 200 {
		t.Errorf("non-browser post: %d, want 200", w.Code)
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"": "/", "/": "/", "/ui/fleet?x=1": "/ui/fleet?x=1", "//evil.example/": "/", "/\\evil.example": "/",
		"https://evil.example/": "/", "ui/fleet": "/", "javascript:alert(1)": "/",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLoginsPerTenantCap (issue 32, item 6): one tenant's many logins
// evict only its own oldest sessions, never another tenant's.
func TestLoginsPerTenantCap(t *testing.T) {
	clk := &clock{t: time.Unix(0, 0)}
	l := newLogins(clk.now, time.Hour)
	other, err := l.add("globex")
	if err != nil {
		t.Fatal(err)
	}
	first, _ := l.add("acme")
	var last string
	for range 10001 {
		clk.add(time.Millisecond)
		if last, err = l.add("acme"); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(l.byTenant["acme"]); got != maxLoginsPerTenant {
		t.Errorf("acme holds %d logins, want %d", got, maxLoginsPerTenant)
	}
	if len(l.m) != maxLoginsPerTenant+1 {
		t.Errorf("%d logins held, want %d", len(l.m), maxLoginsPerTenant+1)
	}
	if tenant, ok := l.tenant(other); !ok || tenant != "globex" {
		t.Error("globex's login was evicted by acme's logins")
	}
	if _, ok := l.tenant(first); ok {
		t.Error("acme's oldest login survived past its cap")
	}
	if _, ok := l.tenant(last); !ok {
		t.Error("acme's newest login is gone")
	}
	// Expired logins go first, and lookups and logouts keep the index.
	clk.add(2 * time.Hour)
	if _, ok := l.tenant(last); ok {
		t.Error("an expired login is still live")
	}
	l.remove(other)
	if _, err := l.add("acme"); err != nil {
		t.Fatal(err)
	}
	if len(l.byTenant["globex"]) != 0 || len(l.byTenant["acme"]) > maxLoginsPerTenant {
		t.Errorf("index after expiry and logout: globex %d, acme %d", len(l.byTenant["globex"]), len(l.byTenant["acme"]))
	}
}

func withClient(addr string) reqOpt { return func(r *http.Request) { r.RemoteAddr = addr } }

// TestLoginRateLimited (issue 32, item 6): login attempts are limited per
// client (right or wrong token) and logins per token, on the API's clock;
// another client and another token are unaffected; the refusal is 429
// with Retry-After and does not echo the token.
func TestLoginRateLimited(t *testing.T) {
	form := withHeader("Content-Type", "application/x-www-form-urlencoded")
	login := func(h http.Handler, token, client string) *httptest.ResponseRecorder {
		return do(h, "POST", "/login", "token="+token, form, withClient(client))
	}
	t.Run("per client", func(t *testing.T) {
		_, clk, h := loginServer(t)
		const guess = "wrong-token-0123456789abcdef"
		for i := range loginClientBurst {
			if w := login(h, guess, "198.51.100.7:4000"); w.Code != http.StatusUnauthorized {
				t.Fatalf("attempt %d: %d, want 401", i+1, w.Code)
			}
		}
		w := login(h, acmeToken, "198.51.100.7:4001") // a right token counts too
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "3" || len(w.Result().Cookies()) != 0 {
			t.Fatalf("attempt past the burst: %d Retry-After %q cookies %v, want 429, 3, none", w.Code, w.Header().Get("Retry-After"), w.Result().Cookies())
		}
		if strings.Contains(w.Body.String(), acmeToken) || !strings.Contains(w.Body.String(), "too many login attempts") {
			t.Errorf("429 page: %s", w.Body)
		}
		if w := login(h, guess, "203.0.113.9:4000"); w.Code != http.StatusUnauthorized {
			t.Errorf("another client: %d, want 401", w.Code)
		}
		clk.add(loginClientEvery)
		if w := login(h, acmeToken, "198.51.100.7:4002"); w.Code != http.StatusSeeOther {
			t.Errorf("after %v: %d, want 303", loginClientEvery, w.Code)
		}
		if w := login(h, acmeToken, "198.51.100.7:4003"); w.Code != http.StatusTooManyRequests {
			t.Errorf("the refilled attempt is spent: %d, want 429", w.Code)
		}
	})
	t.Run("per token", func(t *testing.T) {
		_, clk, h := loginServer(t)
		client := func(i int) string { return "192.0.2." + strconv.Itoa(i+1) + ":5000" }
		for i := range loginTokenBurst {
			if w := login(h, acmeToken, client(i)); w.Code != http.StatusSeeOther {
				t.Fatalf("login %d: %d, want 303", i+1, w.Code)
			}
		}
		if w := login(h, acmeToken, client(100)); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "6" {
			t.Fatalf("login past the token's burst from a new client: %d Retry-After %q, want 429, 6", w.Code, w.Header().Get("Retry-After"))
		}
		if w := login(h, globexToken, client(100)); w.Code != http.StatusSeeOther {
			t.Errorf("another token: %d, want 303", w.Code)
		}
		clk.add(loginTokenEvery)
		if w := login(h, acmeToken, client(101)); w.Code != http.StatusSeeOther {
			t.Errorf("after %v: %d, want 303", loginTokenEvery, w.Code)
		}
	})
}

func TestClientKey(t *testing.T) {
	for in, want := range map[string]string{
		"198.51.100.7:4000": "198.51.100.7", "[2001:db8::1]:1": "2001:db8::/64", "[2001:db8::ffff:2]:9": "2001:db8::/64",
		"[2001:db8:0:1::1]:1": "2001:db8:0:1::/64", "[::ffff:198.51.100.7]:1": "198.51.100.7", "@": "@",
	} {
		if got := clientKey(in); got != want {
			t.Errorf("clientKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// bareServer is a Server over cfg with its defaults but no pipeline or
// store (Validate would refuse it): enough for the login and guard routes.
func bareServer(cfg Config) *Server {
	cfg.setDefaults()
	return newServer(cfg)
}
