package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/agenttools"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
)

// The context tools (agent.go) end to end: each real agent CLI, configured
// only by 'prunesched setup' (its base URL pointed at the proxy, and
// prunesched's MCP server registered: a prunesched binary built once from
// ./cmd/prunesched, which the CLI starts itself), runs headless through the
// proxy against a scripted model. The model reads a file twice (the second
// copy is pruned by a rule at its first send), reads a unique log and the
// project-rule file, lists the context, asks to prune the log and the rule
// file, recovers the rule-pruned copy by the handle in its placeholder,
// reads one more file and ends. The MCP server answers every context tool
// with its stub; the proxy must replace each stub with the real answer.
//
// The cache-safe point is made with the proxy's clock (Config.Now), not
// with scheduler mode next_request, which would apply the accepted removal
// at the very next request and so test nothing of "never before". A clock
// jump is possible with real CLIs because the scripted model makes it: it
// runs inside the request, and jumps the clock past the prompt cache's
// lifetime when it receives the recovered bytes, whatever the CLI's own
// timing. Until then the fake provider reports a warm cache at every
// answer and the requests are a second apart on the clock, so the
// cache-aware scheduler must keep the accepted removal queued (the log is
// too small to pay for the cache break) through the acceptance and the
// recovery; the first request after the jump is the cache-safe point
// (cache_expired), where it must apply and stay applied.

// ctxProject is the project directory the model reads in.
type ctxProject struct {
	dir              string
	a, log, rules    string
	rulesName        string
	aLast, logMarker string
}

func newCtxProject(t *testing.T, rulesName string) *ctxProject {
	t.Helper()
	p := &ctxProject{dir: t.TempDir(), rulesName: rulesName, aLast: "alpha line 30 of an unchanged file", logMarker: "--- PASS: TestX"}
	var sb strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&sb, "alpha line %d of an unchanged file\n", i)
	}
	p.a = sb.String()
	// Small enough that its saving does not pay for breaking the warm
	// cache: the accepted removal waits for the cache to expire.
	p.log = strings.Repeat("=== RUN TestX\n--- PASS: TestX (0.00s)\n", 25)
	p.rules = strings.Repeat("Always run the tests before you finish.\n", 12)
	for name, c := range map[string]string{"a.txt": p.a, "test.log": p.log, rulesName: p.rules, "x.txt": "one more file\n"} {
		testutil.NoError(t, os.WriteFile(filepath.Join(p.dir, name), []byte(c), 0o644))
	}
	return p
}

// toolName is a tool as a CLI offers it to the model: Codex puts an MCP
// server's tools in a namespace (ns).
type toolName struct{ ns, name string }

func (n toolName) String() string {
	if n.ns != "" {
		return n.ns + "/" + n.name
	}
	return n.name
}

// reqView is what the scripted model reads in a request: the tools it may
// call, and the results it received (call id -> text; the texts of a
// content array joined by newlines, as the proxy flattens them; other
// content as raw JSON).
type reqView struct {
	tools   []toolName
	deferTo map[string]bool // Anthropic tools sent with defer_loading
	results map[string]string
}

// flatten joins the text parts of a content value (string or array).
func flatten(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case []any:
		var parts []string
		for _, p := range c {
			m, _ := p.(map[string]any)
			switch m["type"] {
			case "text", "input_text", "output_text":
				s, _ := m["text"].(string)
				parts = append(parts, s)
			default:
				raw, _ := json.Marshal(v)
				return string(raw)
			}
		}
		return strings.Join(parts, "\n")
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}

// anthropicView reads a Messages request.
func anthropicView(req map[string]any) reqView {
	v := reqView{results: map[string]string{}, deferTo: map[string]bool{}}
	tools, _ := req["tools"].([]any)
	for _, x := range tools {
		m, _ := x.(map[string]any)
		name, _ := m["name"].(string)
		v.tools = append(v.tools, toolName{name: name})
		if d, _ := m["defer_loading"].(bool); d {
			v.deferTo[name] = true
		}
	}
	msgs, _ := req["messages"].([]any)
	for _, x := range msgs {
		m, _ := x.(map[string]any)
		blocks, _ := m["content"].([]any)
		for _, bx := range blocks {
			b, _ := bx.(map[string]any)
			if b["type"] == "tool_result" {
				id, _ := b["tool_use_id"].(string)
				v.results[id] = flatten(b["content"])
			}
		}
	}
	return v
}

