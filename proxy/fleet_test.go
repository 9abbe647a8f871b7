package proxy

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"

	"github.com/prunesched/prunesched/internal/service"
)

// TestJoinFleetRefusesAnotherKey: the first proxy on a log stores its
// identity key's fingerprint; one with the same key joins, one with
// another key (or a random one) is refused with an error that names the
// fix and never the key.
func TestJoinFleetRefusesAnotherKey(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Policy: testPolicy(t)})
	testutil.NoError(t, err)
	t.Cleanup(svc.Close)
	js := svc.Store.JS()
	key, err := NewIdentityKey()
	testutil.NoError(t, err)
	other, err := NewIdentityKey()
	testutil.NoError(t, err)
	testutil.NoError(t, JoinFleet(ctx, js, key, 1))
	testutil.NoError(t, JoinFleet(ctx, js, append([]byte(nil), key...), 1))
	err = JoinFleet(ctx, js, other, 1)
	testutil.True(t, errors.Is(err, ErrFleetKey), "another key joined: %v", err)
	msg := err.Error()
	testutil.True(t, strings.Contains(msg, KeyFingerprint(other)) && strings.Contains(msg, KeyFingerprint(key)) && strings.Contains(msg, "proxy-identity.key"),
		"the error names neither fingerprint nor the fix: %s", msg)
	testutil.True(t, !strings.Contains(msg, string(other)) && !strings.Contains(strings.ToLower(msg), hex.EncodeToString(other)), "the error shows the key")
	err = JoinFleet(ctx, js, nil, 1)
	testutil.True(t, errors.Is(err, ErrFleetKey), "a random key joined: %v", err)
	testutil.True(t, KeyFingerprint(key) != KeyFingerprint(other) && len(KeyFingerprint(key)) == 16, "fingerprints")
}

// TestNoWorkerBounded: with no eligibility or scheduler worker running
// (they crashed, or were never started), no proxy waits for one beyond
// its bounds. Deciding through the log (LogFirst), the request waits for
// the workers up to the budget and then goes upstream unchanged (failing
// open at stage timeout). Deciding in memory in a fleet, requests are
// decided and pruned without the workers, the proxy publishes their
// applications itself, and no response's end waits for a worker.
func TestNoWorkerBounded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pol := testPolicy(t)
	svc, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Policy: pol, Workers: []string{"projection"}})
	testutil.NoError(t, err)
	t.Cleanup(svc.Close)
	f := &fakeUpstream{}
	up := httptest.NewServer(okUpstream(f))
	t.Cleanup(up.Close)
	start := func(mod func(*Config)) (string, *prometheus.Registry, *Proxy) {
		reg := prometheus.NewRegistry()
		cfg := Config{Upstream: up.URL, Backend: service.NewProxyBackend(svc.Store, svc.Pipeline), Registry: reg, Policy: &pol}
		mod(&cfg)
		px, err := New(cfg)
		testutil.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = px.Close(ctx)
		})
		srv := httptest.NewServer(px.Handler())
		t.Cleanup(srv.Close)
		return srv.URL, reg, px
	}
	file := strings.Repeat(`func A() int { return 1 } // the same file, read again\n`, 40)
	body := func(n int) string {
		msgs := `{"role":"user","content":"hello"}`
		for i := range n {
			msgs += fmt.Sprintf(`,{"role":"assistant","content":[{"type":"tool_use","id":"t%d","name":"Read","input":{"file_path":"/a.go"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"%s"}]}`, i, i, file)
		}
		return `{"model":"m","max_tokens":10,"tools":[{"name":"Read"}],"messages":[` + msgs + `]}`
	}
	send := func(url, session string, n int) string {
		t.Helper()
		req, _ := http.NewRequest("POST", url+"/v1/messages", strings.NewReader(body(n)))
		req.Header.Set(SessionHeader, session)
		resp, err := http.DefaultClient.Do(req)
		testutil.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		testutil.True(t, resp.StatusCode == 200, "status %d", resp.StatusCode)
		reqs := f.requests()
		return string(reqs[len(reqs)-1].body)
	}
	total := func(reg *prometheus.Registry, name string) float64 {
		mfs, err := reg.Gather()
		testutil.NoError(t, err)
		sum := 0.0
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.GetMetric() {
					sum += m.GetCounter().GetValue()
				}
			}
		}
		return sum
	}

	logFirst, lreg, _ := start(func(c *Config) { c.LogFirst, c.Budget = true, 100*time.Millisecond })
	testutil.True(t, send(logFirst, "lf", 1) == body(1), "log first: the body changed")
	testutil.True(t, total(lreg, "prunesched_proxy_fail_open_total") == 1, "log first: the wait for the workers did not fail open")

	fleet, freg, fpx := start(func(c *Config) { c.Fleet, c.Budget = true, time.Hour })
	send(fleet, "fl", 1)
	pruned := send(fleet, "fl", 2)
	testutil.True(t, pruned != body(2) && strings.Contains(pruned, "prunesched"), "fleet: the duplicate read was not pruned without the workers: %s", pruned)
	testutil.True(t, total(freg, "prunesched_proxy_fail_open_total") == 0, "fleet: a request failed open")
	testutil.NoError(t, fpx.Flush(ctx))
	evs, err := svc.Store.ReadSession(ctx, "default", "fl")
	testutil.NoError(t, err)
	apps := 0
	for _, e := range evs {
		if _, ok := e.Data.(*events.Application); ok {
			apps++
		}
	}
	testutil.True(t, apps == 1, "fleet: %d applications in the log without the workers, want the proxy's 1", apps)
}
