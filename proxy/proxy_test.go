package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

const (
	secretKey  = "sk-ant-SECRET-key-0123456789"
	secretAuth = "Bearer sk-SECRET-bearer-9876543210"
)

// readScript reads a.txt twice, then b.txt twice, then answers "done".
func readScript(dir string) func(map[string]any) turn {
	return func(req map[string]any) turn {
		if _, ok := req["tools"]; !ok {
			return turn{text: "a title"}
		}
		switch n := countToolResults(req); n {
		case 0, 1:
			return turn{tool: "Read", id: fmt.Sprintf("toolu_a%d", n+1), input: map[string]any{"file_path": dir + "/a.txt"}}
		case 2, 3:
			return turn{tool: "Read", id: fmt.Sprintf("toolu_b%d", n-1), input: map[string]any{"file_path": dir + "/b.txt"}}
		}
		return turn{text: "done"}
	}
}

// simClient plays a Claude Code-like client: system blocks with a
// breakpoint, thinking blocks with signatures, the last block of the last
// message carrying cache_control, context_management, full history each
// turn.
type simClient struct {
	t        *testing.T
	url      string
	files    map[string]string
	messages []map[string]any
	session  string
	stream   bool
}

func (c *simClient) send() (map[string]any, *http.Response) {
	c.t.Helper()
	// Move the message breakpoint to the last block, as Claude Code does.
	msgs := make([]map[string]any, len(c.messages))
	for i, m := range c.messages {
		cp := map[string]any{"role": m["role"]}
		blocks := m["content"].([]map[string]any)
		nb := make([]map[string]any, len(blocks))
		for j, b := range blocks {
			bb := map[string]any{}
			for k, v := range b {
				bb[k] = v
			}
			if i == len(c.messages)-1 && j == len(blocks)-1 {
				bb["cache_control"] = map[string]any{"type": "ephemeral"}
			}
			nb[j] = bb
		}
		cp["content"] = nb
		msgs[i] = cp
	}
	req := map[string]any{
		"model":    "claude-test-1",
		"messages": msgs,
		"system": []any{
			map[string]any{"type": "text", "text": "You are a test agent."},
			map[string]any{"type": "text", "text": "Be brief.", "cache_control": map[string]any{"type": "ephemeral"}},
		},
		"tools":              []any{map[string]any{"name": "Read", "description": "read a file", "input_schema": map[string]any{"type": "object"}}},
		"metadata":           map[string]any{"user_id": "u1"},
		"max_tokens":         1024,
		"thinking":           map[string]any{"type": "enabled", "budget_tokens": 1024},
		"context_management": map[string]any{"edits": []any{map[string]any{"type": "clear_thinking_20251015", "keep": "all"}}},
		"stream":             c.stream,
	}
	body, err := json.Marshal(req)
	testutil.NoError(c.t, err)
	hr, err := http.NewRequest("POST", c.url+"/v1/messages?beta=true", bytes.NewReader(body))
	testutil.NoError(c.t, err)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("x-api-key", secretKey)
	hr.Header.Set("Authorization", secretAuth)
	hr.Header.Set("anthropic-version", "2023-06-01")
	if c.session != "" {
		hr.Header.Set("X-Claude-Code-Session-Id", c.session)
	}
	resp, err := http.DefaultClient.Do(hr)
	testutil.NoError(c.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	testutil.NoError(c.t, err)
	if resp.StatusCode != 200 {
		return map[string]any{"status": resp.StatusCode, "raw": string(raw)}, resp
	}
	var out map[string]any
	testutil.NoError(c.t, json.Unmarshal(raw, &out))
	return out, resp
}

// run drives the conversation to its end and returns the number of model
// requests.
func (c *simClient) run(prompt string) int {
	c.t.Helper()
	c.messages = []map[string]any{{"role": "user", "content": []map[string]any{{"type": "text", "text": prompt}}}}
	for n := 1; n <= 10; n++ {
		out, _ := c.send()
		content, _ := out["content"].([]any)
		testutil.True(c.t, len(content) == 1, "request %d: unexpected answer %v", n, out)
		blk := content[0].(map[string]any)
		if blk["type"] == "text" {
			return n
		}
		id := blk["id"].(string)
		path := blk["input"].(map[string]any)["file_path"].(string)
		c.messages = append(c.messages, map[string]any{"role": "assistant", "content": []map[string]any{
			{"type": "thinking", "thinking": "", "signature": "sig/" + id + "+=="},
			{"type": "tool_use", "id": id, "name": "Read", "input": blk["input"]},
		}})
		c.messages = append(c.messages, map[string]any{"role": "user", "content": []map[string]any{
			{"type": "tool_result", "tool_use_id": id, "content": c.files[path]},
		}})
		if id == "toolu_b1" {
			c.files[path] = "b version 2\n"
		}
	}
	c.t.Fatal("conversation did not end")
	return 0
}

func TestAnthropicDuplicateReadPruned(t *testing.T) {
	t.Parallel()
	f := &fakeUpstream{}
	b := setup(t, testPolicy(t), anthropicFake(f, readScript("/p")), nil)
	c := &simClient{t: t, url: b.url, session: "sim-session-1", files: map[string]string{
		"/p/a.txt": strings.Repeat("alpha line\n", 40), "/p/b.txt": "b version 1\n",
	}}
	n := c.run("read a.txt twice, then b.txt twice")
	testutil.True(t, n == 5, "want 5 requests, got %d", n)
	reqs := f.requests()
	testutil.True(t, len(reqs) == 5, "upstream saw %d requests", len(reqs))

	// Request 3 (after the second read of a.txt) carries the first copy
	// whole (already cached) and the placeholder instead of the second.
	_, got := toolResults(t, reqs[2].body)
	testutil.True(t, strings.HasPrefix(got["toolu_a2"], "[prunesched: output of Read"), "toolu_a2 not pruned in request 3: %q", got["toolu_a2"])
	testutil.True(t, strings.Contains(got["toolu_a2"], "L0 DUPLICATE_OUTPUT"), "placeholder lacks rung/reason: %q", got["toolu_a2"])
	testutil.True(t, got["toolu_a1"] == c.files["/p/a.txt"], "toolu_a1 changed: %q", got["toolu_a1"])
	// Request 5: the changed file's reads are both kept.
	_, got = toolResults(t, reqs[4].body)
	testutil.True(t, got["toolu_b1"] == "b version 1\n" && got["toolu_b2"] == "b version 2\n", "b reads changed: %q / %q", got["toolu_b1"], got["toolu_b2"])
	testutil.True(t, strings.HasPrefix(got["toolu_a2"], "[prunesched:"), "toolu_a2 restored in request 5")

	// Protocol: every tool_use keeps its tool_result, signatures and the
	// client's own fields are byte-identical, at most 4 breakpoints.
	for i, r := range reqs {
		checkProtocol(t, i, r.body)
		testutil.True(t, r.header.Get("x-api-key") == secretKey, "request %d: x-api-key not forwarded", i)
	}
	testutil.True(t, bytes.Count(reqs[2].body, []byte(`"cache_control"`)) == 3, "request 3: want the client's 2 breakpoints + 1 before the prune:\n%s", reqs[2].body)
	testutil.True(t, bytes.Count(reqs[3].body, []byte(`"cache_control"`)) == 2, "request 4: breakpoints %d", bytes.Count(reqs[3].body, []byte(`"cache_control"`)))

	// The log: the facts, the model requests with usage, and the decision.
	// The session is the client's header plus the tag of its credential.
	session := b.session("sim-session-1", reqs[0].header)
	testutil.True(t, strings.HasPrefix(session, "sim-session-1-k"), "session %q", session)
	items := b.items(t, events.DefaultTenant, session)
	a2 := itemByID(items, "toolu_a2")
	testutil.True(t, a2 != nil && a2.Pruned && a2.Applied != nil && a2.Applied.Rung == events.L0, "toolu_a2 item: %+v", a2)
	for _, id := range []string{"toolu_a1", "toolu_b1", "toolu_b2"} {
		it := itemByID(items, id)
		testutil.True(t, it != nil && !it.Pruned, "%s: %+v", id, it)
	}
	evs, err := b.svc.Store.ReadSession(context.Background(), events.DefaultTenant, session)
	testutil.NoError(t, err)
	var mrs int
	for _, e := range evs {
		if mr, ok := e.Data.(*events.ModelRequest); ok {
			mrs++
			testutil.True(t, mr.Usage != nil && mr.Usage.InputTokens == 120 && mr.Usage.OutputTokens == 1, "usage %+v", mr.Usage)
			testutil.True(t, mr.CacheTTL == "5m" && mr.Provider == "anthropic", "model request %+v", mr)
		}
	}
	testutil.True(t, mrs == 5, "want 5 model requests in the log, got %d", mrs)

	// Secrets never reach the log or the event stream.
	all, err := json.Marshal(evs)
	testutil.NoError(t, err)
	for _, s := range []string{secretKey, "sk-SECRET-bearer"} {
		testutil.True(t, !bytes.Contains(all, []byte(s)), "secret %q in the event stream", s)
		testutil.True(t, !strings.Contains(b.logs.String(), s), "secret %q in the logs", s)
	}
}

// checkProtocol checks an Anthropic request the upstream received.
func checkProtocol(t *testing.T, i int, body []byte) {
	t.Helper()
	var req struct {
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
		ContextManagement json.RawMessage `json:"context_management"`
		Thinking          json.RawMessage `json:"thinking"`
		Metadata          json.RawMessage `json:"metadata"`
		Tools             json.RawMessage `json:"tools"`
	}
	testutil.NoError(t, json.Unmarshal(body, &req))
	testutil.True(t, len(req.ContextManagement) > 0 && len(req.Thinking) > 0 && len(req.Metadata) > 0 && len(req.Tools) > 0, "request %d lost a client field", i)
	uses, results := map[string]bool{}, map[string]bool{}
	for _, m := range req.Messages {
		for _, b := range m.Content {
			switch b["type"] {
			case "tool_use":
				uses[b["id"].(string)] = true
			case "tool_result":
				results[b["tool_use_id"].(string)] = true
			case "thinking":
				id := strings.TrimSuffix(strings.TrimPrefix(b["signature"].(string), "sig/"), "+==")
				testutil.True(t, uses[id] || strings.HasPrefix(id, "toolu_"), "request %d: signature changed: %v", i, b["signature"])
			}
		}
	}
	for id := range uses {
		testutil.True(t, results[id], "request %d: tool_use %s lost its tool_result", i, id)
	}
	testutil.True(t, bytes.Count(body, []byte(`"cache_control"`)) <= 4, "request %d: more than 4 breakpoints", i)
}

// TestStreamPassthroughUnchanged: the SSE bytes the client receives are
// the upstream's, and usage with cache tiers lands in the log.
func TestStreamPassthroughUnchanged(t *testing.T) {
	t.Parallel()
	f := &fakeUpstream{usage: map[string]any{"cache_creation_input_tokens": 300, "cache_read_input_tokens": 50,
		"cache_creation": map[string]any{"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200}}}
	b := setup(t, testPolicy(t), anthropicFake(f, readScript("/p")), nil)
	body := []byte(`{"model":"m","stream":true,"max_tokens":10,"tools":[{"name":"Read","input_schema":{"type":"object"}}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}`)
	get := func(url string) ([]byte, http.Header) {
		req, _ := http.NewRequest("POST", url+"/v1/messages", bytes.NewReader(body))
		req.Header.Set("X-Claude-Code-Session-Id", "stream-1")
		resp, err := http.DefaultClient.Do(req)
		testutil.NoError(t, err)
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return out, resp.Header
	}
	direct, _ := get(b.upstream.URL)
	via, h := get(b.url)
	norm := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("msg_fake_2"), []byte("msg_fake_1")) }
	testutil.True(t, bytes.Equal(norm(direct), norm(via)), "stream changed:\n%s\n---\n%s", direct, via)
	testutil.True(t, isSSE(h), "content type %q", h.Get("Content-Type"))
	b.items(t, events.DefaultTenant, "stream-1")
	evs, err := b.svc.Store.ReadSession(context.Background(), events.DefaultTenant, "stream-1")
	testutil.NoError(t, err)
	var mr *events.ModelRequest
	var call *events.ToolCall
	for _, e := range evs {
		switch d := e.Data.(type) {
		case *events.ModelRequest:
			mr = d
		case *events.ToolCall:
			call = d
		}
	}
	testutil.True(t, mr != nil && mr.Usage != nil, "no model request")
	want := events.Usage{InputTokens: 120, CacheReadTokens: 50, CacheWriteTokens: 300, CacheWrite1hTokens: 200, OutputTokens: 17}
	testutil.True(t, *mr.Usage == want && mr.CacheTTL == "1h", "usage %+v ttl %q", *mr.Usage, mr.CacheTTL)
	testutil.True(t, call != nil && call.CallID == "toolu_a1" && string(call.Input) == `{"file_path":"/p/a.txt"}`, "streamed tool call %+v", call)
}

// TestUpstreamErrorVerbatim: upstream errors reach the client unchanged.
func TestUpstreamErrorVerbatim(t *testing.T) {
	t.Parallel()
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "7")
		w.Header().Set("request-id", "req_123")
		w.WriteHeader(529)
		fmt.Fprint(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	})
	b := setup(t, testPolicy(t), up, nil)
	body := `{"model":"m","max_tokens":10,"tools":[{"name":"Read"}],"messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(b.url+"/v1/messages", "application/json", strings.NewReader(body))
	testutil.NoError(t, err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	testutil.True(t, resp.StatusCode == 529 && resp.Header.Get("Retry-After") == "7" && resp.Header.Get("request-id") == "req_123", "status %d headers %v", resp.StatusCode, resp.Header)
	testutil.True(t, string(out) == `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "body %s", out)
}

