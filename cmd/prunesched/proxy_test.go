package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProxyKeepsIdentityKey: 'prunesched proxy --data DIR' creates the
// identity key in DIR with mode 0600 once and reuses it at the next start.
func TestProxyKeepsIdentityKey(t *testing.T) {
	dir := t.TempDir()
	start := func() []byte {
		t.Helper()
		// A cancelled context: the command starts and stops at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var out, errb bytes.Buffer
		run(ctx, &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }},
			[]string{"proxy", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--api-listen", "", "--data", dir})
		path := filepath.Join(dir, identityKeyFile)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatalf("identity key not created: %v (stderr %s)", err, errb.String())
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("identity key mode %v, want 0600", fi.Mode().Perm())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := start()
	if second := start(); !bytes.Equal(first, second) {
		t.Fatal("identity key changed at restart")
	}
}

// TestProxyListenerGuard (issue 32, item 3): the proxy's agent listener
// answers agents, which name its address in Host and send no browser
// headers, and refuses a page whose DNS name was rebound to it and a
// browser's post from another origin, before anything reaches the
// upstream. Both listeners carry the security headers.
func TestProxyListenerGuard(t *testing.T) {
	model := &fakeModel{}
	up := httptest.NewServer(model)
	defer up.Close()
	line, _ := startCommand(t, nil, "prunesched proxy on ",
		"proxy", "--upstream", up.URL, "--listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0", "--data", t.TempDir())
	// "prunesched proxy on http://ADDR -> UPSTREAM (API on http://ADDR)"
	fields := strings.Fields(line)
	proxyAddr := strings.TrimPrefix(fields[3], "http://")
	apiAddr := strings.TrimSuffix(strings.TrimPrefix(fields[len(fields)-1], "http://"), ")")
	port := proxyAddr[strings.LastIndex(proxyAddr, ":"):]
	body := `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		name, host string
		hdr        map[string]string
		code       int
	}{
		{"agent", "", nil, 200},
		{"agent via localhost", "localhost" + port, nil, 200},
		{"rebound page", "attacker.example" + port, map[string]string{"Origin": "http://attacker.example" + port}, 421},
		{"foreign page", "", map[string]string{"Origin": "https://evil.example"}, 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(model.requests())
			req, err := http.NewRequest("POST", "http://"+proxyAddr+"/v1/messages", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Api-Key", "sk-test")
			if tc.host != "" {
				req.Host = tc.host
			}
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("%d %s, want %d", resp.StatusCode, b, tc.code)
			}
			if reached := len(model.requests()) > before; reached != (tc.code == 200) {
				t.Errorf("upstream reached: %v, want %v", reached, tc.code == 200)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("no nosniff on the proxy listener: %v", resp.Header)
			}
		})
	}
	req, err := http.NewRequest("GET", "http://"+apiAddr+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "attacker.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("proxy API, rebound host: %d %v, want 421 with the security headers", resp.StatusCode, resp.Header)
	}
}
