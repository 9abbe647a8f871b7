//go:build clis

package proxy

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/agentclis"
	"github.com/prunesched/prunesched/internal/agenttools"
	"github.com/prunesched/prunesched/internal/testutil"
)

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

func (v reqView) has(name string) bool {
	return slices.ContainsFunc(v.tools, func(n toolName) bool { return n.name == name })
}

func toolNames(v reqView) []string {
	var out []string
	for _, n := range v.tools {
		out = append(out, n.String())
	}
	return out
}
