package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testPolicy applies every eligible mark at the next request and does not
// protect recent turns, so a duplicate read is pruned in the request right
// after the second read. (The shipped policy is cache-aware and protects
// the last 2 turns: in a test where the cache is warm it would wait.)
func testPolicy(t testing.TB) policy.Policy {
	p, err := policy.Parse([]byte("name: proxy-test\nscheduler:\n  mode: next_request\neligibility:\n  protect_recent_turns: 0\n"))
	testutil.NoError(t, err)
	return p
}

// bench is a started prunesched with a proxy in front of an upstream.
type bench struct {
	svc      *service.Service
	px       *Proxy
	url      string // proxy base URL
	logs     *syncBuffer
	upstream *httptest.Server
}

func setup(t testing.TB, pol policy.Policy, upstream http.Handler, mod func(*Config)) *bench {
	t.Helper()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Policy: pol, Logger: logger})
	testutil.NoError(t, err)
	t.Cleanup(svc.Close)
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	cfg := Config{Upstream: up.URL, Backend: service.NewProxyBackend(svc.Store, svc.Pipeline), Logger: logger, Registry: svc.Registry, Budget: time.Hour}
	if mod != nil {
		mod(&cfg)
	}
	px, err := New(cfg)
	testutil.NoError(t, err)
	// After the server closed (cleanups run last first): records still
	// running in the background finish, or are cancelled, before the
	// service stops.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = px.Close(ctx)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.NoError(t, err)
	srv := &http.Server{Handler: px.Handler()}
	px.ConfigureServer(srv) // as the proxy command serves it
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &bench{svc: svc, px: px, url: "http://" + ln.Addr().String(), logs: logs, upstream: up}
}

// items returns the session's items once the pipeline is idle.
func (b *bench) items(t testing.TB, tenant, session string) []projections.Item {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	testutil.NoError(t, b.px.Flush(ctx))
	testutil.NoError(t, b.svc.Pipeline.WaitIdle(ctx))
	var out []projections.Item
	ok := b.svc.Pipeline.Projection.View(tenant, session, func(s *projections.Session) { out = s.Items() })
	testutil.True(t, ok, "session %s/%s unknown; sessions: %v", tenant, session, b.svc.Pipeline.Projection.Sessions())
	return out
}

// session is the session id the proxy gives a request with headers h
// whose session name (client header or derived id) is name.
func (b *bench) session(name string, h http.Header) string {
	return name + b.px.credentialTag(h)
}

// sessionOf returns the sessions holding item.
func (b *bench) sessionsOf(t testing.TB, tenant, item string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	testutil.NoError(t, b.px.Flush(ctx))
	testutil.NoError(t, b.svc.Pipeline.WaitIdle(ctx))
	var out []string
	for _, r := range b.svc.Pipeline.Projection.Sessions() {
		if r.Tenant != tenant {
			continue
		}
		b.svc.Pipeline.Projection.View(r.Tenant, r.Session, func(s *projections.Session) {
			for _, it := range s.Items() {
				if it.ID == item {
					out = append(out, r.Session)
					return
				}
			}
		})
	}
	return out
}

func (b *bench) decisions(t testing.TB, tenant, session string) []projections.Decision {
	t.Helper()
	var out []projections.Decision
	b.svc.Pipeline.Projection.View(tenant, session, func(s *projections.Session) { out = s.Decisions() })
	return out
}

func itemByID(items []projections.Item, id string) *projections.Item {
	for i := range items {
		if items[i].ID == id {
			return &items[i]
		}
	}
	return nil
}

// recorded is one request the fake upstream received.
type recorded struct {
	path   string
	header http.Header
	body   []byte
}

// fakeUpstream is a scripted model server. script maps a request body to
// the assistant's turn; it sees every request, in order.
type fakeUpstream struct {
	mu   sync.Mutex
	reqs []recorded
	// usage is reported on every answer (Anthropic names).
	usage map[string]any
	// oaUsage, when set, is the usage responsesFake and chatFake report
	// instead of their defaults (in the names of the API served).
	oaUsage map[string]any
}

