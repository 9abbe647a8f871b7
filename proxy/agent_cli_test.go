package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/agentclis"
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

// cliBuild is the prunesched binary the CLI tests register as the MCP
// server: built once while tests use it, removed when the last one ends.
var cliBuild struct {
	mu    sync.Mutex
	users int
	dir   string
	bin   string
}

// pruneschedBinary builds ./cmd/prunesched (never the test binary: the
// CLI starts it as 'prunesched mcp') and returns its path.
func pruneschedBinary(t *testing.T) string {
	t.Helper()
	cliBuild.mu.Lock()
	defer cliBuild.mu.Unlock()
	if cliBuild.bin == "" {
		dir, err := os.MkdirTemp("", "prunesched-cli-")
		testutil.NoError(t, err)
		bin := filepath.Join(dir, "prunesched")
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../cmd/prunesched").CombinedOutput(); err != nil {
			_ = os.RemoveAll(dir)
			t.Fatalf("go build ../cmd/prunesched: %v\n%s", err, out)
		}
		cliBuild.dir, cliBuild.bin = dir, bin
	}
	cliBuild.users++
	t.Cleanup(func() {
		cliBuild.mu.Lock()
		defer cliBuild.mu.Unlock()
		if cliBuild.users--; cliBuild.users == 0 {
			_ = os.RemoveAll(cliBuild.dir)
			cliBuild.dir, cliBuild.bin = "", ""
		}
	})
	return cliBuild.bin
}

// setupAgent runs 'prunesched setup AGENT' on home, pointing the agent at
// the proxy and registering bin as its MCP server.
func setupAgent(t *testing.T, bin, agent, home, proxyURL string) {
	t.Helper()
	cmd := exec.Command(bin, "setup", agent, "--home", home, "--proxy", proxyURL, "--mcp-command", bin)
	cmd.Env = agentclis.HomeEnv(home)
	out, err := cmd.CombinedOutput()
	testutil.True(t, err == nil, "prunesched setup %s: %v\n%s", agent, err, out)
	t.Logf("setup %s:\n%s", agent, out)
}

// runInHome runs a CLI in dir with the home setup wrote (execCLI),
// failing the test when it fails.
func runInHome(t *testing.T, dir, home string, env []string, bin string, args ...string) []byte {
	t.Helper()
	out, stderr, err := execCLI(dir, home, env, bin, args...)
	testutil.True(t, err == nil, "%s: %v\nstdout:\n%s\nstderr (tail):\n%s", filepath.Base(bin), err, tail(string(out), 4000), tail(stderr, 4000))
	return out
}

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