// responsesView reads a Responses request.
func responsesView(req map[string]any) reqView {
	v := reqView{results: map[string]string{}}
	tools, _ := req["tools"].([]any)
	for _, x := range tools {
		m, _ := x.(map[string]any)
		name, _ := m["name"].(string)
		switch m["type"] {
		case "function":
			v.tools = append(v.tools, toolName{name: name})
		case "namespace":
			inner, _ := m["tools"].([]any)
			for _, ix := range inner {
				im, _ := ix.(map[string]any)
				n, _ := im["name"].(string)
				v.tools = append(v.tools, toolName{ns: name, name: n})
			}
		}
	}
	in, _ := req["input"].([]any)
	for _, x := range in {
		m, _ := x.(map[string]any)
		if m["type"] == "function_call_output" {
			id, _ := m["call_id"].(string)
			v.results[id] = flatten(m["output"])
		}
	}
	return v
}

// chatView reads a Chat Completions request.
func chatView(req map[string]any) reqView {
	v := reqView{results: map[string]string{}}
	tools, _ := req["tools"].([]any)
	for _, x := range tools {
		m, _ := x.(map[string]any)
		fn, _ := m["function"].(map[string]any)
		name, _ := fn["name"].(string)
		v.tools = append(v.tools, toolName{name: name})
	}
	msgs, _ := req["messages"].([]any)
	for _, x := range msgs {
		m, _ := x.(map[string]any)
		if m["role"] == "tool" {
			id, _ := m["tool_call_id"].(string)
			v.results[id] = flatten(m["content"])
		}
	}
	return v
}

// contextTool finds the tool the CLI gives the model for a context tool:
// a name agenttools.Match knows, in no namespace or in prunesched's.
func (v reqView) contextTool(k agenttools.Kind) (toolName, bool) {
	for _, n := range v.tools {
		if got, ok := agenttools.Match(n.name); ok && got == k && (n.ns == "" || strings.Contains(n.ns, "prunesched")) {
			return n, true
		}
	}
	return toolName{}, false
}

// ctxSteps are the scripted model's tool calls, in order. Each call's id
// is the run's prefix + its step, and the model makes the first call
// whose result is not yet in the request: driven by what it received, so
// the CLIs' side requests and retries do not disturb it.
var ctxSteps = []string{"search", "a1", "a2", "log", "rules", "list", "prune", "rec", "x"}

// ctxRun is one CLI run's scripted model.
type ctxRun struct {
	prefix string
	// search: call Claude Code's ToolSearch to load the context tools
	// first.
	search bool
	proj   *ctxProject
	// read is the CLI's call reading a project file.
	read  func(name string) turn
	clock *agentClock

	mu     sync.Mutex
	jumped bool
	// names are the context tools as the model called them.
	names map[agenttools.Kind]toolName
}

var (
	listLine  = regexp.MustCompile(`(?m)^(#\d+)  output of (.*?)  \d+ tokens`)
	recHandle = regexp.MustCompile(`context_recover (#\d+)\]`)
)

// listHandle returns the handle of the list answer's line for the output
// that read file (the label names the path, or Codex's "cat FILE").
func listHandle(list, file string) string {
	for _, m := range listLine.FindAllStringSubmatch(list, -1) {
		if strings.HasSuffix(strings.TrimSuffix(m[2], `"`), file) {
			return m[1]
		}
	}
	return ""
}

func (r *ctxRun) next(v reqView) turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, step := range ctxSteps {
		if step == "search" && !r.search {
			continue
		}
		if _, ok := v.results[r.prefix+step]; ok {
			continue
		}
		tn := r.turn(step, v)
		if tn.tool != "" {
			tn.id = r.prefix + step
		}
		return tn
	}
	return turn{text: "done"}
}

