package service

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/internal/api"
	"github.com/prunesched/prunesched/policy"
)

// TestAppendConflictIs409: an event id reused with different content is a
// 409 naming the id, and nothing of the batch is stored.
func TestAppendConflictIs409(t *testing.T) {
	svc := startT(t, t.TempDir())
	defer svc.Close()
	base := "http://" + svc.HTTPAddr
	ev := func(id, text string) string {
		return `{"v":1,"id":"` + id + `","type":"message","session":"c","time":"2026-11-30T10:00:00Z","data":{"item":"m-` + id + `","role":"user","text":"` + text + `"}}`
	}
	if code, b := httpDo(t, "POST", base+"/v1/events", []byte(ev("e1", "hi")+"\n"+ev("e2", "there"))); code != 200 {
		t.Fatalf("append %d %s", code, b)
	}
	code, b := httpDo(t, "POST", base+"/v1/events", []byte(ev("e3", "new")+"\n"+ev("e2", "changed")))
	if code != 409 || !strings.Contains(string(b), `\"e2\"`) {
		t.Fatalf("conflicting append: %d %s, want 409 naming e2", code, b)
	}
	evs, err := svc.Store.ReadSession(t.Context(), "", "c")
	if err != nil || len(evs) != 2 {
		t.Fatalf("session holds %d events (%v), want the first 2", len(evs), err)
	}
}

func writeAuthFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "auth")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func httpAs(t *testing.T, method, url, token string, hdr map[string]string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

const (
	tokenA = "tok-aaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	tokenB = "tok-bbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func startAuth(t *testing.T, openMetrics bool) *Service {
	t.Helper()
	auth, err := api.LoadAuthFile(writeAuthFile(t, "# tokens\n"+tokenA+" acme\n\n"+tokenB+"  globex # second\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := Start(ctx, Config{DataDir: t.TempDir(), HTTPListen: "127.0.0.1:0", Policy: policy.Default(), Auth: auth, OpenMetrics: openMetrics})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(svc.Close)
	return svc
}

// TestAPIAuthBindsTenantToToken: with an auth file every API call needs a
// known bearer token, the tenant comes from the token, and neither the
// tenant header nor ?tenant= can name another (403). /healthz and /readyz
// stay open; /metrics needs a token unless OpenMetrics.
func TestAPIAuthBindsTenantToToken(t *testing.T) {
	svc := startAuth(t, false)
	base := "http://" + svc.HTTPAddr
	body, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method, path, token string
		hdr                       map[string]string
		body                      []byte
		want                      int
	}{
		{"healthz open", "GET", "/healthz", "", nil, nil, 200},
		{"readyz open", "GET", "/readyz", "", nil, nil, 200},
		{"metrics needs a token", "GET", "/metrics", "", nil, nil, 401},
		{"metrics with a token", "GET", "/metrics", tokenA, nil, nil, 200},
		{"no token", "POST", "/v1/events", "", nil, body, 401},
		{"unknown token", "POST", "/v1/events", tokenA + "x", nil, body, 401},
		{"not bearer", "GET", "/v1/sessions", "", map[string]string{"Authorization": "Basic " + tokenA}, nil, 401},
		{"A appends", "POST", "/v1/events", tokenA, nil, body, 200},
		{"A reads its session", "GET", "/v1/sessions/sample/decisions", tokenA, nil, nil, 200},
		{"A names its own tenant", "GET", "/v1/sessions/sample/decisions?tenant=acme", tokenA, map[string]string{api.TenantHeader: "acme"}, nil, 200},
		{"B cannot see A's session", "GET", "/v1/sessions/sample/decisions", tokenB, nil, nil, 404},
		{"B cannot name A by query", "GET", "/v1/sessions/sample/decisions?tenant=acme", tokenB, nil, nil, 403},
		{"B cannot name A by header", "GET", "/v1/sessions/sample/items/t1", tokenB, map[string]string{api.TenantHeader: "acme"}, nil, 403},
		{"B cannot pin A's item", "POST", "/v1/sessions/sample/pin?tenant=acme", tokenB, nil, []byte(`{"item":"t1"}`), 403},
		{"B cannot append as A", "POST", "/v1/events", tokenB, map[string]string{api.TenantHeader: "acme"}, body, 403},
	} {
		code, b := httpAs(t, tc.method, base+tc.path, tc.token, tc.hdr, tc.body)
		if code != tc.want {
			t.Errorf("%s: %s %s = %d %s, want %d", tc.name, tc.method, tc.path, code, clipBody(b), tc.want)
		}
	}
	// B's listing holds none of A's sessions; A's holds "sample".
	_, b := httpAs(t, "GET", base+"/v1/sessions", tokenB, nil, nil)
	if strings.Contains(string(b), "sample") {
		t.Errorf("B lists A's session: %s", b)
	}
	_, b = httpAs(t, "GET", base+"/v1/sessions", tokenA, nil, nil)
	if !strings.Contains(string(b), "sample") || !strings.Contains(string(b), "acme") {
		t.Errorf("A's listing: %s", b)
	}
}

// TestOpenMetrics: OpenMetrics serves /metrics without a token while the
// API still needs one.
func TestOpenMetrics(t *testing.T) {
	svc := startAuth(t, true)
	base := "http://" + svc.HTTPAddr
	if code, b := httpAs(t, "GET", base+"/metrics", "", nil, nil); code != 200 {
		t.Errorf("open metrics: %d %s", code, clipBody(b))
	}
	if code, b := httpAs(t, "GET", base+"/v1/sessions", "", nil, nil); code != 401 {
		t.Errorf("API without a token: %d %s", code, clipBody(b))
	}
}

// TestTenantQueryCannotOverrideHeader: without an auth file, a request whose
// tenant header and ?tenant= disagree is refused (it used to take the
// query's).
func TestTenantQueryCannotOverrideHeader(t *testing.T) {
	svc := startT(t, t.TempDir())
	defer svc.Close()
	base := "http://" + svc.HTTPAddr
	code, b := httpAs(t, "GET", base+"/v1/sessions?tenant=globex", "", map[string]string{api.TenantHeader: "acme"}, nil)
	if code != 400 {
		t.Errorf("conflicting tenant header and query: %d %s, want 400", code, clipBody(b))
	}
	code, b = httpAs(t, "GET", base+"/v1/sessions?tenant=acme", "", map[string]string{api.TenantHeader: "acme"}, nil)
	if code != 200 {
		t.Errorf("agreeing tenant header and query: %d %s", code, clipBody(b))
	}
}

// TestNonLoopbackWithoutAuthRefused: binding the API beyond loopback needs
// an auth file.
func TestNonLoopbackWithoutAuthRefused(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		svc, err := Start(ctx, Config{DataDir: t.TempDir(), HTTPListen: addr, Policy: policy.Default()})
		cancel()
		if err == nil {
			svc.Close()
			t.Errorf("listen %s without auth: started", addr)
			continue
		}
		if !strings.Contains(err.Error(), "auth") {
			t.Errorf("listen %s without auth: %v, want an error naming the auth file", addr, err)
		}
	}
}

func clipBody(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// TestDataDirInUseRefused: a second start on a data directory a running
// service holds (serve, proxy --data, an offline client --data) fails with
// an error saying so.
func TestDataDirInUseRefused(t *testing.T) {
	dir := t.TempDir()
	svc := startT(t, dir)
	defer svc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	second, err := Start(ctx, Config{DataDir: dir, Policy: policy.Default()})
	if err == nil {
		second.Close()
		t.Fatal("a second service opened the data directory")
	}
	if !strings.Contains(err.Error(), "in use by another prunesched process") {
		t.Errorf("error %q does not say the directory is in use", err)
	}
}
