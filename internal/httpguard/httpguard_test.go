package httpguard

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func mustNew(t *testing.T, c Config) *Guard {
	t.Helper()
	g, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestHost: which Host headers each kind of bind answers (issue 32, item
// 3: a rebound name such as attacker.example is refused on every bind).
func TestHost(t *testing.T) {
	loop := Config{Listen: "127.0.0.1:7070"}
	ephemeral := Config{Listen: "localhost:0", Addr: "127.0.0.1:40111"}
	all := Config{Listen: "0.0.0.0:7070", AllowedHosts: []string{"projector", "ps.lan:7070"}}
	public := Config{Listen: "127.0.0.1:7070", PublicURL: "https://PS.example.com/"}
	cases := []struct {
		name string
		cfg  Config
		host string
		ok   bool
	}{
		{"loopback ip", loop, "127.0.0.1:7070", true},
		{"loopback localhost", loop, "localhost:7070", true},
		{"loopback LOCALHOST.", loop, "LOCALHOST.:7070", true},
		{"loopback ipv6", loop, "[::1]:7070", true},
		{"loopback other port", loop, "127.0.0.1:7071", false},
		{"loopback no port", loop, "localhost", false},
		{"loopback rebound name", loop, "attacker.example:7070", false},
		{"loopback rebound name no port", loop, "attacker.example", false},
		{"loopback other ip", loop, "10.0.0.1:7070", false},
		{"loopback empty", loop, "", false},
		{"ephemeral bound port", ephemeral, "localhost:40111", true},
		{"ephemeral port 0", ephemeral, "localhost:0", false},
		{"all ip literal", all, "192.168.1.5:7070", true},
		{"all ipv6 literal", all, "[fe80::1]:7070", true},
		{"all ip other port", all, "192.168.1.5:80", false},
		{"all localhost", all, "localhost:7070", true},
		{"all allowed name any port", all, "projector:9999", true},
		{"all allowed name:port", all, "ps.lan:7070", true},
		{"all allowed name other port", all, "ps.lan:7071", false},
		{"all rebound name", all, "attacker.example:7070", false},
		{"public host", public, "ps.example.com", true},
		{"public host :443", public, "ps.example.com:443", true},
		{"public host other port", public, "ps.example.com:8443", false},
		{"public keeps loopback", public, "localhost:7070", true},
		{"port 80 bind without port", Config{Listen: "127.0.0.1:80"}, "localhost", true},
		{"named bind", Config{Listen: "ps.lan:7070", Addr: "192.168.1.5:7070"}, "ps.lan:7070", true},
		{"named bind ip", Config{Listen: "ps.lan:7070", Addr: "192.168.1.5:7070"}, "192.168.1.5:7070", true},
		{"named bind other name", Config{Listen: "ps.lan:7070", Addr: "192.168.1.5:7070"}, "localhost:7070", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := mustNew(t, tc.cfg).Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
			for _, method := range []string{"GET", "POST"} {
				r := httptest.NewRequest(method, "/v1/sessions", nil)
				r.Host = tc.host
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if got := w.Code == http.StatusOK; got != tc.ok {
					t.Errorf("%s Host %q: %d %s, want allowed=%v", method, tc.host, w.Code, w.Body, tc.ok)
				}
				if !tc.ok && (w.Code != http.StatusMisdirectedRequest || !strings.Contains(w.Body.String(), "--allowed-host")) {
					t.Errorf("%s Host %q: %d %s, want 421 naming --allowed-host", method, tc.host, w.Code, w.Body)
				}
			}
		})
	}
}

// TestOrigin: changes a browser says come from another origin are
// refused; reads, and requests without browser headers (the CLI, agents,
// adapters), pass.
func TestOrigin(t *testing.T) {
	g := mustNew(t, Config{Listen: "127.0.0.1:7070", PublicURL: "https://ps.example.com"})
	h := g.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	cases := []struct {
		name, method, origin, site string
		code                       int
	}{
		{"no browser headers", "POST", "", "", 200},
		{"same origin", "POST", "http://127.0.0.1:7070", "same-origin", 200},
		{"same origin, Origin only", "POST", "http://localhost:7070", "", 200},
		{"public origin", "POST", "https://ps.example.com", "same-origin", 200},
		{"user typed (none)", "POST", "", "none", 200},
		{"cross-site", "POST", "https://evil.example", "cross-site", 403},
		{"cross-site Origin only", "POST", "https://evil.example", "", 403},
		{"cross-site Sec-Fetch-Site only", "POST", "", "cross-site", 403},
		{"same-site sibling", "POST", "http://127.0.0.1:7071", "same-site", 403},
		{"rebound page says same-origin", "POST", "http://attacker.example:7070", "same-origin", 403},
		{"other port", "POST", "http://127.0.0.1:7071", "", 403},
		{"null origin", "POST", "null", "", 403},
		{"delete cross-site", "DELETE", "https://evil.example", "", 403},
		{"GET cross-site", "GET", "https://evil.example", "cross-site", 200},
		{"HEAD cross-site", "HEAD", "https://evil.example", "cross-site", 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/ui/sessions/s/prune", nil)
			r.Host = "127.0.0.1:7070"
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if tc.site != "" {
				r.Header.Set("Sec-Fetch-Site", tc.site)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.code {
				t.Errorf("%d %s, want %d", w.Code, w.Body, tc.code)
			}
		})
	}
}

// TestHeadersAndSecure: every answer, refusals included, carries the
// security headers; Secure follows TLS and an https public URL.
func TestHeadersAndSecure(t *testing.T) {
	var secure []bool
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secure = append(secure, Secure(r))
		w.Header().Set("Content-Type", "text/plain")
	})
	plain := mustNew(t, Config{Listen: "127.0.0.1:7070"}).Handler(next)
	https := mustNew(t, Config{Listen: "127.0.0.1:7070", PublicURL: "https://ps.example.com"}).Handler(next)
	httpPub := mustNew(t, Config{Listen: "127.0.0.1:7070", PublicURL: "http://ps.example.com"}).Handler(next)
	for _, host := range []string{"127.0.0.1:7070", "attacker.example"} {
		r := httptest.NewRequest("GET", "/v1/sessions/s/items/t1?format=raw", nil)
		r.Host = host
		w := httptest.NewRecorder()
		plain.ServeHTTP(w, r)
		for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Content-Security-Policy": CSP} {
			if got := w.Header().Get(k); got != v {
				t.Errorf("Host %q: %s = %q, want %q", host, k, got, v)
			}
		}
	}
	secure = nil
	for _, h := range []http.Handler{plain, https, httpPub} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = "localhost:7070"
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Host, r.TLS = "localhost:7070", &tls.ConnectionState{}
	plain.ServeHTTP(httptest.NewRecorder(), r)
	if want := []bool{false, true, false, true}; len(secure) != 4 || secure[0] != want[0] || secure[1] != want[1] || secure[2] != want[2] || secure[3] != want[3] {
		t.Errorf("Secure = %v, want %v (plain, https public URL, http public URL, TLS)", secure, want)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{Listen: "127.0.0.1"}, `listen address "127.0.0.1"`},
		{Config{Listen: "127.0.0.1:7070", AllowedHosts: []string{"http://ps.lan"}}, `allowed host "http://ps.lan": want a host name or host:port, not a URL`},
		{Config{Listen: "127.0.0.1:7070", AllowedHosts: []string{"ps.lan:99999"}}, `allowed host "ps.lan:99999": port "99999"`},
		{Config{Listen: "127.0.0.1:7070", AllowedHosts: []string{""}}, `allowed host ""`},
		{Config{Listen: "127.0.0.1:7070", PublicURL: "ps.example.com"}, `public URL "ps.example.com": want an http:// or https:// URL`},
		{Config{Listen: "127.0.0.1:7070", PublicURL: "https://"}, `public URL "https://": want a host`},
		{Config{Listen: "127.0.0.1:7070", PublicURL: "https://u:p@ps.example.com"}, `public URL "https://u:p@ps.example.com": want a host and no user`},
	}
	for _, tc := range cases {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
	if err := (Config{Listen: "[::1]:0", Addr: "[::1]:5000", AllowedHosts: []string{"a", "b:1", "[fe80::1]:2"}, PublicURL: "http://x:8080"}).Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
}