func (r *ctxRun) turn(step string, v reqView) turn {
	call := func(k agenttools.Kind, input map[string]any) turn {
		n, ok := v.contextTool(k)
		if !ok {
			return turn{text: fmt.Sprintf("no %s among the tools offered: %v", k, v.tools)}
		}
		if r.names == nil {
			r.names = map[agenttools.Kind]toolName{}
		}
		r.names[k] = n
		return turn{tool: n.name, namespace: n.ns, input: input}
	}
	switch step {
	case "search":
		return turn{tool: "ToolSearch", input: map[string]any{"query": "select:mcp__prunesched__context_list,mcp__prunesched__context_prune,mcp__prunesched__context_recover"}}
	case "a1", "a2":
		return r.read("a.txt")
	case "log":
		return r.read("test.log")
	case "rules":
		return r.read(r.proj.rulesName)
	case "list":
		return call(agenttools.List, map[string]any{})
	case "prune":
		list := v.results[r.prefix+"list"]
		hl, hr := listHandle(list, "test.log"), listHandle(list, r.proj.rulesName)
		if hl == "" || hr == "" {
			return turn{text: "no handles in the list answer: " + list}
		}
		return call(agenttools.Prune, map[string]any{"handles": []any{hl, hr}, "reason": "the tests passed; done with the log and the rules"})
	case "rec":
		m := recHandle.FindStringSubmatch(v.results[r.prefix+"a2"])
		if m == nil {
			return turn{text: "no placeholder on the second read: " + v.results[r.prefix+"a2"]}
		}
		return call(agenttools.Recover, map[string]any{"handle": m[1]})
	case "x":
		// The model has the recovered bytes: the prompt cache expires
		// before the next request (a fixed point of the script, not of
		// the CLI's timing).
		if !r.jumped {
			r.clock.jump(10 * time.Minute)
			r.jumped = true
		}
		return r.read("x.txt")
	}
	return turn{text: "unknown step " + step}
}

// stubFragment is in every stub the MCP server answers (agenttools.Stub).
const stubFragment = "is answered by the prunesched proxy"

