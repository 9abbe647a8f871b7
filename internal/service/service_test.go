package service

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/policy"
)

const sample = "../../examples/sample-session.jsonl"

func startT(t *testing.T, dir string) *Service {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := Start(ctx, Config{DataDir: dir, HTTPListen: "127.0.0.1:0", Policy: policy.Default()})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return svc
}

func httpDo(t *testing.T, method, url string, body []byte) (int, []byte) {
	t.Helper()
	return httpAs(t, method, url, "", nil, body)
}

// TestServeEndToEndAndRestart appends the sample session over HTTP, reads
// the rendered bundle, decisions and an original item, then restarts on the
// same data directory and checks everything is still there, identical.
func TestServeEndToEndAndRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	body, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	svc := startT(t, dir)
	base := "http://" + svc.HTTPAddr

	if code, b := httpDo(t, "GET", base+"/healthz", nil); code != 200 {
		t.Fatalf("healthz %d %s", code, b)
	}
	if code, b := httpDo(t, "GET", base+"/readyz", nil); code != 200 {
		t.Fatalf("readyz %d %s", code, b)
	}
	if code, b := httpDo(t, "POST", base+"/v1/events", body); code != 200 {
		t.Fatalf("append %d %s", code, b)
	}
	// Appending the same events again is deduplicated by event id.
	if code, b := httpDo(t, "POST", base+"/v1/events", body); code != 200 {
		t.Fatalf("re-append %d %s", code, b)
	}
	code, text := httpDo(t, "GET", base+"/v1/sessions/sample/bundle?format=text", nil)
	if code != 200 {
		t.Fatalf("bundle %d %s", code, text)
	}
	if !strings.Contains(string(text), ", context_recover #") {
		t.Errorf("bundle has no placeholder naming the recovery handle:\n%s", text)
	}
	code, decisions := httpDo(t, "GET", base+"/v1/sessions/sample/decisions", nil)
	if code != 200 {
		t.Fatalf("decisions %d %s", code, decisions)
	}
	var ds struct {
		Decisions []struct {
			Item     string          `json:"item"`
			Decision events.Decision `json:"decision"`
			Rung     events.Rung     `json:"rung"`
			Applied  bool            `json:"applied"`
		} `json:"decisions"`
	}
	if err := json.Unmarshal(decisions, &ds); err != nil {
		t.Fatal(err)
	}
	pruned := map[string]bool{}
	for _, d := range ds.Decisions {
		if d.Decision == events.Prune && d.Rung == events.L0 && d.Applied {
			pruned[d.Item] = true
		}
	}
	// t1 and t3 are identical reads before the edit; t5 and t7 identical
	// reads after it. One copy of each pair stays.
	if len(pruned) != 2 || pruned["t1"] == pruned["t3"] || pruned["t5"] == pruned["t7"] {
		t.Errorf("applied L0 prunes = %v, want one of t1/t3 and one of t5/t7", pruned)
	}
	// The test runs (t2 failing, t6 passing) are not duplicates.
	if pruned["t2"] || pruned["t6"] {
		t.Errorf("a test run was pruned: %v", pruned)
	}
	code, item := httpDo(t, "GET", base+"/v1/sessions/sample/items/t1?format=raw", nil)
	if code != 200 || !strings.Contains(string(item), "func Load(path string)") {
		t.Fatalf("item t1: %d %s", code, item)
	}
	if code, b := httpDo(t, "GET", base+"/v1/sessions/sample/items/nope", nil); code != 404 {
		t.Errorf("unknown item: %d %s", code, b)
	}
	// A bad event names the line and field; nothing is stored.
	bad := []byte(`{"v":1,"id":"x1","type":"message","session":"sample","time":"2026-11-30T10:00:00Z","data":{"item":"m9","role":"robot","text":"x"}}`)
	code, b := httpDo(t, "POST", base+"/v1/events", bad)
	if code != 400 || !strings.Contains(string(b), "request body:1:") || !strings.Contains(string(b), "data.role") {
		t.Errorf("bad event: %d %s", code, b)
	}
	svc.Close()

	// Restart on the same directory: same bundle, same decisions.
	svc2 := startT(t, dir)
	defer svc2.Close()
	base2 := "http://" + svc2.HTTPAddr
	_, text2 := httpDo(t, "GET", base2+"/v1/sessions/sample/bundle?format=text", nil)
	_, decisions2 := httpDo(t, "GET", base2+"/v1/sessions/sample/decisions", nil)
	if !bytes.Equal(text, text2) {
		t.Errorf("bundle changed across restart")
	}
	if !bytes.Equal(decisions, decisions2) {
		t.Errorf("decisions changed across restart:\n%s\n---\n%s", decisions, decisions2)
	}
}

