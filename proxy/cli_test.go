//go:build clis

package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/agentclis"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/policy"
)

// The real agent CLIs are installed by .ci/setup-clis.sh into
// $PRUNESCHED_CLI_DIR (default $HOME/.cache/prunesched-clis). A test whose
// CLI is absent skips, saying how to install it.

// cliTimeout bounds every CLI run.
const cliTimeout = 90 * time.Second

func cliBinary(t *testing.T, sub, bin string) string {
	t.Helper()
	return agentclis.Binary(t, sub, bin)
}

// runCLI runs a CLI with a throwaway HOME, bounded by cliTimeout.
func runCLI(t *testing.T, dir string, env []string, bin string, args ...string) ([]byte, error) {
	t.Helper()
	out, stderr, err := execCLI(dir, t.TempDir(), env, bin, args...)
	if err != nil {
		t.Logf("%s stderr:\n%s", filepath.Base(bin), tail(stderr, 4000))
	}
	return out, err
}

// execCLI runs a CLI in dir with HOME home and env added, bounded by
// cliTimeout, and returns its stdout and stderr.
func execCLI(dir, home string, env []string, bin string, args ...string) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(agentclis.HomeEnv(home), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s: %w", cliTimeout, ctx.Err())
	}
	return out, stderr.String(), err
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// fileScript is the scripted model of the CLI tests: read a.txt, read it
// again (unchanged), read b.txt, then (after the test changes b.txt) read
// b.txt again, then answer "done". It counts tool results in the request,
// so the CLI's own side requests (no tools) do not disturb it. change runs
// once, before the second read of b.txt is asked for.
type fileScript struct {
	dir    string
	once   sync.Once
	change func()
}

func (s *fileScript) next(toolResults int, id func(string) string) turn {
	switch toolResults {
	case 0, 1:
		return turn{tool: "read", id: id(fmt.Sprintf("a%d", toolResults+1)), input: map[string]any{"path": filepath.Join(s.dir, "a.txt")}}
	case 2:
		return turn{tool: "read", id: id("b1"), input: map[string]any{"path": filepath.Join(s.dir, "b.txt")}}
	case 3:
		s.once.Do(s.change)
		return turn{tool: "read", id: id("b2"), input: map[string]any{"path": filepath.Join(s.dir, "b.txt")}}
	}
	return turn{text: "done"}
}

func project(t *testing.T) (dir string, a string) {
	t.Helper()
	dir = t.TempDir()
	var sb strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&sb, "alpha line %d of an unchanged file\n", i)
	}
	a = sb.String()
	testutil.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte(a), 0o644))
	testutil.NoError(t, os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b version 1\n"), 0o644))
	return dir, a
}

