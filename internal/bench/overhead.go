package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/proxy"
)

// Overhead is the result of MeasureOverheadDetail: latencies of the same
// requests sent through the proxy and directly to an upstream that answers
// instantly, and the proxy's added latency (each proxied request minus the
// direct request sent just before it with the same body).
type Overhead struct {
	Items     int           `json:"items"`
	Requests  int           `json:"requests"`
	ProxyP50  time.Duration `json:"proxy_p50"`
	ProxyP99  time.Duration `json:"proxy_p99"`
	DirectP50 time.Duration `json:"direct_p50"`
	DirectP99 time.Duration `json:"direct_p99"`
	AddedP50  time.Duration `json:"added_p50"`
	AddedP99  time.Duration `json:"added_p99"`
}

// MeasureOverhead measures the proxy's added latency per request for a
// session of the given number of items (p50 and p99 over 100 requests): a
// real embedded log and pipeline, the shipped policy, an Anthropic client
// that resends its history and adds one tool call and result per request,
// and an upstream that answers instantly. It is what `prunesched bench`
// calls.
func MeasureOverhead(ctx context.Context, items int) (p50, p99 time.Duration, err error) {
	o, err := MeasureOverheadDetail(ctx, items, 100)
	return o.AddedP50, o.AddedP99, err
}

// MeasureOverheadDetail is MeasureOverhead with the request count and the
// full result.
func MeasureOverheadDetail(ctx context.Context, items, requests int) (Overhead, error) {
	rig, err := newOverheadRig(ctx, items, policy.Default())
	if err != nil {
		return Overhead{}, err
	}
	defer rig.close()
	var viaD, dirD, addD []time.Duration
	for i := 0; i < requests; i++ {
		d, v, err := rig.round(ctx)
		if err != nil {
			return Overhead{}, err
		}
		dirD, viaD, addD = append(dirD, d), append(viaD, v), append(addD, max(v-d, 0))
	}
	o := Overhead{Items: items, Requests: requests}
	o.ProxyP50, o.ProxyP99 = percentiles(viaD)
	o.DirectP50, o.DirectP99 = percentiles(dirD)
	o.AddedP50, o.AddedP99 = percentiles(addD)
	return o, nil
}

// overheadRig is a started prunesched, a proxy and an instant upstream,
// with a client conversation of a given size.
type overheadRig struct {
	dir      string
	svc      *service.Service
	srv      *http.Server
	up       *http.Server
	proxyURL string
	upURL    string
	client   *http.Client
	// history is the messages array without its brackets; n the calls so
	// far.
	history bytes.Buffer
	n       int
}

func newOverheadRig(ctx context.Context, items int, pol policy.Policy) (*overheadRig, error) {
	dir, err := os.MkdirTemp("", "prunesched-overhead-")
	if err != nil {
		return nil, fmt.Errorf("overhead: temp dir: %w", err)
	}
	r := &overheadRig{dir: dir, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}}
	r.svc, err = service.Start(ctx, service.Config{DataDir: dir, Policy: pol})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("overhead: start: %w", err)
	}
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.close()
		return nil, fmt.Errorf("overhead: listen: %w", err)
	}
	answer := []byte(`{"id":"msg_x","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":1}}`)
	r.up = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})}
	go func() { _ = r.up.Serve(upLn) }()
	r.upURL = "http://" + upLn.Addr().String()
	px, err := proxy.New(proxy.Config{Upstream: r.upURL, Backend: service.NewProxyBackend(r.svc.Store, r.svc.Pipeline), Logger: slog.New(slog.DiscardHandler), Budget: 5 * time.Second})
	if err != nil {
		r.close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.close()
		return nil, fmt.Errorf("overhead: listen: %w", err)
	}
	r.srv = &http.Server{Handler: px.Handler()}
	px.ConfigureServer(r.srv)
	go func() { _ = r.srv.Serve(ln) }()
	r.proxyURL = "http://" + ln.Addr().String()
	r.history.WriteString(`{"role":"user","content":[{"type":"text","text":"Work on the repository."}]}`)
	for r.n*2+1 < items {
		r.addCall()
	}
	// The first request appends the whole session (and tokenizes it once):
	// not measured.
	if _, err := r.send(ctx, r.proxyURL); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// addCall appends one tool call and its (distinct, ~400 byte) result.
func (r *overheadRig) addCall() {
	r.n++
	fmt.Fprintf(&r.history, `,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_%06d","name":"Read","input":{"file_path":"/repo/f%d.go"}}]}`, r.n, r.n)
	out := strings.Repeat(fmt.Sprintf("line of file %d ", r.n), 20)
	q, _ := json.Marshal(out) // a string always encodes
	fmt.Fprintf(&r.history, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%06d","content":%s}]}`, r.n, q)
}

func (r *overheadRig) body() []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":1024,"system":[{"type":"text","text":"You are an agent.","cache_control":{"type":"ephemeral"}}],"tools":[{"name":"Read","input_schema":{"type":"object"}}],"messages":[`)
	b.Write(r.history.Bytes())
	b.WriteString(`]}`)
	return b.Bytes()
}

func (r *overheadRig) send(ctx context.Context, base string) (time.Duration, error) {
	body := r.body()
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Claude-Code-Session-Id", "overhead")
	start := time.Now()
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("overhead: request: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("overhead: status %d", resp.StatusCode)
	}
	return d, nil
}

// round adds one call and sends the request directly, then via the proxy.
func (r *overheadRig) round(ctx context.Context) (direct, via time.Duration, err error) {
	r.addCall()
	if direct, err = r.send(ctx, r.upURL); err != nil {
		return 0, 0, err
	}
	via, err = r.send(ctx, r.proxyURL)
	return direct, via, err
}

func (r *overheadRig) close() {
	if r.srv != nil {
		_ = r.srv.Close()
	}
	if r.up != nil {
		_ = r.up.Close()
	}
	if r.svc != nil {
		r.svc.Close()
	}
	_ = os.RemoveAll(r.dir)
}