// failingBackend fails at one stage. With block set, DecideLive blocks
// until its context ends (the budget runs out), so the timeout stage is
// reached on any machine, however slow, without timing anything.
type failingBackend struct {
	Backend
	stage string
	block bool
}

func (f *failingBackend) Append(ctx context.Context, evs []events.Event) ([]events.Event, error) {
	if f.stage == StageAppend {
		return nil, fmt.Errorf("injected append failure")
	}
	return f.Backend.Append(ctx, evs)
}

func (f *failingBackend) DecideLive(ctx context.Context, tenant, session string, lastFact uint64, at time.Time, req string) (*events.Event, error) {
	if f.stage == StageDecide {
		return nil, fmt.Errorf("injected decide failure")
	}
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return f.Backend.DecideLive(ctx, tenant, session, lastFact, at, req)
}

// okUpstream records each request in f and answers a short JSON message.
func okUpstream(f *fakeUpstream) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":1,"output_tokens":1}}`)
	})
}

// TestFailOpen: whatever stage fails, the upstream gets the client's bytes
// unchanged, the client gets the upstream's answer, and the metric counts
// the stage.
func TestFailOpen(t *testing.T) {
	t.Parallel()
	cases := []struct {
		stage string
		body  string
		enc   string
		fb    *failingBackend
	}{
		{stage: StageParse, body: `{"model":"m","tools":[{"name":"x"}],"messages":{"not":"an array"}}`},
		{stage: StageDecode, body: "\x28\xb5\x2f\xfd not really zstd", enc: "zstd"},
		{stage: StageAppend, fb: &failingBackend{stage: StageAppend}},
		{stage: StageDecide, fb: &failingBackend{stage: StageDecide}},
		{stage: StageTimeout, fb: &failingBackend{block: true}},
	}
	for _, tc := range cases {
		t.Run(tc.stage, func(t *testing.T) {
			t.Parallel()
			f := &fakeUpstream{}
			b := setup(t, testPolicy(t), okUpstream(f), func(c *Config) {
				// A budget no machine runs out of, so each stage fails
				// as injected; the timeout case blocks in DecideLive
				// until a short budget ends.
				c.Budget = time.Hour
				if tc.stage == StageTimeout {
					c.Budget = 20 * time.Millisecond
				}
				if tc.fb != nil {
					tc.fb.Backend = c.Backend
					c.Backend = tc.fb
				}
			})
			body := tc.body
			if body == "" {
				body = `{"model":"m","max_tokens":10,"tools":[{"name":"Read"}],"messages":[{"role":"user","content":"hello"}]}`
			}
			req, _ := http.NewRequest("POST", b.url+"/v1/messages", strings.NewReader(body))
			req.Header.Set("x-api-key", secretKey)
			if tc.enc != "" {
				req.Header.Set("Content-Encoding", tc.enc)
			}
			resp, err := http.DefaultClient.Do(req)
			testutil.NoError(t, err)
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			testutil.True(t, resp.StatusCode == 200 && bytes.Contains(out, []byte(`"ok"`)), "client got %d %s", resp.StatusCode, out)
			reqs := f.requests()
			testutil.True(t, len(reqs) == 1 && string(reqs[0].body) == body, "upstream got %d requests: %q", len(reqs), reqs)
			if tc.enc != "" {
				testutil.True(t, reqs[0].header.Get("Content-Encoding") == tc.enc, "content-encoding dropped")
			}
			mf, err := b.svc.Registry.Gather()
			testutil.NoError(t, err)
			found := false
			for _, fam := range mf {
				if fam.GetName() != "prunesched_proxy_fail_open_total" {
					continue
				}
				for _, m := range fam.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "stage" && l.GetValue() == tc.stage && m.GetCounter().GetValue() == 1 {
							found = true
						}
					}
				}
			}
			testutil.True(t, found, "fail-open metric for stage %s not counted", tc.stage)
			testutil.True(t, strings.Contains(b.logs.String(), "stage="+tc.stage), "fail-open not logged")
			testutil.True(t, !strings.Contains(b.logs.String(), secretKey), "secret logged")
		})
	}
}