// TestClaudeCodeCLI drives the real Claude Code headless through the proxy
// to a fake Anthropic server (SSE), with the shipped default policy: the
// second read of the unchanged a.txt is a newcomer whose identical copy is
// already in the cached prefix, so pruning it at its first request costs
// nothing and even the cache-aware default applies it at once (never_sent),
// warm cache and recent turns notwithstanding.
func TestClaudeCodeCLI(t *testing.T) {
	t.Parallel()
	bin := cliBinary(t, "claude-code", "claude")
	dir, a := project(t)
	fs := &fileScript{dir: dir, change: func() {
		_ = os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b version 2, changed between turns\n"), 0o644)
	}}
	f := &fakeUpstream{}
	b := setup(t, policy.Default(), anthropicFake(f, func(req map[string]any) turn {
		if _, ok := req["tools"]; !ok {
			return turn{text: "ok"}
		}
		tn := fs.next(countToolResults(req), func(s string) string { return "toolu_" + s })
		if tn.tool != "" {
			tn.tool = "Read"
			tn.input = map[string]any{"file_path": tn.input["path"]}
		}
		return tn
	}), nil)
	out, err := runCLI(t, dir, []string{
		"ANTHROPIC_BASE_URL=" + b.url, "ANTHROPIC_API_KEY=" + secretKey,
		"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1",
	}, bin, "-p", "Read a.txt twice, then b.txt twice.", "--allowedTools", "Read", "--output-format", "json")
	testutil.NoError(t, err)
	var res struct {
		Subtype   string `json:"subtype"`
		IsError   bool   `json:"is_error"`
		Result    string `json:"result"`
		SessionID string `json:"session_id"`
	}
	testutil.NoError(t, json.Unmarshal(out, &res))
	testutil.True(t, res.Subtype == "success" && !res.IsError && res.Result == "done", "claude result: %s", out)

	// Find the requests by how many tool results they carry.
	byResults := map[int][]byte{}
	for _, r := range f.requests() {
		var req map[string]any
		if json.Unmarshal(r.body, &req) != nil || req["tools"] == nil {
			continue
		}
		byResults[countToolResults(req)] = r.body
		testutil.True(t, r.header.Get("X-Claude-Code-Session-Id") == res.SessionID, "session header %q", r.header.Get("X-Claude-Code-Session-Id"))
	}
	testutil.True(t, byResults[2] != nil && byResults[4] != nil, "missing requests: %v", keys(byResults))
	_, got := toolResults(t, byResults[2])
	t.Logf("request after the second read: a1=%.80q a2=%.80q", got["toolu_a1"], got["toolu_a2"])
	testutil.True(t, strings.HasPrefix(got["toolu_a2"], "[prunesched: output of Read"), "second read of a.txt not replaced: %q", got["toolu_a2"])
	testutil.True(t, strings.Contains(got["toolu_a1"], "alpha line 30"), "first read of a.txt not whole: %q", got["toolu_a1"])
	_, got = toolResults(t, byResults[4])
	testutil.True(t, strings.Contains(got["toolu_b1"], "b version 1") && strings.Contains(got["toolu_b2"], "b version 2"), "b.txt reads: %q / %q", got["toolu_b1"], got["toolu_b2"])
	for n, body := range byResults {
		checkCacheControl(t, n, body)
	}
	_ = a

	// The log matches what happened.
	// The proxy's session: Claude Code's session id plus its key's tag.
	session := b.session(res.SessionID, f.requests()[len(f.requests())-1].header)
	items := b.items(t, events.DefaultTenant, session)
	a2 := itemByID(items, "toolu_a2")
	testutil.True(t, a2 != nil && a2.Pruned && a2.Applied.Rung == events.L0 && a2.Applied.Reason == events.ReasonDuplicateOutput, "toolu_a2: %+v", a2)
	// Applied at the request the copy first appeared in (checked above);
	// this fake reports no cache usage, so the cache model may call the
	// cache cold (cache_expired) before never_sent is consulted.
	testutil.True(t, a2.Applied.Trigger == events.TriggerNeverSent || a2.Applied.Trigger == events.TriggerCacheExpired, "toolu_a2 applied by %s", a2.Applied.Trigger)
	for _, id := range []string{"toolu_a1", "toolu_b1", "toolu_b2"} {
		it := itemByID(items, id)
		testutil.True(t, it != nil && !it.Pruned && it.Tool == "Read", "%s: %+v", id, it)
	}
	ds := b.decisions(t, events.DefaultTenant, session)
	pruned := 0
	for _, d := range ds {
		if d.Decision == events.Prune && d.Applied {
			pruned++
		}
	}
	testutil.True(t, pruned == 1, "want exactly one applied prune, decisions: %+v", ds)
}

func keys(m map[int][]byte) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}

// checkCacheControl checks the at-most-4 rule on a request body.
func checkCacheControl(t *testing.T, n int, body []byte) {
	t.Helper()
	c := strings.Count(string(body), `"cache_control"`)
	testutil.True(t, c <= 4, "request with %d tool results has %d cache_control breakpoints", n, c)
}

