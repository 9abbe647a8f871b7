package service

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/internal/api"
	"github.com/prunesched/prunesched/policy"
)

// TestReadsBoundedWithoutWorkers: with the eligibility and scheduler
// workers down (only the projection runs), every API read that waits for
// them answers 503 once api.Config.Timeout passed instead of hanging,
// and appends still succeed (issue 29, item 3).
func TestReadsBoundedWithoutWorkers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc, err := Start(ctx, Config{DataDir: t.TempDir(), Policy: policy.Default(), Workers: []string{"projection"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	srv, err := api.New(api.Config{Pipeline: svc.Pipeline, Store: svc.Store, Tokens: svc.Tokens, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	var batch []string
	for _, b := range warmSession()[:2] {
		batch = append(batch, b...)
	}
	if code, out := httpDo(t, "POST", ts.URL+"/v1/events", []byte(strings.Join(batch, "\n"))); code != http.StatusOK {
		t.Fatalf("append without workers: %d %s", code, out)
	}
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/sessions/warm/pending", ""},
		{"GET", "/v1/sessions/warm/decisions", ""},
		{"GET", "/v1/sessions/warm/bundle", ""},
		{"POST", "/v1/sessions/warm/render", `{"time":"2026-11-30T09:00:30Z"}`},
	} {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		if code, out := httpDo(t, c.method, ts.URL+c.path, body); code != http.StatusServiceUnavailable {
			t.Errorf("%s %s without workers: %d %s, want 503", c.method, c.path, code, out)
		}
	}
}