func (f *fakeUpstream) record(r *http.Request) []byte {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{path: r.URL.RequestURI(), header: r.Header.Clone(), body: body})
	f.mu.Unlock()
	return body
}

func (f *fakeUpstream) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// turn is one scripted assistant turn: text, or one tool call.
type turn struct {
	text  string
	tool  string
	input map[string]any
	id    string
	// namespace is a Responses function call's namespace (Codex puts MCP
	// tools in one: mcp__SERVER).
	namespace string
}

// anthropicFake serves /v1/messages (SSE like the real API, or JSON) and
// count_tokens, answering each request with script(body).
func anthropicFake(f *fakeUpstream, script func(body map[string]any) turn) http.Handler {
	return anthropicFakeH(f, func(_ http.Header, body map[string]any) turn { return script(body) })
}

// anthropicFakeH is anthropicFake with a script that also sees the
// request's headers.
func anthropicFakeH(f *fakeUpstream, script func(h http.Header, body map[string]any) turn) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := f.record(r)
		if strings.HasSuffix(r.URL.Path, "/count_tokens") {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"input_tokens":42}`)
			return
		}
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":%q}}`, err.Error())
			return
		}
		tn := script(r.Header, req)
		usage := map[string]any{"input_tokens": 120, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1,
			"cache_creation": map[string]any{"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}}
		for k, v := range f.usage {
			usage[k] = v
		}
		f.mu.Lock()
		n := len(f.reqs)
		f.mu.Unlock()
		msgID := fmt.Sprintf("msg_fake_%d", n)
		var block map[string]any
		stop := "end_turn"
		if tn.tool != "" {
			block = map[string]any{"type": "tool_use", "id": tn.id, "name": tn.tool, "input": tn.input}
			stop = "tool_use"
		} else {
			block = map[string]any{"type": "text", "text": tn.text}
		}
		if stream, _ := req["stream"].(bool); !stream {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"id": msgID, "type": "message", "role": "assistant", "model": req["model"],
				"content": []any{block}, "stop_reason": stop, "usage": usage})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		fl := w.(http.Flusher)
		send := func(name string, data any) {
			b, _ := json.Marshal(data)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
			fl.Flush()
		}
		send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": msgID, "type": "message", "role": "assistant",
			"model": req["model"], "content": []any{}, "stop_reason": nil, "usage": usage}})
		send("ping", map[string]any{"type": "ping"})
		if tn.tool != "" {
			in, _ := json.Marshal(tn.input)
			send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
				"content_block": map[string]any{"type": "tool_use", "id": tn.id, "name": tn.tool, "input": map[string]any{}}})
			half := len(in) / 2
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in[:half])}})
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in[half:])}})
		} else {
			send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": tn.text}})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": 17}})
		send("message_stop", map[string]any{"type": "message_stop"})
	})
}

// toolResults returns the tool_result blocks of an Anthropic request body
// in order: tool_use_id -> content (string form).
func toolResults(t testing.TB, body []byte) (ids []string, contents map[string]string) {
	t.Helper()
	var req struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	testutil.NoError(t, json.Unmarshal(body, &req))
	contents = map[string]string{}
	for _, m := range req.Messages {
		var blocks []map[string]any
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b["type"] != "tool_result" {
				continue
			}
			id, _ := b["tool_use_id"].(string)
			ids = append(ids, id)
			switch c := b["content"].(type) {
			case string:
				contents[id] = c
			default:
				j, _ := json.Marshal(c)
				contents[id] = string(j)
			}
		}
	}
	return ids, contents
}

// countToolResults counts tool_result blocks in a decoded request.
func countToolResults(req map[string]any) int {
	n := 0
	msgs, _ := req["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		blocks, _ := mm["content"].([]any)
		for _, b := range blocks {
			if bm, _ := b.(map[string]any); bm["type"] == "tool_result" {
				n++
			}
		}
	}
	return n
}

