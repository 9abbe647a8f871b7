package service

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/internal/api"
	"github.com/prunesched/prunesched/policy"
)

// hostDo sends a request naming host in its Host header, with extra
// headers, and returns the response (redirects not followed).
func hostDo(t *testing.T, method, url, host string, hdr map[string]string, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestForeignHostRefused (issue 32, item 3): without an auth file, on
// loopback, a page whose DNS name was rebound to 127.0.0.1 (Host:
// attacker.example) reads nothing and changes nothing; the server's own
// names work; a browser's change from another origin is refused while a
// client without browser headers (the CLI, adapters) is not.
func TestForeignHostRefused(t *testing.T) {
	t.Parallel()
	svc := startT(t, t.TempDir())
	defer svc.Close()
	base := "http://" + svc.HTTPAddr
	port := svc.HTTPAddr[strings.LastIndex(svc.HTTPAddr, ":"):]
	body, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	if code, b := httpDo(t, "POST", base+"/v1/events", body); code != 200 {
		t.Fatalf("append %d %s", code, b)
	}
	const evil = "attacker.example"
	prune := `{"item":"t2","by":"x"}`
	jsonCT := map[string]string{"Content-Type": "application/json"}
	cross := map[string]string{"Content-Type": "application/json", "Origin": "http://" + evil + port, "Sec-Fetch-Site": "same-origin"}
	cases := []struct {
		name, method, path, host string
		hdr                      map[string]string
		body                     string
		code                     int
	}{
		{"item, rebound", "GET", "/v1/sessions/sample/items/t1?format=raw", evil + port, nil, "", 421},
		{"item, rebound, no port", "GET", "/v1/sessions/sample/items/t1?format=raw", evil, nil, "", 421},
		{"inspector, rebound", "GET", "/", evil + port, nil, "", 421},
		{"inspector item, rebound", "GET", "/ui/sessions/sample/original/t1", evil + port, nil, "", 421},
		{"prune, rebound", "POST", "/v1/sessions/sample/prune", evil + port, cross, prune, 421},
		{"ui prune, rebound", "POST", "/ui/sessions/sample/prune", evil + port, cross, prune, 421},
		{"import, rebound", "POST", "/v1/import?name=x.jsonl", evil + port, cross, string(body), 421},
		{"item, 127.0.0.1", "GET", "/v1/sessions/sample/items/t1?format=raw", "", nil, "", 200},
		{"item, localhost", "GET", "/v1/sessions/sample/items/t1?format=raw", "localhost" + port, nil, "", 200},
		{"item, [::1]", "GET", "/v1/sessions/sample/items/t1?format=raw", "[::1]" + port, nil, "", 200},
		{"prune from a foreign page", "POST", "/v1/sessions/sample/prune", "", map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, prune, 403},
		{"ui prune cross-site", "POST", "/ui/sessions/sample/prune", "", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, prune, 403},
		{"prune, CLI (no browser headers)", "POST", "/v1/sessions/sample/prune", "", jsonCT, prune, 200},
		{"ui prune, own page", "POST", "/ui/sessions/sample/prune", "localhost" + port, map[string]string{"Content-Type": "application/json", "Origin": "http://localhost" + port, "Sec-Fetch-Site": "same-origin"}, prune, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := hostDo(t, tc.method, base+tc.path, tc.host, tc.hdr, tc.body)
			if resp.StatusCode != tc.code {
				t.Fatalf("%d %s, want %d", resp.StatusCode, clipBody(b), tc.code)
			}
			if resp.StatusCode != 200 && bytes.Contains(b, []byte("func Load")) {
				t.Errorf("a refused request got the item: %s", clipBody(b))
			}
			if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q", got)
			}
			if resp.Header.Get("Content-Security-Policy") == "" || resp.Header.Get("X-Frame-Options") != "DENY" {
				t.Errorf("headers %v: want a CSP and X-Frame-Options DENY", resp.Header)
			}
		})
	}
}

// TestAllowedHostAndPublicURL: --allowed-host and --public-url add names;
// an https public URL makes the login cookie Secure; a bad value stops
// the start naming the field.
func TestAllowedHostAndPublicURL(t *testing.T) {
	t.Parallel()
	auth, err := api.LoadAuthFile(writeAuthFile(t, tokenA+" acme\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := Start(ctx, Config{DataDir: t.TempDir(), HTTPListen: "127.0.0.1:0", Policy: policy.Default(), Auth: auth,
		AllowedHosts: []string{"projector"}, PublicURL: "https://ps.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	base := "http://" + svc.HTTPAddr
	for host, code := range map[string]int{"projector:9101": 200, "ps.example.com": 200, "ps.example.com:443": 200, "attacker.example": 421} {
		if resp, b := hostDo(t, "GET", base+"/healthz", host, nil, ""); resp.StatusCode != code {
			t.Errorf("Host %q: %d %s, want %d", host, resp.StatusCode, b, code)
		}
	}
	// The reverse proxy forwards the browser's login (Origin the public URL).
	resp, b := hostDo(t, "POST", base+"/login", "ps.example.com", map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://ps.example.com", "Sec-Fetch-Site": "same-origin",
	}, "token="+tokenA)
	var secure bool
	for _, c := range resp.Cookies() {
		if c.Name == api.SessionCookie {
			secure = c.Secure
		}
	}
	if len(resp.Cookies()) != 1 || !secure {
		t.Errorf("login behind an https public URL: %d %s, cookies %v: want one Secure cookie", resp.StatusCode, clipBody(b), resp.Cookies())
	}

	for _, cfg := range []Config{
		{DataDir: "d", HTTPListen: "127.0.0.1:0", AllowedHosts: []string{"https://x"}},
		{DataDir: "d", HTTPListen: "127.0.0.1:0", PublicURL: "ps.example.com"},
	} {
		err := cfg.Check()
		if err == nil || (!strings.Contains(err.Error(), "allowed host") && !strings.Contains(err.Error(), "public URL")) {
			t.Errorf("%+v: %v, want an error naming the field", cfg, err)
		}
	}
}
