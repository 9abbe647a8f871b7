package rss

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"time"
)

// outputEvents returns the output scenario's body: a tool call and its
// result, whose output is n bytes of one repeated character, as JSONL or
// as a JSON array.
func outputEvents(n int, format string) []byte {
	call := fmt.Appendf(nil, `{"v":1,"id":"big-call","session":"big","time":%q,"type":"tool_call","data":{"item":"cbig/input","call_id":"cbig","tool":"Bash","input":{"command":"cat big.log"}}}`, epoch.Format(time.RFC3339))
	head := fmt.Appendf(nil, `{"v":1,"id":"big-result","session":"big","time":%q,"type":"tool_result","data":{"item":"cbig","call_id":"cbig","tool":"Bash","output":"`, epoch.Add(time.Second).Format(time.RFC3339))
	sep, open, end := []byte("\n"), []byte(nil), []byte("\n")
	if format == "array" {
		sep, open, end = []byte(","), []byte("["), []byte("]")
	}
	b := make([]byte, 0, n+len(call)+len(head)+16)
	b = append(b, open...)
	b = append(b, call...)
	b = append(b, sep...)
	b = append(b, head...)
	b = append(b, bytes.Repeat([]byte("x"), n)...)
	b = append(b, `"}}`...)
	return append(b, end...)
}

// postOutput runs the output scenario: one POST, then Settle of sampling.
func (d *driver) postOutput(ctx context.Context, cfg Config) error {
	body := outputEvents(cfg.OutputBytes, cfg.Format)
	if d.post(ctx, "/v1/events", "application/x-ndjson", body) {
		d.events.Add(2)
	}
	return settle(ctx, cfg)
}

func settle(ctx context.Context, cfg Config) error {
	wait := cfg.Settle
	if wait <= 0 {
		wait = 5 * time.Second
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}

// anthropicRequest is the proxy-output scenario's request: an agent turn
// (tools offered) whose last message is a tool result of n bytes of one
// repeated character.
func anthropicRequest(n int) []byte {
	head := []byte(`{"model":"m","max_tokens":10,"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"messages":[` +
		`{"role":"user","content":"show me the log"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_big","name":"Bash","input":{"command":"cat big.log"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_big","content":"`)
	b := make([]byte, 0, n+len(head)+8)
	b = append(b, head...)
	b = append(b, bytes.Repeat([]byte("x"), n)...)
	return append(b, `"}]}]}`...)
}

// proxyOutput runs the proxy-output scenario: one request through the
// proxy, then sampling until the proxy's API lists a session (its
// background append ended; at most Duration) and Settle after.
func (d *driver) proxyOutput(ctx context.Context, cfg Config, proxyURL string) error {
	if err := waitListening(ctx, proxyURL); err != nil {
		return err
	}
	px := &driver{base: proxyURL, client: d.client}
	if !px.post(ctx, "/v1/messages", "application/json", anthropicRequest(cfg.OutputBytes)) {
		d.fail(fmt.Errorf("proxy: %v", px.firstErr.Load()))
		return nil
	}
	d.renders.Add(1) // the request answered
	wait := cfg.Duration
	if wait <= 0 {
		wait = time.Minute
	}
	deadline := time.Now().Add(wait)
	for ctx.Err() == nil {
		n, err := d.sessions(ctx)
		if err != nil {
			d.fail(err)
			return nil
		}
		if n > 0 {
			d.events.Add(1)
			break
		}
		if time.Now().After(deadline) {
			d.fail(fmt.Errorf("the proxy's background append was not in its API within %s (it fails past the proxy's --record-timeout)", wait))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return settle(ctx, cfg)
}

// sessions counts the sessions the API lists.
func (d *driver) sessions(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/v1/sessions", nil)
	if err != nil {
		return 0, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("list sessions: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		Sessions []string `json:"sessions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("list sessions: %w", err)
	}
	return len(out.Sessions), nil
}

// waitListening waits until something accepts connections at base.
func waitListening(ctx context.Context, base string) error {
	host := base[len("http://"):]
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if c, err := net.Dial("tcp", host); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("nothing listening at %s within 60s", base)
}

// startFakeModel serves a minimal Anthropic Messages API on loopback: it
// reads the request and answers one short non-streamed assistant turn.
func startFakeModel() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":1}}`)
	}))
}
