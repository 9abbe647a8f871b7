//go:build clis

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/internal/agentclis"
	"github.com/prunesched/prunesched/internal/testutil"
)

// setupCLITimeout bounds every CLI run.
const setupCLITimeout = 90 * time.Second

// agentRun is one real-CLI run configured only by 'prunesched setup'.
type agentRun struct {
	agent      string // setup's agent name
	sub, bin   string // where .ci/setup-clis.sh installs the CLI
	seed       func(home string)
	env        []string // dummy keys and offline switches only
	args       []string
	prompt     string // a phrase of the prompt the bundle must hold
	sessionHdr string // the header carrying the CLI's session id
}

// runThroughSetup starts a fake model and 'prunesched proxy' in front of
// it, runs 'prunesched setup AGENT --home HOME --proxy URL', then runs the
// real CLI with that HOME and no variable pointing at the proxy, and
// checks that its requests went through the proxy into the log.
func runThroughSetup(t *testing.T, a agentRun) {
	bin := agentclis.Binary(t, a.sub, a.bin)
	fake := &fakeModel{}
	up := httptest.NewServer(fake)
	t.Cleanup(up.Close)
	line, proxyErr := startCommand(t, nil, "prunesched proxy on ", "proxy", "--upstream", up.URL, "--listen", "127.0.0.1:0",
		"--api-listen", "127.0.0.1:0", "--data", t.TempDir(), "--log-level", "warn")
	// "prunesched proxy on http://ADDR -> UPSTREAM (API on http://ADDR)"
	f := strings.Fields(line)
	proxyURL, apiURL := f[3], strings.TrimSuffix(f[len(f)-1], ")")

	home := t.TempDir()
	if a.seed != nil {
		a.seed(home)
	}
	homeEnv := map[string]string{"HOME": home}
	// --no-mcp: registered, the MCP server would be this test binary,
	// which the CLI would start (TestSetupMCPListedByCLIs checks the
	// registration).
	if code, out, errOut := runTEnv(t, homeEnv, "setup", a.agent, "--proxy", proxyURL, "--no-mcp"); code != 0 {
		t.Fatalf("setup: exit %d: %s%s", code, out, errOut)
	} else {
		t.Logf("setup:\n%s", out)
	}

	out, stderr, err := runCLI(t, bin, home, a.env, a.args)
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr (tail):\n%s\nproxy log:\n%s", a.bin, err, out, tailStr(stderr, 3000), proxyErr.String())
	}
	if !strings.Contains(string(out), "done") {
		t.Fatalf("%s did not print the fake model's answer:\n%s", a.bin, out)
	}

	// The fake model is known to the proxy alone: whatever reached it went
	// through the proxy.
	reqs := fake.requests()
	if len(reqs) == 0 {
		t.Fatal("no request reached the model")
	}
	cliSession := ""
	for _, r := range reqs {
		if v := r.Header.Get(a.sessionHdr); v != "" {
			cliSession = v
		}
	}
	t.Logf("%d request(s) through the proxy, %s %q", len(reqs), a.sessionHdr, cliSession)

	// The proxy recorded the session: its id carries the CLI's, and its
	// bundle holds the prompt. The proxy writes a request's facts to the
	// log after forwarding it, so a CLI that exits at its answer can ask
	// before they land: wait for them.
	var session string
	testutil.Eventually(t, func() error {
		code, ids, errOut := runT(t, "sessions", "--ids", "--server", apiURL)
		if code != 0 {
			t.Fatalf("sessions: %d %s", code, errOut)
		}
		for _, id := range strings.Fields(ids) {
			if cliSession != "" && strings.HasPrefix(id, cliSession) {
				session = id
				return nil
			}
		}
		return fmt.Errorf("no session of the proxy's log carries the CLI's session id %q: %q", cliSession, ids)
	})
	code, bundle, errOut := runT(t, "bundle", session, "--format", "text", "--server", apiURL)
	if code != 0 || !strings.Contains(bundle, a.prompt) {
		t.Fatalf("bundle of %s (exit %d, %s) does not hold the prompt %q:\n%s", session, code, errOut, a.prompt, tailStr(bundle, 2000))
	}
}

// runCLI runs a real CLI in the throwaway home with env added, in a
// directory of its own, and returns its stdout and stderr.
func runCLI(t *testing.T, bin, home string, env, args []string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), setupCLITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(agentclis.HomeEnv(home), env...)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	return string(out), errb.String(), err
}