// checkCtxRun checks what the upstream saw in one run (its requests reqs,
// read by view) and what the log holds, and returns the views of the
// run's agent requests.
func checkCtxRun(t *testing.T, b *bench, r *ctxRun, reqs []recorded, view func(map[string]any) reqView) []reqView {
	t.Helper()
	var views []reqView
	for i, rq := range reqs {
		testutil.True(t, !strings.Contains(string(rq.body), stubFragment), "request %d carries the MCP server's stub: %.400s", i, rq.body)
		var req map[string]any
		testutil.NoError(t, json.Unmarshal(rq.body, &req))
		if req["tools"] == nil {
			continue // a side request (title): not an agent turn
		}
		views = append(views, view(req))
	}
	first := func(step string) int {
		for i, v := range views {
			if _, ok := v.results[r.prefix+step]; ok {
				return i
			}
		}
		t.Fatalf("no request carries the result of %s", step)
		return -1
	}
	id := func(step string) string { return r.prefix + step }
	iList, iPrune, iRec, iX, iA2, iLog := first("list"), first("prune"), first("rec"), first("x"), first("a2"), first("log")

	// context_list and context_prune: the proxy's answers, byte for byte
	// the same at every later send.
	list := views[iList].results[id("list")]
	testutil.True(t, strings.HasPrefix(list, "prunesched: the ") && listHandle(list, "test.log") != "" && listHandle(list, r.proj.rulesName) != "", "list answer:\n%s", list)
	pr := views[iPrune].results[id("prune")]
	hl, hr := listHandle(list, "test.log"), listHandle(list, r.proj.rulesName)
	testutil.True(t, strings.HasPrefix(pr, "prunesched: 1 of 2 accepted."), "prune answer:\n%s", pr)
	testutil.True(t, strings.Contains(pr, "\n"+hl+" accepted (AGENT_REQUEST): queued until a cache-safe point"), "prune answer lacks the log's acceptance (%s):\n%s", hl, pr)
	testutil.True(t, strings.Contains(pr, "\n"+hr+" refused: protected (PROJECT_RULE: project-rule file matching "+r.proj.rulesName+")"), "prune answer lacks the rule file's refusal (%s):\n%s", hr, pr)
	for i := iList; i < len(views); i++ {
		testutil.True(t, views[i].results[id("list")] == list, "request %d: list answer changed: %.300q", i, views[i].results[id("list")])
	}
	for i := iPrune; i < len(views); i++ {
		testutil.True(t, views[i].results[id("prune")] == pr, "request %d: prune answer changed: %.300q", i, views[i].results[id("prune")])
	}

	// The accepted removal: whole at every send before the cache-safe
	// point (the acceptance and at least one warm request after it), a
	// placeholder from it on.
	testutil.True(t, iLog < iPrune && iPrune < iRec && iRec < iX, "request order: log %d prune %d rec %d x %d", iLog, iPrune, iRec, iX)
	orig := views[iLog].results[id("log")]
	testutil.True(t, strings.Contains(orig, r.proj.logMarker), "the log at its first send: %.200q", orig)
	for i := iLog; i < iX; i++ {
		testutil.True(t, views[i].results[id("log")] == orig, "request %d (before the cache-safe point %d): the log was removed: %.200q", i, iX, views[i].results[id("log")])
	}
	for i := iX; i < len(views); i++ {
		got := views[i].results[id("log")]
		testutil.True(t, strings.HasPrefix(got, "[prunesched: output of ") && strings.Contains(got, "removed: AGENT_REQUEST,") && !strings.Contains(got, r.proj.logMarker), "request %d (cache-safe point %d): log not removed: %.200q", i, iX, got)
	}
	for i := first("rules"); i < len(views); i++ {
		testutil.True(t, strings.Contains(views[i].results[id("rules")], strings.TrimSpace(r.proj.rules)[:40]), "request %d: the rule file changed: %.200q", i, views[i].results[id("rules")])
	}

	// context_recover: the copy pruned by a rule at its first send comes
	// back byte for byte; its placeholder stays.
	a2 := views[iA2].results[id("a2")]
	testutil.True(t, strings.HasPrefix(a2, "[prunesched: output of ") && !strings.Contains(a2, r.proj.aLast), "the second read at its first send: %.300q", a2)
	rec := views[iRec].results[id("rec")]
	sessions := b.sessionsOf(t, events.DefaultTenant, id("a1"))
	testutil.True(t, len(sessions) == 1, "sessions holding %s: %v", id("a1"), sessions)
	session := sessions[0]
	want := originalOutput(t, b, session, id("a2"))
	testutil.True(t, rec == want && strings.Contains(rec, r.proj.aLast), "recovered %d bytes, want the original %d: %.300q", len(rec), len(want), rec)
	for i := iRec; i < len(views); i++ {
		testutil.True(t, views[i].results[id("a2")] == a2 && views[i].results[id("rec")] == rec, "request %d: the placeholder or the recovery changed", i)
	}

	// The log.
	items := b.items(t, events.DefaultTenant, session)
	it := itemByID(items, id("a2"))
	testutil.True(t, it != nil && it.Pruned && (it.Applied.Rung == events.L0 || it.Applied.Rung == events.L1) && it.Applied.Trigger == events.TriggerNeverSent, "%s: %+v applied %+v", id("a2"), it, it.Applied)
	t.Logf("second read pruned by %s %s (%s)", it.Applied.Rung, it.Applied.Reason, it.Applied.Trigger)
	it = itemByID(items, id("log"))
	testutil.True(t, it != nil && it.Pruned && it.Applied.Reason == events.ReasonAgentRequest && it.Applied.Trigger == events.TriggerCacheExpired, "%s: %+v", id("log"), it)
	for _, s := range []string{"a1", "rules", "list", "prune", "rec", "x"} {
		it := itemByID(items, id(s))
		// The recovered bytes repeat the first read's lines, so L1 span
		// may reference them (SPAN_REFERENCE, applied in the log); the
		// proxy splices whole placeholders only, so the wire carries them
		// whole (checked above).
		testutil.True(t, it != nil && (!it.Pruned || s == "rec" && it.Applied.Reason == events.ReasonSpanReference), "%s: %+v applied %+v", id(s), it, it.Applied)
	}
	return views
}