// TestManualControlAndLiveRender pins a pruned item, asks for a manual
// prune of another, renders at a later request time and checks the
// decisions and the bundle follow; then restores and flushes.
func TestManualControlAndLiveRender(t *testing.T) {
	body, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	svc := startT(t, t.TempDir())
	defer svc.Close()
	base := "http://" + svc.HTTPAddr
	if code, b := httpDo(t, "POST", base+"/v1/events", body); code != 200 {
		t.Fatalf("append %d %s", code, b)
	}
	decisionOf := func(item string) (string, string, bool) {
		t.Helper()
		_, b := httpDo(t, "GET", base+"/v1/sessions/sample/decisions", nil)
		var ds struct {
			Decisions []struct {
				Item, Decision, Reason string
				Applied                bool
			}
		}
		if err := json.Unmarshal(b, &ds); err != nil {
			t.Fatal(err)
		}
		for _, d := range ds.Decisions {
			if d.Item == item {
				return d.Decision, d.Reason, d.Applied
			}
		}
		return "", "", false
	}
	if d, _, applied := decisionOf("t1"); d != "PRUNE" || !applied {
		t.Fatalf("t1 before the pin: %s applied=%v", d, applied)
	}
	for _, c := range []struct{ verb, item string }{{"pin", "t1"}, {"prune", "a2"}} {
		if code, b := httpDo(t, "POST", base+"/v1/sessions/sample/"+c.verb, []byte(`{"item":"`+c.item+`","by":"alice","reason":"test","time":"2026-11-30T09:10:00Z"}`)); code != 200 {
			t.Fatalf("%s %s: %d %s", c.verb, c.item, code, b)
		}
	}
	if code, b := httpDo(t, "POST", base+"/v1/sessions/sample/pin", []byte(`{"item":"no-such-item"}`)); code != 404 {
		t.Errorf("pin of an unknown item: %d %s", code, b)
	}
	// An adapter renders at its next request's time.
	code, bundle := httpDo(t, "POST", base+"/v1/sessions/sample/render", []byte(`{"time":"2026-11-30T09:20:00Z","request":"live1","format":"text"}`))
	if code != 200 {
		t.Fatalf("render %d %s", code, bundle)
	}
	if d, reason, applied := decisionOf("t1"); d != "KEEP" || reason != "PINNED" || !applied {
		t.Errorf("t1 after pin and render: %s %s applied=%v", d, reason, applied)
	}
	if d, reason, applied := decisionOf("a2"); d != "PRUNE" || reason != "MANUAL_PRUNE" || !applied {
		t.Errorf("a2 after manual prune and render: %s %s applied=%v", d, reason, applied)
	}
	if strings.Contains(string(bundle), "Reading the loader again") {
		t.Errorf("manually pruned a2 still rendered:\n%s", bundle)
	}
	// A render without a time is refused: decisions never read the clock.
	if code, b := httpDo(t, "POST", base+"/v1/sessions/sample/render", []byte(`{"request":"live2"}`)); code != 400 {
		t.Errorf("render without time: %d %s", code, b)
	}
	// Restore takes effect at once; flush is recorded.
	if code, b := httpDo(t, "POST", base+"/v1/sessions/sample/restore", []byte(`{"item":"a2","by":"alice"}`)); code != 200 {
		t.Fatalf("restore: %d %s", code, b)
	}
	_, text := httpDo(t, "GET", base+"/v1/sessions/sample/bundle?format=text", nil)
	if !strings.Contains(string(text), "Reading the loader again") {
		t.Errorf("restored a2 not rendered")
	}
	if code, b := httpDo(t, "POST", base+"/v1/sessions/sample/flush", []byte(`{"by":"alice"}`)); code != 200 {
		t.Errorf("flush: %d %s", code, b)
	}
	if code, b := httpDo(t, "GET", base+"/v1/sessions/sample/pending", nil); code != 200 || !json.Valid(b) {
		t.Errorf("pending: %d %s", code, b)
	}
	code, b := httpDo(t, "GET", base+"/v1/sessions/sample/economics", nil)
	var eco struct {
		Ledgers map[string]struct {
			Requests []struct {
				Tokens int     `json:"tokens"`
				Cost   float64 `json:"cost"`
			} `json:"requests"`
		} `json:"ledgers"`
	}
	if code != 200 || json.Unmarshal(b, &eco) != nil || len(eco.Ledgers) != 3 || len(eco.Ledgers["none"].Requests) != 8 {
		t.Errorf("economics: %d %s", code, b)
	}
}

// TestExternalNATSSameCodePath runs the service against a NATS server it did
// not start (--nats URL) and checks the same decisions come out as with the
// embedded default.
func TestExternalNATSSameCodePath(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ext, err := store.StartEmbedded(ctx, store.EmbeddedConfig{DataDir: t.TempDir(), Listen: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Shutdown()
	decisionsVia := func(cfg Config) []byte {
		t.Helper()
		cfg.HTTPListen, cfg.Policy = "127.0.0.1:0", policy.Default()
		svc, err := Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Close()
		if svc.Embedded != nil && cfg.NATSURL != "" {
			t.Fatal("an embedded server was started although --nats was given")
		}
		base := "http://" + svc.HTTPAddr
		if code, b := httpDo(t, "POST", base+"/v1/events", body); code != 200 {
			t.Fatalf("append %d %s", code, b)
		}
		code, b := httpDo(t, "GET", base+"/v1/sessions/sample/decisions", nil)
		if code != 200 {
			t.Fatalf("decisions %d %s", code, b)
		}
		return b
	}
	// As the service user, over TCP: it may create the stream, not update it.
	external := decisionsVia(Config{NATSURL: ext.ServiceURL()})
	embedded := decisionsVia(Config{DataDir: t.TempDir()})
	if !bytes.Equal(external, embedded) {
		t.Errorf("decisions differ between an external server and the embedded one:\n%s\n---\n%s", external, embedded)
	}
}