func (v reqView) has(name string) bool {
	return slices.ContainsFunc(v.tools, func(n toolName) bool { return n.name == name })
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

func toolNames(v reqView) []string {
	var out []string
	for _, n := range v.tools {
		out = append(out, n.String())
	}
	return out
}

// TestClaudeCodeContextTools: Claude Code with the MCP server 'setup
// claude-code' registered, twice on one proxy: by default, where Claude
// Code defers MCP tools behind its ToolSearch tool (the model sees only
// ToolSearch and the deferred tools' names in a system message, calls
// ToolSearch with "select:NAME,...", and the tools are callable after
// that), and with ENABLE_TOOL_SEARCH=false, where they are in the request's
// tools from the start.
func TestClaudeCodeContextTools(t *testing.T) {
	t.Parallel()
	cli := cliBinary(t, "claude-code", "claude")
	bin := pruneschedBinary(t)
	c := newCtxBench(t, APIAnthropic)
	for _, tc := range []struct {
		name   string
		search bool
		env    []string
	}{
		{"ToolSearch", true, nil},
		{"NoToolSearch", false, []string{"ENABLE_TOOL_SEARCH=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proj := newCtxProject(t, "CLAUDE.md")
			home := t.TempDir()
			setupAgent(t, bin, "claude-code", home, c.url)
			r := &ctxRun{prefix: "toolu_" + strings.ToLower(tc.name) + "_", search: tc.search, proj: proj, read: func(name string) turn {
				return turn{tool: "Read", input: map[string]any{"file_path": filepath.Join(proj.dir, name)}}
			}}
			start := c.start(r)
			out := runInHome(t, proj.dir, home, append([]string{"ANTHROPIC_API_KEY=" + secretKey,
				"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"}, tc.env...),
				cli, "-p", "Tidy up the context.", "--allowedTools", "Read,mcp__prunesched", "--output-format", "json")
			var res struct {
				Subtype, Result string
				IsError         bool `json:"is_error"`
			}
			testutil.NoError(t, json.Unmarshal(out, &res))
			testutil.True(t, res.Subtype == "success" && !res.IsError && res.Result == "done", "claude result: %s", out)
			views := checkCtxRun(t, c.bench, r, c.f.requests()[start:], anthropicView)
			for k, n := range r.names {
				testutil.True(t, n.name == "mcp__prunesched__"+string(k), "Claude Code calls %s %s", k, n)
			}

			// Whether the context tools were deferred behind ToolSearch.
			_, direct := views[0].contextTool(agenttools.List)
			t.Logf("first request's tools: %v (deferred: %v)", toolNames(views[0]), views[0].deferTo)
			if !tc.search {
				testutil.True(t, direct && !views[0].has("ToolSearch"), "ENABLE_TOOL_SEARCH=false: tools %v", toolNames(views[0]))
				return
			}
			testutil.True(t, !direct && views[0].has("ToolSearch"), "ToolSearch is not in front of the MCP tools: tools %v", toolNames(views[0]))
			testutil.True(t, strings.Contains(string(c.f.requests()[start].body), "mcp__prunesched__context_prune"), "the deferred tools' names are not in the first request")
			for i, v := range views {
				if _, ok := v.results[r.prefix+"search"]; ok {
					t.Logf("after ToolSearch: tools %v (deferred: %v); its result: %.400s", toolNames(v), v.deferTo, v.results[r.prefix+"search"])
					// Sent with defer_loading, and loaded by the
					// tool_reference blocks of ToolSearch's result.
					for _, k := range agenttools.Kinds {
						n, ok := v.contextTool(k)
						testutil.True(t, ok && v.deferTo[n.name], "request %d, after ToolSearch: %s not among the tools %v (deferred %v)", i, k, toolNames(v), v.deferTo)
						testutil.True(t, strings.Contains(v.results[r.prefix+"search"], `{"tool_name":"`+n.name+`","type":"tool_reference"}`), "ToolSearch's result does not load %s: %s", n.name, v.results[r.prefix+"search"])
					}
					break
				}
			}
		})
	}
}

// TestCodexContextTools: Codex with the provider and MCP server 'setup
// codex' wrote. Codex offers an MCP server's tools in a Responses
// namespace tool (mcp__prunesched, holding context_list, ...), and the
// model calls them by their bare name in that namespace. Its MCP results
// are arrays of input_text parts (a "Wall time" header, then the MCP
// content); the proxy's answer replaces the whole output.
func TestCodexContextTools(t *testing.T) {
	t.Parallel()
	cli := cliBinary(t, "codex", "codex")
	bin := pruneschedBinary(t)
	c := newCtxBench(t, APIOpenAIResponses)
	proj := newCtxProject(t, "AGENTS.md")
	home := t.TempDir()
	// The user's own settings (no provider: setup adds and selects one).
	testutil.NoError(t, os.MkdirAll(filepath.Join(home, ".codex"), 0o755))
	testutil.NoError(t, os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(`model = "fake-model"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false
`), 0o644))
	setupAgent(t, bin, "codex", home, c.url)
	r := &ctxRun{prefix: "call_cx_", proj: proj, read: func(name string) turn {
		return turn{tool: "exec_command", input: map[string]any{"cmd": "cat " + name}}
	}}
	start := c.start(r)
	out := runInHome(t, proj.dir, home, []string{"OPENAI_API_KEY=" + secretKey}, cli, "exec", "--skip-git-repo-check", "--json", "Tidy up the context.")
	testutil.True(t, strings.Contains(string(out), `"turn.completed"`) && strings.Contains(string(out), `"text":"done"`), "codex output:\n%s", out)
	views := checkCtxRun(t, c.bench, r, c.f.requests()[start:], responsesView)
	t.Logf("first request's tools: %v", toolNames(views[0]))
	for k, n := range r.names {
		testutil.True(t, n.ns == "mcp__prunesched" && n.name == string(k), "Codex offers %s as %s", k, n)
	}
	// The log names the call by its qualified name, as Codex does.
	sessions := c.sessionsOf(t, events.DefaultTenant, r.prefix+"rec")
	it := itemByID(c.items(t, events.DefaultTenant, sessions[0]), r.prefix+"rec")
	testutil.True(t, it != nil && it.Tool == "mcp__prunesched__context_recover", "the recovery's tool: %+v", it)
}

// TestOpenCodeContextTools: OpenCode on its built-in anthropic provider,
// pointed at the proxy and given the MCP server by 'setup opencode'. It
// names an MCP server's tools SERVER_TOOL (prunesched_context_list).
func TestOpenCodeContextTools(t *testing.T) {
	t.Parallel()
	cli := cliBinary(t, "opencode", "opencode")
	bin := pruneschedBinary(t)
	c := newCtxBench(t, APIAnthropic)
	proj := newCtxProject(t, "AGENTS.md")
	home := t.TempDir()
	// The user's own settings (setup adds the base URLs and the MCP
	// server).
	cfgDir := filepath.Join(home, ".config", "opencode")
	testutil.NoError(t, os.MkdirAll(cfgDir, 0o755))
	testutil.NoError(t, os.WriteFile(filepath.Join(cfgDir, "opencode.json"), []byte(`{
  "$schema": "https://opencode.ai/config.json",
  "model": "anthropic/claude-sonnet-4-5",
  "small_model": "anthropic/claude-sonnet-4-5",
  "autoupdate": false,
  "share": "disabled"
}
`), 0o644))
	setupAgent(t, bin, "opencode", home, c.url)
	r := &ctxRun{prefix: "toolu_oc_", proj: proj, read: func(name string) turn {
		return turn{tool: "read", input: map[string]any{"filePath": filepath.Join(proj.dir, name)}}
	}}
	start := c.start(r)
	out := runInHome(t, proj.dir, home, []string{"ANTHROPIC_API_KEY=" + secretKey, "OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1"},
		cli, "run", "--format", "json", "tidy", "up", "the", "context")
	testutil.True(t, strings.Contains(string(out), `"text":"done"`), "opencode output:\n%s", out)
	views := checkCtxRun(t, c.bench, r, c.f.requests()[start:], anthropicView)
	t.Logf("first request's tools: %v", toolNames(views[0]))
	for k, n := range r.names {
		testutil.True(t, n.name == "prunesched_"+string(k), "OpenCode offers %s as %s", k, n)
	}
}
