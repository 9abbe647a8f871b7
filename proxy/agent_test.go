package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/agenttools"
	assert "github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// agentClock is the proxy's injected clock: requests arrive a second
// apart unless the test jumps it.
type agentClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *agentClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func (c *agentClock) jump(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// agentClient plays Claude Code with prunesched's MCP server: its context
// tools are named mcp__prunesched__*, and their results carry the MCP
// server's stub, which the proxy must replace.
type agentClient struct {
	t        *testing.T
	url      string
	key      string
	session  string
	files    map[string]string
	messages []map[string]any
}

func (c *agentClient) send() map[string]any {
	c.t.Helper()
	req := map[string]any{
		"model": "claude-test-1", "max_tokens": 1024, "stream": false,
		"system":   []any{map[string]any{"type": "text", "text": "You are a test agent.", "cache_control": map[string]any{"type": "ephemeral"}}},
		"tools":    []any{map[string]any{"name": "Read", "input_schema": map[string]any{"type": "object"}}, map[string]any{"name": "mcp__prunesched__context_list", "input_schema": map[string]any{"type": "object"}}},
		"messages": c.messages,
		"metadata": map[string]any{"user_id": "u1"}, "thinking": map[string]any{"type": "enabled", "budget_tokens": 1024},
		"context_management": map[string]any{"edits": []any{}},
	}
	body, err := json.Marshal(req)
	assert.NoError(c.t, err)
	hr, err := http.NewRequest("POST", c.url+"/v1/messages", bytes.NewReader(body))
	assert.NoError(c.t, err)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("x-api-key", c.key)
	hr.Header.Set("X-Claude-Code-Session-Id", c.session)
	resp, err := http.DefaultClient.Do(hr)
	assert.NoError(c.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	assert.NoError(c.t, err)
	assert.True(c.t, resp.StatusCode == 200, "status %d: %s", resp.StatusCode, raw)
	var out map[string]any
	assert.NoError(c.t, json.Unmarshal(raw, &out))
	return out
}

// step sends the conversation and plays the answer's tool call, with the
// file's content or the MCP stub as its result. It returns false at the
// final text.
func (c *agentClient) step() bool {
	c.t.Helper()
	out := c.send()
	blk := out["content"].([]any)[0].(map[string]any)
	if blk["type"] == "text" {
		return false
	}
	id, name := blk["id"].(string), blk["name"].(string)
	c.messages = append(c.messages, map[string]any{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": id, "name": name, "input": blk["input"]}}})
	result := ""
	if k, ok := agenttools.Match(name); ok {
		result = agenttools.Stub(k)
	} else {
		result = c.files[blk["input"].(map[string]any)["file_path"].(string)]
	}
	c.messages = append(c.messages, map[string]any{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": id, "content": result}}})
	return true
}

var handleIn = regexp.MustCompile(`(#\d+)  output of (\S+) (\S+)`)

// agentScript reads a.txt twice (the second copy is pruned as it arrives),
// reads a large test log and CLAUDE.md, lists the context, asks to prune
// the log, CLAUDE.md, a garbled and an unknown handle, waits two turns,
// then recovers the second a.txt by the handle in its placeholder.
func agentScript(t *testing.T) func(body map[string]any) turn {
	var mu sync.Mutex
	var handles map[string]string
	return func(body map[string]any) turn {
		mu.Lock()
		defer mu.Unlock()
		raw, _ := json.Marshal(body)
		ids, got := toolResults(t, raw)
		n := len(ids)
		switch n {
		case 0:
			return turn{tool: "Read", id: "toolu_a1", input: map[string]any{"file_path": "/p/a.txt"}}
		case 1:
			return turn{tool: "Read", id: "toolu_a2", input: map[string]any{"file_path": "/p/a.txt"}}
		case 2:
			return turn{tool: "Read", id: "toolu_log", input: map[string]any{"file_path": "/p/test.log"}}
		case 3:
			return turn{tool: "Read", id: "toolu_rules", input: map[string]any{"file_path": "/p/CLAUDE.md"}}
		case 4:
			return turn{tool: "mcp__prunesched__context_list", id: "toolu_list", input: map[string]any{}}
		case 5:
			handles = map[string]string{}
			for _, m := range handleIn.FindAllStringSubmatch(got["toolu_list"], -1) {
				handles[m[3]] = m[1]
			}
			return turn{tool: "mcp__prunesched__context_prune", id: "toolu_prune", input: map[string]any{
				"handles": []any{handles["/p/test.log"], handles["/p/CLAUDE.md"], `#12">`, "#999"}, "reason": "the test passed; done with its log"}}
		case 6, 7:
			return turn{tool: "Read", id: fmt.Sprintf("toolu_x%d", n), input: map[string]any{"file_path": fmt.Sprintf("/p/x%d.txt", n)}}
		case 8:
			h := regexp.MustCompile(`context_recover (#\d+)`).FindStringSubmatch(got["toolu_a2"])
			if h == nil {
				return turn{text: "no placeholder on toolu_a2: " + got["toolu_a2"]}
			}
			return turn{tool: "mcp__prunesched__context_recover", id: "toolu_rec", input: map[string]any{"handle": h[1]}}
		}
		return turn{text: "done"}
	}
}

// TestAgentContextTools drives the three context tools through the proxy
// against a scripted model and checks what the upstream saw at every
// request: the stubs replaced by answers (byte-identical at every later
// send), the accepted removal queued to the cache-safe point and never
// applied before it, the refusal naming its protection, and the recovered
// bytes equal to the original.
func TestAgentContextTools(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse([]byte("name: agent-test\neligibility:\n  protect_recent_turns: 0\n"))
	assert.NoError(t, err)
	clock := &agentClock{t: time.Now()} // the budget counts from the request time on the real clock
	// The provider reports a warm cache: removing what it holds breaks it.
	f := &fakeUpstream{usage: map[string]any{"input_tokens": 50, "cache_creation_input_tokens": 400, "cache_read_input_tokens": 3000,
		"cache_creation": map[string]any{"ephemeral_5m_input_tokens": 400, "ephemeral_1h_input_tokens": 0}}}
	b := setup(t, pol, anthropicFake(f, agentScript(t)), func(c *Config) { c.Now = clock.now; c.Policy = &pol })
	a := strings.Repeat("alpha line\n", 60)
	// Small enough that its saving does not pay for breaking the warm
	// cache (break_even), so it waits for the cache to expire.
	log := strings.Repeat("=== RUN TestX\n--- PASS: TestX (0.00s)\n", 25)
	c := &agentClient{t: t, url: b.url, key: secretKey, session: "agent-1", files: map[string]string{
		"/p/a.txt": a, "/p/test.log": log, "/p/CLAUDE.md": strings.Repeat("Always run the tests.\n", 30),
		"/p/x6.txt": "six", "/p/x7.txt": "seven",
	}}
	c.messages = []map[string]any{{"role": "user", "content": []map[string]any{{"type": "text", "text": "run the tests, tidy up, then look at a.txt again"}}}}
	steps := 0
	for c.step() {
		steps++
		if steps == 7 {
			// The cache-safe point: the prompt cache expires before the
			// 8th request.
			clock.jump(6 * time.Minute)
		}
		assert.True(t, steps < 20, "conversation did not end")
	}
	reqs := f.requests()
	if len(reqs) != 10 {
		_, last := toolResults(t, reqs[len(reqs)-1].body)
		t.Fatalf("upstream saw %d requests; last tool results: %.300q\nlogs:\n%s", len(reqs), last, b.logs.String())
	}
	results := make([]map[string]string, len(reqs))
	for i, r := range reqs {
		_, results[i] = toolResults(t, r.body)
		checkProtocol(t, i, r.body)
	}

	// context_list: the stub never reaches the model; the answer names the
	// handles, and every later request sends the same bytes.
	list := results[5]["toolu_list"]
	assert.True(t, strings.HasPrefix(list, "prunesched: the ") && strings.Contains(list, "output of Read /p/test.log"), "list answer:\n%s", list)
	assert.True(t, strings.Contains(list, "protected (PROJECT_RULE)") || strings.Contains(list, "/p/CLAUDE.md"), "list answer lacks CLAUDE.md:\n%s", list)
	for i := 6; i < len(reqs); i++ {
		assert.True(t, results[i]["toolu_list"] == list, "request %d: list answer changed:\n%s", i+1, results[i]["toolu_list"])
	}

	// context_prune: one line per handle.
	pr := results[6]["toolu_prune"]
	assert.True(t, strings.HasPrefix(pr, "prunesched: 1 of 4 accepted."), "prune answer:\n%s", pr)
	assert.True(t, regexp.MustCompile(`#\d+ accepted \(AGENT_REQUEST\): queued until a cache-safe point`).MatchString(pr), "prune answer lacks the accepted line:\n%s", pr)
	assert.True(t, regexp.MustCompile(`#\d+ refused: protected \(PROJECT_RULE: project-rule file matching CLAUDE.md\)`).MatchString(pr), "prune answer lacks the refusal:\n%s", pr)
	assert.True(t, strings.Contains(pr, `"#12\">" is not a handle`) && strings.Contains(pr, "#999 not found: no item #999 in this session"), "prune answer lacks the invalid handles:\n%s", pr)
	for i := 7; i < len(reqs); i++ {
		assert.True(t, results[i]["toolu_prune"] == pr, "request %d: prune answer changed", i+1)
	}

	// The accepted removal waits for the cache-safe point: whole through
	// request 7 (warm cache), a placeholder from request 8 (cache expired).
	for i := 3; i < 7; i++ {
		if results[i]["toolu_log"] != log {
			evs, _ := b.svc.Store.ReadSession(context.Background(), events.DefaultTenant, b.session("agent-1", reqs[0].header))
			var apps []string
			for _, e := range evs {
				if a, ok := e.Data.(*events.Application); ok {
					apps = append(apps, fmt.Sprintf("%s %v radius=%d cost=%.5f save=%.5f", a.Trigger, a.Items, a.MutationRadius, a.CacheCost, a.ExpectedSaving))
				}
			}
			t.Fatalf("request %d: the log was removed before the cache-safe point: %.120q\napplications: %q", i+1, results[i]["toolu_log"], apps)
		}
	}
	for i := 7; i < len(reqs); i++ {
		assert.True(t, strings.HasPrefix(results[i]["toolu_log"], "[prunesched: output of Read /p/test.log removed: AGENT_REQUEST,"), "request %d: log not removed: %.200q", i+1, results[i]["toolu_log"])
		assert.True(t, results[i]["toolu_rules"] == c.files["/p/CLAUDE.md"], "request %d: CLAUDE.md changed", i+1)
	}

	// context_recover: the second a.txt, pruned by a rule as it arrived,
	// comes back byte for byte; its placeholder stays.
	assert.True(t, strings.HasPrefix(results[2]["toolu_a2"], "[prunesched: output of Read /p/a.txt removed: L0 DUPLICATE_OUTPUT"), "toolu_a2 at its first send: %.200q", results[2]["toolu_a2"])
	assert.True(t, results[9]["toolu_rec"] == a, "recovered %d bytes, want the original %d: %.200q", len(results[9]["toolu_rec"]), len(a), results[9]["toolu_rec"])
	assert.True(t, strings.HasPrefix(results[9]["toolu_a2"], "[prunesched:"), "the placeholder left its place")

	// The log and the certificates.
	session := b.session("agent-1", reqs[0].header)
	items := b.items(t, events.DefaultTenant, session)
	logIt := itemByID(items, "toolu_log")
	assert.True(t, logIt != nil && logIt.Pruned && logIt.Applied.Reason == events.ReasonAgentRequest && logIt.Applied.Trigger == events.TriggerCacheExpired, "log item %+v", logIt)
	var found bool
	b.svc.Pipeline.Projection.View(events.DefaultTenant, session, func(s *projections.Session) {
		for _, ci := range s.ContextItems() {
			if ci.ID == "toolu_log" && ci.Applied != nil {
				found = events.Control(ci.Applied) == events.ControlAgent
			}
		}
	})
	assert.True(t, found, "the log's certificate does not say the agent decided")
	evs, err := b.svc.Store.ReadSession(context.Background(), events.DefaultTenant, session)
	assert.NoError(t, err)
	var asks int
	for _, e := range evs {
		if pr, ok := e.Data.(*events.PruneRequest); ok {
			asks++
			assert.True(t, pr.By == events.ByAgent && pr.Reason == "the test passed; done with its log", "prune request %+v", pr)
		}
		if tr, ok := e.Data.(*events.ToolResult); ok && tr.Item == "toolu_list" {
			assert.True(t, tr.Tool == "mcp__prunesched__context_list", "the list's result names tool %q", tr.Tool)
		}
	}
	assert.True(t, asks == 2, "want 2 agent prune requests in the log (the valid handles), got %d", asks)
	// The economics count the recovery.
	led := scheduler.SimulateAll(pol, evs, scheduler.StrategyScheduled)[scheduler.StrategyScheduled]
	assert.True(t, led.Total.Recoveries == 1 && led.Total.RecoveryTokens > 0, "economics (the test model is unpriced: tokens only): %d recoveries, %d tokens, $%v", led.Total.Recoveries, led.Total.RecoveryTokens, led.Total.RecoveryCost)

	// Metrics.
	assert.True(t, testutil.ToFloat64(b.px.met.agent.WithLabelValues("accepted", "AGENT_REQUEST")) == 1, "accepted metric")
	assert.True(t, testutil.ToFloat64(b.px.met.agent.WithLabelValues("refused", "PROJECT_RULE")) == 1, "refused metric")
	assert.True(t, testutil.ToFloat64(b.px.met.agent.WithLabelValues("invalid", "garbled")) == 1, "garbled metric")
	assert.True(t, testutil.ToFloat64(b.px.met.agent.WithLabelValues("invalid", "not_found")) == 1, "not_found metric")
	assert.True(t, testutil.ToFloat64(b.px.met.recovers.WithLabelValues("recovered")) == 1, "recoveries metric")

	// Another credential's session: the same handle is not found there.
	other := &agentClient{t: t, url: b.url, key: "sk-ant-OTHER-key-000000000000", session: "agent-1", files: c.files}
	other.messages = []map[string]any{
		{"role": "user", "content": []map[string]any{{"type": "text", "text": "recover"}}},
		{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": "toolu_o1", "name": "mcp__prunesched__context_recover", "input": map[string]any{"handle": regexp.MustCompile(`context_recover (#\d+)`).FindStringSubmatch(results[9]["toolu_a2"])[1]}}}},
		{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": "toolu_o1", "content": agenttools.Stub(agenttools.Recover)}}},
	}
	other.send()
	reqs = f.requests()
	_, got := toolResults(t, reqs[len(reqs)-1].body)
	assert.True(t, strings.HasPrefix(got["toolu_o1"], "prunesched: not found: no item #"), "another credential's recovery: %.200q", got["toolu_o1"])
	assert.True(t, !strings.Contains(got["toolu_o1"], "alpha line"), "another credential read the content")
}

// judgeFailsOnce fails the first wait for the agent's removal requests to
// be judged, after they were stored.
type judgeFailsOnce struct {
	Backend
	mu     sync.Mutex
	failed bool
}

func (j *judgeFailsOnce) Judged(ctx context.Context, tenant, session string, lastFact uint64) error {
	j.mu.Lock()
	first := !j.failed
	j.failed = true
	j.mu.Unlock()
	if first {
		return fmt.Errorf("injected judge failure")
	}
	return j.Backend.Judged(ctx, tenant, session, lastFact)
}

// TestAgentPruneRetriedAfterFailOpen: a request whose context_prune was
// stored but not judged fails open (the stub goes upstream once); the
// next request carrying the same result finds the removal requests stored
// and answers them, instead of failing open on a conflict for good.
func TestAgentPruneRetriedAfterFailOpen(t *testing.T) {
	t.Parallel()
	pol := testPolicy(t)
	f := &fakeUpstream{}
	var jb *judgeFailsOnce
	b := setup(t, pol, anthropicFake(f, func(map[string]any) turn { return turn{text: "ok"} }), func(c *Config) {
		jb = &judgeFailsOnce{Backend: c.Backend}
		c.Backend = jb
		c.Policy = &pol
	})
	c := &agentClient{t: t, url: b.url, key: secretKey, session: "retry-1"}
	out := strings.Repeat("line of output\n", 80)
	c.messages = []map[string]any{
		{"role": "user", "content": []map[string]any{{"type": "text", "text": "go"}}},
		{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": "toolu_r1", "name": "Read", "input": map[string]any{"file_path": "/p/a"}}}},
		{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": "toolu_r1", "content": out}}},
	}
	c.send()
	reqs := f.requests()
	handle := ""
	for _, it := range b.items(t, events.DefaultTenant, b.session("retry-1", reqs[0].header)) {
		if it.ID == "toolu_r1" {
			handle = fmt.Sprintf("#%d", it.Index)
		}
	}
	c.messages = append(c.messages,
		map[string]any{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": "toolu_p", "name": "mcp__prunesched__context_prune", "input": map[string]any{"handles": []any{handle}, "reason": "done"}}}},
		map[string]any{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": "toolu_p", "content": agenttools.Stub(agenttools.Prune)}}},
	)
	c.send() // judged fails: fails open
	c.send() // retried
	reqs = f.requests()
	assert.True(t, len(reqs) == 3, "upstream saw %d requests", len(reqs))
	_, got := toolResults(t, reqs[1].body)
	assert.True(t, got["toolu_p"] == agenttools.Stub(agenttools.Prune), "the failed-open request was changed: %q", got["toolu_p"])
	_, got = toolResults(t, reqs[2].body)
	assert.True(t, strings.HasPrefix(got["toolu_p"], "prunesched: 1 of 1 accepted."), "retried answer: %q\nlogs:\n%s", got["toolu_p"], b.logs.String())
}