// outputsOf returns call id -> output of the Responses input items or the
// Chat Completions tool messages of a request body.
func outputsOf(t *testing.T, body []byte) map[string]string {
	t.Helper()
	var req map[string]any
	testutil.NoError(t, json.Unmarshal(body, &req))
	out := map[string]string{}
	for _, key := range []string{"input", "messages"} {
		list, _ := req[key].([]any)
		for _, it := range list {
			m, _ := it.(map[string]any)
			switch {
			case m["type"] == "function_call_output":
				s, _ := m["output"].(string)
				out[m["call_id"].(string)] = s
			case m["role"] == "tool":
				s, _ := m["content"].(string)
				out[m["tool_call_id"].(string)] = s
			}
		}
	}
	return out
}

// TestCodexCLI drives the real Codex CLI (exec, Responses API over a custom
// provider) through the proxy. Codex reads files with exec_command "cat";
// its outputs carry a random chunk id, so the duplicate is proven by the
// content hash of what cat printed (L1), not by byte identity. Default
// policy, as for Claude Code.
func TestCodexCLI(t *testing.T) {
	t.Parallel()
	bin := cliBinary(t, "codex", "codex")
	dir, _ := project(t)
	fs := &fileScript{dir: dir, change: func() {
		_ = os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b version 2, changed between turns\n"), 0o644)
	}}
	f := &fakeUpstream{}
	b := setup(t, policy.Default(), responsesFake(f, func(req map[string]any) turn {
		tn := fs.next(countItems(req, "input", "type", "function_call_output"), func(s string) string { return "call_" + s })
		if tn.tool != "" {
			tn.tool = "exec_command"
			tn.input = map[string]any{"cmd": "cat " + filepath.Base(tn.input["path"].(string))}
		}
		return tn
	}), nil)
	codexHome := filepath.Join(t.TempDir(), ".codex")
	testutil.NoError(t, os.MkdirAll(codexHome, 0o755))
	cfg := fmt.Sprintf(`model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
[analytics]
enabled = false
[features]
plugins = false
[model_providers.fake]
name = "Fake"
base_url = "%s/v1"
env_key = "FAKE_API_KEY"
wire_api = "responses"
`, b.url)
	testutil.NoError(t, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o644))
	out, err := runCLI(t, dir, []string{"CODEX_HOME=" + codexHome, "FAKE_API_KEY=" + secretKey},
		bin, "exec", "--skip-git-repo-check", "--json", "Run cat a.txt twice, then cat b.txt twice, then say done.")
	testutil.NoError(t, err)
	testutil.True(t, strings.Contains(string(out), `"turn.completed"`) && strings.Contains(string(out), `"done"`), "codex output:\n%s", out)

	byOutputs := map[int][]byte{}
	session := ""
	for _, r := range f.requests() {
		var req map[string]any
		if json.Unmarshal(r.body, &req) != nil {
			continue
		}
		byOutputs[countItems(req, "input", "type", "function_call_output")] = r.body
		session = b.session(r.header.Get("Session-Id"), r.header)
		testutil.True(t, r.header.Get("Authorization") == "Bearer "+secretKey, "authorization not forwarded")
	}
	testutil.True(t, !strings.HasPrefix(session, "-k") && byOutputs[2] != nil && byOutputs[4] != nil, "requests: %v session %q", keys(byOutputs), session)
	got := outputsOf(t, byOutputs[2])
	t.Logf("request after the second cat: a1=%.90q a2=%.90q", got["call_a1"], got["call_a2"])
	testutil.True(t, strings.HasPrefix(got["call_a2"], "[prunesched: output of exec_command"), "second cat of a.txt not replaced: %q", got["call_a2"])
	testutil.True(t, strings.Contains(got["call_a1"], "alpha line 30"), "first cat not whole: %q", got["call_a1"])
	got = outputsOf(t, byOutputs[4])
	testutil.True(t, strings.Contains(got["call_b1"], "b version 1") && strings.Contains(got["call_b2"], "b version 2"), "b.txt reads: %q / %q", got["call_b1"], got["call_b2"])

	items := b.items(t, events.DefaultTenant, session)
	a2 := itemByID(items, "call_a2")
	testutil.True(t, a2 != nil && a2.Pruned && a2.Applied.Rung == events.L1 && a2.Applied.Trigger == events.TriggerNeverSent, "call_a2: %+v", a2)
	for _, id := range []string{"call_a1", "call_b1", "call_b2"} {
		it := itemByID(items, id)
		testutil.True(t, it != nil && !it.Pruned, "%s: %+v", id, it)
	}
}