// originalOutput is a tool result's output as the log holds it.
func originalOutput(t *testing.T, b *bench, session, item string) string {
	t.Helper()
	var o projections.Original
	var ok bool
	b.svc.Pipeline.Projection.View(events.DefaultTenant, session, func(s *projections.Session) {
		if i, found := s.IndexOf(item); found {
			o, ok = s.OriginalOf(i)
		}
	})
	testutil.True(t, ok, "no original of %s in %s", item, session)
	if o.Output != nil {
		return *o.Output
	}
	testutil.True(t, o.Hash != "", "original of %s: no output", item)
	raw, err := b.px.cfg.Backend.Blob(context.Background(), o.Hash)
	testutil.NoError(t, err)
	return string(raw)
}

// ctxPolicy protects no recent turns (so the model may ask for the log at
// once) and is otherwise the shipped cache-aware default.
func ctxPolicy(t *testing.T) policy.Policy {
	t.Helper()
	pol, err := policy.Parse([]byte("name: cli-context-tools\neligibility:\n  protect_recent_turns: 0\n"))
	testutil.NoError(t, err)
	return pol
}

// warmAnthropic is the usage of a warm prompt cache, in Anthropic names.
var warmAnthropic = map[string]any{"input_tokens": 50, "cache_creation_input_tokens": 400, "cache_read_input_tokens": 12000,
	"cache_creation": map[string]any{"ephemeral_5m_input_tokens": 400, "ephemeral_1h_input_tokens": 0}}

// ctxBench is one CLI test's proxy in front of a scripted Anthropic model
// whose current run is cur.
type ctxBench struct {
	*bench
	f     *fakeUpstream
	clock *agentClock
	mu    sync.Mutex
	cur   *ctxRun
}

func (c *ctxBench) run() *ctxRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// newCtxBench starts the proxy in front of a fake model speaking api.
func newCtxBench(t *testing.T, api API) *ctxBench {
	c := &ctxBench{f: &fakeUpstream{usage: warmAnthropic}, clock: &agentClock{t: time.Now()}}
	pol := ctxPolicy(t)
	var h http.Handler
	switch api {
	case APIAnthropic:
		h = anthropicFake(c.f, func(req map[string]any) turn {
			if req["tools"] == nil {
				return turn{text: "A title"} // a side request
			}
			return c.run().next(anthropicView(req))
		})
	case APIOpenAIResponses:
		c.f.oaUsage = map[string]any{"input_tokens": 12450, "input_tokens_details": map[string]any{"cached_tokens": 12000},
			"output_tokens": 9, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 12459}
		h = responsesFake(c.f, func(req map[string]any) turn { return c.run().next(responsesView(req)) })
	case APIOpenAIChat:
		c.f.oaUsage = map[string]any{"prompt_tokens": 12450, "completion_tokens": 7, "total_tokens": 12457, "prompt_tokens_details": map[string]any{"cached_tokens": 12000}}
		h = chatFake(c.f, func(req map[string]any) turn { return c.run().next(chatView(req)) })
	}
	c.bench = setup(t, pol, h, func(cfg *Config) { cfg.Now, cfg.Policy = c.clock.now, &pol })
	return c
}

// start makes r the current run and returns the index of its first
// request.
func (c *ctxBench) start(r *ctxRun) int {
	c.mu.Lock()
	c.cur = r
	c.mu.Unlock()
	r.clock = c.clock
	return len(c.f.requests())
}
