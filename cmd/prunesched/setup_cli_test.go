package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The real agent CLIs are installed by .ci/setup-clis.sh (found by
// agentclis.Binary, as for the proxy's end-to-end tests); a test whose CLI
// is absent skips, saying how to install it.

// lines is an io.Writer that hands each complete line to a channel, so a
// test waits for a command's "listening on" line instead of sleeping.
type lines struct {
	mu  sync.Mutex
	buf []byte
	ch  chan string
}

func newLines() *lines { return &lines{ch: make(chan string, 64)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			return len(p), nil
		}
		select {
		case l.ch <- string(l.buf[:i]):
		default:
		}
		l.buf = l.buf[i+1:]
	}
}

// next waits for the next line starting with prefix.
func (l *lines) next(t *testing.T, prefix string, exited <-chan int) string {
	t.Helper()
	for {
		select {
		case s := <-l.ch:
			if strings.HasPrefix(s, prefix) {
				return s
			}
		case code := <-exited:
			t.Fatalf("command exited (%d) before printing %q", code, prefix)
		}
	}
}

// syncBuf is a bytes buffer safe for concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startCommand runs a long-running prunesched command (serve, proxy) in
// process until the test ends, and returns its first stdout line starting
// with prefix.
func startCommand(t *testing.T, environ map[string]string, prefix string, args ...string) (line string, stderr *syncBuf) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errb := newLines(), &syncBuf{}
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, &env{stdout: out, stderr: errb, getenv: func(k string) string { return environ[k] }}, args)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-exited; code != 0 {
			t.Errorf("%s exited %d: %s", args[0], code, errb.String())
		}
	})
	return out.next(t, prefix, exited), errb
}

// fakeModel is an upstream model server that answers every request with
// the text "done" (Anthropic Messages or OpenAI Responses, streamed or
// not) and records the requests.
type fakeModel struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (f *fakeModel) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.reqs...)
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, r.Clone(context.Background()))
	n := len(f.reqs)
	f.mu.Unlock()
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	send := func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		w.(http.Flusher).Flush()
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/messages/count_tokens"):
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"input_tokens":42}`)
	case strings.HasSuffix(r.URL.Path, "/messages"):
		id := fmt.Sprintf("msg_fake_%d", n)
		usage := map[string]any{"input_tokens": 120, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "type": "message", "role": "assistant", "model": req.Model,
				"content": []any{map[string]any{"type": "text", "text": "done"}}, "stop_reason": "end_turn", "usage": usage})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message", "role": "assistant",
			"model": req.Model, "content": []any{}, "stop_reason": nil, "usage": usage}})
		send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "done"}})
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": 1}})
		send("message_stop", map[string]any{"type": "message_stop"})
	case strings.HasSuffix(r.URL.Path, "/responses"):
		id := fmt.Sprintf("resp_fake_%d", n)
		item := map[string]any{"type": "message", "id": "msg_" + id, "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": "done", "annotations": []any{}}}}
		usage := map[string]any{"input_tokens": 200, "input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens": 1,
			"output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 201}
		w.Header().Set("Content-Type", "text/event-stream")
		send("response.created", map[string]any{"type": "response.created", "sequence_number": 0,
			"response": map[string]any{"id": id, "object": "response", "status": "in_progress", "model": req.Model, "output": []any{}}})
		send("response.output_item.done", map[string]any{"type": "response.output_item.done", "sequence_number": 1, "output_index": 0, "item": item})
		send("response.completed", map[string]any{"type": "response.completed", "sequence_number": 2,
			"response": map[string]any{"id": id, "object": "response", "status": "completed", "model": req.Model, "output": []any{item}, "usage": usage}})
	default:
		http.NotFound(w, r)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