// TestOpenCodeCLI drives the real OpenCode (run, a custom
// @ai-sdk/openai-compatible provider, Chat Completions) through the proxy.
// Default policy, as for Claude Code.
func TestOpenCodeCLI(t *testing.T) {
	t.Parallel()
	bin := cliBinary(t, "opencode", "opencode")
	dir, _ := project(t)
	fs := &fileScript{dir: dir, change: func() {
		_ = os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b version 2, changed between turns\n"), 0o644)
	}}
	f := &fakeUpstream{}
	b := setup(t, policy.Default(), chatFake(f, func(req map[string]any) turn {
		if _, ok := req["tools"]; !ok {
			return turn{text: "Reading files"} // the title request
		}
		tn := fs.next(countItems(req, "messages", "role", "tool"), func(s string) string { return "call_" + s })
		if tn.tool != "" {
			tn.input = map[string]any{"filePath": tn.input["path"]}
		}
		return tn
	}), nil)
	cfg := fmt.Sprintf(`{"$schema":"https://opencode.ai/config.json",
 "provider":{"fake":{"npm":"@ai-sdk/openai-compatible","name":"Fake",
   "options":{"baseURL":"%s/v1","apiKey":"%s"},
   "models":{"fake-model":{"name":"Fake Model","tool_call":true}}}},
 "model":"fake/fake-model","small_model":"fake/fake-model","autoupdate":false,"share":"disabled"}`, b.url, secretKey)
	out, err := runCLI(t, dir, []string{"OPENCODE_CONFIG_CONTENT=" + cfg, "OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1"},
		bin, "run", "--format", "json", "read", "a.txt", "twice", "then", "b.txt", "twice")
	testutil.NoError(t, err)
	testutil.True(t, strings.Contains(string(out), `"done"`), "opencode output:\n%s", out)

	byOutputs := map[int][]byte{}
	session := ""
	for _, r := range f.requests() {
		var req map[string]any
		if json.Unmarshal(r.body, &req) != nil || req["tools"] == nil {
			continue
		}
		byOutputs[countItems(req, "messages", "role", "tool")] = r.body
		session = b.session(r.header.Get("X-Session-Id"), r.header)
	}
	testutil.True(t, !strings.HasPrefix(session, "-k") && byOutputs[2] != nil && byOutputs[4] != nil, "requests: %v session %q", keys(byOutputs), session)
	got := outputsOf(t, byOutputs[2])
	t.Logf("request after the second read: a1=%.90q a2=%.90q", got["call_a1"], got["call_a2"])
	testutil.True(t, strings.HasPrefix(got["call_a2"], "[prunesched: output of read"), "second read of a.txt not replaced: %q", got["call_a2"])
	testutil.True(t, strings.Contains(got["call_a1"], "alpha line 30"), "first read not whole: %q", got["call_a1"])
	got = outputsOf(t, byOutputs[4])
	testutil.True(t, strings.Contains(got["call_b1"], "b version 1") && strings.Contains(got["call_b2"], "b version 2"), "b.txt reads: %q / %q", got["call_b1"], got["call_b2"])

	items := b.items(t, events.DefaultTenant, session)
	a2 := itemByID(items, "call_a2")
	testutil.True(t, a2 != nil && a2.Pruned && a2.Applied.Rung == events.L0 && a2.Applied.Trigger == events.TriggerNeverSent, "call_a2: %+v", a2)
	for _, id := range []string{"call_a1", "call_b1", "call_b2"} {
		it := itemByID(items, id)
		testutil.True(t, it != nil && !it.Pruned, "%s: %+v", id, it)
	}
}

// countInputs counts input items (Responses) or messages (Chat
// Completions) of one type/role.
func countItems(req map[string]any, key, field, value string) int {
	n := 0
	list, _ := req[key].([]any)
	for _, it := range list {
		if m, _ := it.(map[string]any); m[field] == value {
			n++
		}
	}
	return n
}