func tailStr(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestSetupClaudeCodeCLI: real Claude Code, pointed at the proxy only by
// the env block 'setup claude-code' wrote into ~/.claude/settings.json.
func TestSetupClaudeCodeCLI(t *testing.T) {
	t.Parallel()
	runThroughSetup(t, agentRun{
		agent: "claude-code", sub: "claude-code", bin: "claude",
		seed: func(home string) {
			writeFile(t, filepath.Join(home, ".claude", "settings.json"), "{\n  \"permissions\": {\"allow\": [\"Read\"]}\n}\n")
		},
		env: []string{"ANTHROPIC_API_KEY=sk-ant-setup-test", "DISABLE_TELEMETRY=1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"},
		args:   []string{"-p", "Answer with the word done through setup.", "--output-format", "json"},
		prompt: "done through setup", sessionHdr: "X-Claude-Code-Session-Id",
	})
}

// TestSetupCodexCLI: real Codex, pointed at the proxy only by the provider
// 'setup codex' added to ~/.codex/config.toml (the user's own settings,
// comments and model_provider line kept or commented out).
func TestSetupCodexCLI(t *testing.T) {
	t.Parallel()
	runThroughSetup(t, agentRun{
		agent: "codex", sub: "codex", bin: "codex",
		seed: func(home string) {
			writeFile(t, filepath.Join(home, ".codex", "config.toml"), `# the user's own codex config
model = "fake-model"
model_provider = "openai"   # setup comments this out
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false
`)
		},
		env:    []string{"OPENAI_API_KEY=sk-setup-test"},
		args:   []string{"exec", "--skip-git-repo-check", "--json", "Answer with the word done through setup."},
		prompt: "done through setup", sessionHdr: "Session-Id",
	})
}

// TestSetupOpenCodeCLI: real OpenCode on its built-in anthropic provider,
// pointed at the proxy only by the options.baseURL 'setup opencode' wrote
// into ~/.config/opencode/opencode.json.
func TestSetupOpenCodeCLI(t *testing.T) {
	t.Parallel()
	runThroughSetup(t, agentRun{
		agent: "opencode", sub: "opencode", bin: "opencode",
		seed: func(home string) {
			writeFile(t, filepath.Join(home, ".config", "opencode", "opencode.json"), `{
  "$schema": "https://opencode.ai/config.json",
  "model": "anthropic/claude-sonnet-4-5",
  "small_model": "anthropic/claude-sonnet-4-5",
  "autoupdate": false,
  "share": "disabled"
}
`)
		},
		env: []string{"ANTHROPIC_API_KEY=sk-ant-setup-test", "OPENCODE_DISABLE_MODELS_FETCH=1",
			"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1"},
		args:   []string{"run", "--format", "json", "answer", "with", "the", "word", "done", "through", "setup"},
		prompt: "done through setup", sessionHdr: "X-Session-Id",
	})
}

// mcpListRun is how one real CLI lists the MCP servers of its config.
type mcpListRun struct {
	agent, sub, bin string
	args            []string
	env             []string
	// listed reports whether the output (stdout) lists the server.
	listed func(out string) bool
}

// TestSetupMCPListedByCLIs: each real CLI, asked to list its MCP servers
// in a home set up only by 'prunesched setup', lists prunesched (with the
// command setup registered) after setup and not after --undo. The
// registered command is a stand-in that exits at once: the real MCP server
// is not started; a CLI that tries to connect reports it failed, which is
// fine as long as it lists the server.
func TestSetupMCPListedByCLIs(t *testing.T) {
	bin := fakeBinary(t)
	runs := []mcpListRun{
		{agent: "claude-code", sub: "claude-code", bin: "claude", args: []string{"mcp", "list"},
			env: []string{"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"},
			// "prunesched: BIN mcp - ✘ Failed to connect"
			listed: func(out string) bool { return strings.Contains(out, "prunesched: "+bin+" mcp") }},
		{agent: "codex", sub: "codex", bin: "codex", args: []string{"mcp", "list", "--json"},
			listed: func(out string) bool {
				var servers []struct {
					Name      string
					Transport struct {
						Command string
						Args    []string
					}
				}
				if err := json.Unmarshal([]byte(out), &servers); err != nil {
					return false
				}
				for _, s := range servers {
					if s.Name == "prunesched" && s.Transport.Command == bin && strings.Join(s.Transport.Args, " ") == "mcp" {
						return true
					}
				}
				return false
			}},
		{agent: "opencode", sub: "opencode", bin: "opencode", args: []string{"mcp", "list"},
			env: []string{"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1"},
			// "●  ✗ prunesched failed ... BIN mcp"
			listed: func(out string) bool { return strings.Contains(out, "prunesched") && strings.Contains(out, bin+" mcp") }},
	}
	for _, r := range runs {
		t.Run(r.agent, func(t *testing.T) {
			t.Parallel()
			cli := agentclis.Binary(t, r.sub, r.bin)
			home := t.TempDir()
			for f, c := range setupHomes[r.agent].files {
				writeFile(t, filepath.Join(home, f), c)
			}
			list := func() string {
				t.Helper()
				out, stderr, err := runCLI(t, cli, home, r.env, r.args)
				if err != nil {
					t.Fatalf("%s %v: %v\n%s\nstderr:\n%s", r.bin, r.args, err, out, tailStr(stderr, 3000))
				}
				return out
			}
			homeEnv := map[string]string{"HOME": home}
			if code, out, errOut := runTEnv(t, homeEnv, "setup", r.agent, "--mcp-command", bin); code != 0 {
				t.Fatalf("setup: %d %s%s", code, out, errOut)
			}
			if out := list(); !r.listed(out) {
				t.Fatalf("after setup, %s %v does not list prunesched:\n%s", r.bin, r.args, out)
			}
			if code, out, errOut := runTEnv(t, homeEnv, "setup", r.agent, "--undo"); code != 0 {
				t.Fatalf("undo: %d %s%s", code, out, errOut)
			} else {
				t.Logf("undo:\n%s", out)
			}
			if out := list(); r.listed(out) || strings.Contains(out, "prunesched") {
				t.Fatalf("after undo, %s %v still lists prunesched:\n%s", r.bin, r.args, out)
			}
		})
	}
}