// responsesFake serves the Responses API as Codex uses it: SSE with event
// names, output_item.done then response.completed with usage.
func responsesFake(f *fakeUpstream, script func(req map[string]any) turn) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := f.record(r)
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			w.WriteHeader(400)
			return
		}
		tn := script(req)
		f.mu.Lock()
		n := len(f.reqs)
		f.mu.Unlock()
		id := fmt.Sprintf("resp_fake_%d", n)
		var item map[string]any
		if tn.tool != "" {
			args, _ := json.Marshal(tn.input)
			item = map[string]any{"type": "function_call", "id": "fc_" + tn.id, "status": "completed", "call_id": tn.id, "name": tn.tool, "arguments": string(args)}
			if tn.namespace != "" {
				item["namespace"] = tn.namespace
			}
		} else {
			item = map[string]any{"type": "message", "id": "msg_" + id, "status": "completed", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": tn.text, "annotations": []any{}}}}
		}
		usage := map[string]any{"input_tokens": 200, "input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens": 9,
			"output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 209}
		if f.oaUsage != nil {
			usage = f.oaUsage
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		seq := 0
		send := func(name string, data map[string]any) {
			data["type"] = name
			data["sequence_number"] = seq
			seq++
			b, _ := json.Marshal(data)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
			fl.Flush()
		}
		resp := map[string]any{"id": id, "object": "response", "status": "in_progress", "model": req["model"], "output": []any{}}
		send("response.created", map[string]any{"response": resp})
		send("response.output_item.added", map[string]any{"output_index": 0, "item": item})
		send("response.output_item.done", map[string]any{"output_index": 0, "item": item})
		done := map[string]any{"id": id, "object": "response", "status": "completed", "model": req["model"], "output": []any{item}, "usage": usage}
		send("response.completed", map[string]any{"response": done})
	})
}

// chatFake serves Chat Completions as OpenCode uses it: SSE data lines,
// tool calls in one chunk, usage in a last chunk, [DONE].
func chatFake(f *fakeUpstream, script func(req map[string]any) turn) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := f.record(r)
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			w.WriteHeader(400)
			return
		}
		tn := script(req)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		send := func(data any) {
			b, _ := json.Marshal(data)
			fmt.Fprintf(w, "data: %s\n\n", b)
			fl.Flush()
		}
		chunk := func(delta map[string]any, finish any) map[string]any {
			return map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": req["model"],
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		}
		send(chunk(map[string]any{"role": "assistant"}, nil))
		if tn.tool != "" {
			args, _ := json.Marshal(tn.input)
			send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": tn.id, "type": "function",
				"function": map[string]any{"name": tn.tool, "arguments": string(args)}}}}, nil))
			send(chunk(map[string]any{}, "tool_calls"))
		} else {
			send(chunk(map[string]any{"content": tn.text}, nil))
			send(chunk(map[string]any{}, "stop"))
		}
		usage := map[string]any{"prompt_tokens": 300, "completion_tokens": 7, "total_tokens": 307, "prompt_tokens_details": map[string]any{"cached_tokens": 128}}
		if f.oaUsage != nil {
			usage = f.oaUsage
		}
		send(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": req["model"], "choices": []any{}, "usage": usage})
		fmt.Fprint(w, "data: [DONE]\n\n")
		fl.Flush()
	})
}

// post sends an Anthropic Messages body to the proxy with the test's key
// and the session header session, and returns the status and the answer.
func (b *bench) post(t testing.TB, session, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", b.url+"/v1/messages", strings.NewReader(body))
	testutil.NoError(t, err)
	req.Header.Set("x-api-key", secretKey)
	req.Header.Set(SessionHeader, session)
	resp, err := http.DefaultClient.Do(req)
	testutil.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	testutil.NoError(t, err)
	return resp.StatusCode, out
}