// TestSessionIdentity: header, derived id and lanes.
func TestSessionIdentity(t *testing.T) {
	t.Parallel()
	p := &Proxy{cfg: Config{Tenant: "default", IdentityKey: bytes.Repeat([]byte{7}, 32)}, log: slog.New(slog.DiscardHandler)}
	mk := func(body string) *conversation {
		c, err := parseWith(APIAnthropic, []byte(body), nil)
		testutil.NoError(t, err)
		return c
	}
	c := mk(`{"system":"sys","tools":[{}],"messages":[{"role":"user","content":"first"}]}`)
	h := http.Header{}
	h.Set("X-Claude-Code-Session-Id", "7ef78460-70fe-4c7e-8941-73dc3d823a80")
	ten, s, _ := p.identity(h, c)
	testutil.True(t, ten == "default" && s == "7ef78460-70fe-4c7e-8941-73dc3d823a80", "got %s %s", ten, s)
	h = http.Header{}
	h.Set("Session-Id", "a.b c")
	h.Set(TenantHeader, "team-1")
	ten, s, _ = p.identity(h, c)
	testutil.True(t, ten == "team-1" && s == "a_b_c", "got %s %s", ten, s)
	// A credential adds its keyed tag, always the same for one key.
	h = http.Header{}
	h.Set("X-Claude-Code-Session-Id", "7ef78460-70fe-4c7e-8941-73dc3d823a80")
	h.Set("x-api-key", secretKey)
	_, s, _ = p.identity(h, c)
	_, s2, _ := p.identity(h, c)
	testutil.True(t, s == s2 && strings.HasPrefix(s, "7ef78460-70fe-4c7e-8941-73dc3d823a80-k") && len(s) == 36+2+12 && events.ValidToken(s), "got %s", s)
	_, dk, _ := p.identity(http.Header{"X-Api-Key": {secretKey}}, c)
	_, d1, _ := p.identity(http.Header{}, c)
	testutil.True(t, dk == d1+p.credentialTag(h), "derived with a credential %s, without %s", dk, d1)
	_, d2, _ := p.identity(http.Header{}, mk(`{"system":"sys","tools":[{}],"messages":[{"role":"user","content":"first"},{"role":"assistant","content":"x"}]}`))
	_, d3, _ := p.identity(http.Header{}, mk(`{"system":"sys","tools":[{}],"messages":[{"role":"user","content":"other"}]}`))
	testutil.True(t, strings.HasPrefix(d1, "derived-") && d1 == d2 && d1 != d3, "derived ids %s %s %s", d1, d2, d3)
	// A fleet's early read keeps what the headers said (startEarlyRead):
	// the identity taken from it is the request's.
	for _, hh := range []http.Header{h, {"X-Api-Key": {secretKey}}, {}} {
		e := &earlyRead{}
		e.tenant, e.session, e.source, e.named = p.headerIdentity(hh, false)
		et, es, esrc := e.identity(p, hh, c)
		it, is, isrc := p.identity(hh, c)
		testutil.True(t, et == it && es == is && esrc == isrc, "from the early read %s %s %s, computed %s %s %s", et, es, esrc, it, is, isrc)
	}
}

// TestSubagentLane: a second conversation under the same client session
// header goes to its own session.
func TestSubagentLane(t *testing.T) {
	t.Parallel()
	f := &fakeUpstream{}
	b := setup(t, testPolicy(t), anthropicFake(f, func(map[string]any) turn { return turn{text: "ok"} }), nil)
	send := func(first string) {
		body := fmt.Sprintf(`{"model":"m","max_tokens":10,"tools":[{"name":"Read"}],"messages":[{"role":"user","content":%q}]}`, first)
		req, _ := http.NewRequest("POST", b.url+"/v1/messages", strings.NewReader(body))
		req.Header.Set("X-Claude-Code-Session-Id", "lane-test")
		resp, err := http.DefaultClient.Do(req)
		testutil.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	send("main task")
	send("subagent task")
	send("main task")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	testutil.NoError(t, b.px.Flush(ctx))
	testutil.NoError(t, b.svc.Pipeline.WaitIdle(ctx))
	var names []string
	for _, r := range b.svc.Pipeline.Projection.Sessions() {
		names = append(names, r.Session)
	}
	testutil.True(t, len(names) == 2 && names[0] == "lane-test" && strings.HasPrefix(names[1], "lane-test-"), "sessions %v", names)
}
