package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/internal/agentsetup"
)

// TestSetupCommand: the command line of setup: write, idempotent rerun,
// --print, --json, --undo byte for byte, and the errors.
func TestSetupCommand(t *testing.T) {
	home := t.TempDir()
	environ := map[string]string{"HOME": home}
	settings := filepath.Join(home, ".claude", "settings.json")
	orig := "{\n  \"model\": \"opus\"\n}\n"
	writeFile(t, settings, orig)

	code, out, errOut := runTEnv(t, environ, "setup", "claude-code", "--print")
	if code != 0 || !strings.Contains(out, `"ANTHROPIC_BASE_URL": "http://127.0.0.1:8788"`) || !strings.Contains(errOut, "would-write") ||
		!strings.Contains(out, "==> "+settings+" <==\n") || !strings.Contains(out, `"mcpServers"`) {
		t.Fatalf("--print: %d\n%s\n%s", code, out, errOut)
	}
	if got, _ := os.ReadFile(settings); string(got) != orig {
		t.Fatal("--print wrote the file")
	}
	code, out, _ = runTEnv(t, environ, "setup", "claude-code")
	if code != 0 || !strings.Contains(out, "wrote "+settings) || !strings.Contains(out, "prunesched proxy --upstream https://api.anthropic.com") {
		t.Fatalf("setup: %d\n%s", code, out)
	}
	code, out, _ = runTEnv(t, environ, "setup", "claude-code")
	if code != 0 || !strings.Contains(out, "nothing changed") {
		t.Fatalf("second setup: %d\n%s", code, out)
	}
	code, out, _ = runTEnv(t, environ, "setup", "--json", "claude-code", "--proxy", "http://127.0.0.1:9999/")
	var res struct {
		Agent, Proxy string
		MCPCommand   []string `json:"mcp_command"`
		Files        []struct {
			Action, File, Backup, State string
			Changes                     []struct{ Key, Old, New string }
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Files) != 2 || res.Proxy != "http://127.0.0.1:9999" || len(res.MCPCommand) != 2 || res.MCPCommand[1] != "mcp" {
		t.Fatalf("--json: %d %+v\n%s", code, res, out)
	}
	if f := res.Files[0]; f.Action != "written" || len(f.Changes) != 1 || f.Changes[0].Old != "http://127.0.0.1:8788" ||
		f.Backup != settings+".prunesched-backup" || f.State != settings+".prunesched-setup" {
		t.Fatalf("--json settings.json: %+v", f)
	}
	if f := res.Files[1]; f.Action != "unchanged" || f.File != filepath.Join(home, ".claude.json") {
		t.Fatalf("--json .claude.json: %+v", f)
	}
	code, out, _ = runTEnv(t, environ, "setup", "claude-code", "--undo")
	if code != 0 || !strings.Contains(out, "restored "+settings) || !strings.Contains(out, "removed "+filepath.Join(home, ".claude.json")) {
		t.Fatalf("--undo: %d\n%s", code, out)
	}
	if got, _ := os.ReadFile(settings); string(got) != orig {
		t.Fatalf("undo: %q, want %q", got, orig)
	}
	// Undo twice is no error, as setup twice is none.
	if code, out, errOut := runTEnv(t, environ, "setup", "claude-code", "--undo"); code != 0 || !strings.Contains(out, "nothing to undo") || errOut != "" {
		t.Fatalf("second --undo: %d %s %s", code, out, errOut)
	}

	// A malformed file: exit 1, its line named, nothing written.
	bad := "{\n  \"model\": \"opus\",\n  \"env\": [\n}\n"
	writeFile(t, settings, bad)
	code, _, errOut = runTEnv(t, environ, "setup", "claude-code")
	if code != 1 || !strings.Contains(errOut, settings+":4:1:") {
		t.Fatalf("malformed: %d %s", code, errOut)
	}
	if got, _ := os.ReadFile(settings); string(got) != bad {
		t.Fatal("malformed file changed")
	}

	for _, args := range [][]string{{"setup"}, {"setup", "aider"}, {"setup", "codex", "--proxy", "127.0.0.1:8788"}, {"setup", "codex", "opencode"},
		{"setup", "codex", "--no-mcp", "--mcp-command", "/bin/true"}, {"setup", "codex", "--mcp-command", "bin/prunesched"},
		{"setup", "codex", "--mcp-command", filepath.Join(home, "missing")}} {
		if code, _, _ := runTEnv(t, environ, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code, _, errOut := runTEnv(t, nil, "setup", "codex"); code != 2 || !strings.Contains(errOut, "--home") {
		t.Errorf("no HOME: %d %s", code, errOut)
	}
}

// TestServeAndProxySideBySide: serve and proxy, each with its default data
// directory (derived from $XDG_DATA_HOME), run at the same time: their
// data directories, locks and API ports differ. The control: a proxy
// given serve's data directory (the default both shared before) is
// refused by the lock.
func TestServeAndProxySideBySide(t *testing.T) {
	t.Parallel()
	// Ports: the defaults are distinct; the test binds free ports, since
	// the defaults may be taken on the machine running it.
	ports := map[string]string{"serve API": defaultServeListen, "proxy API": defaultProxyAPIListen, "proxy": defaultProxyListen}
	seen := map[string]string{}
	for what, addr := range ports {
		if other, ok := seen[addr]; ok {
			t.Fatalf("%s and %s share the default address %s", what, other, addr)
		}
		seen[addr] = what
	}
	environ := map[string]string{"XDG_DATA_HOME": t.TempDir(), "HOME": t.TempDir()}
	getenv := func(k string) string { return environ[k] }
	serveData, proxyData := defaultDataDir(getenv), defaultProxyDataDir(getenv)
	if serveData == proxyData {
		t.Fatalf("serve and proxy share the default data directory %s", serveData)
	}

	up := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(up.Close)
	serveLine, _ := startCommand(t, environ, "prunesched serving on ", "serve", "--listen", "127.0.0.1:0")
	proxyLine, _ := startCommand(t, environ, "prunesched proxy on ", "proxy", "--upstream", up.URL, "--listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0")
	serveAPI := strings.Fields(serveLine)[3]
	f := strings.Fields(proxyLine)
	proxyAPI := strings.TrimSuffix(f[len(f)-1], ")")
	for _, u := range []string{serveAPI, proxyAPI} {
		resp, err := http.Get(u + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s/readyz: %d", u, resp.StatusCode)
		}
	}
	for _, d := range []string{serveData, proxyData} {
		if _, err := os.Stat(filepath.Join(d, store.LockFile)); err != nil {
			t.Errorf("no lock in %s: %v", d, err)
		}
	}
	if !strings.Contains(serveLine, serveData) {
		t.Errorf("serve does not use its default data directory %s: %s", serveData, serveLine)
	}

	// The control: the shared directory is refused while serve holds it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errb := newLines(), &syncBuf{}
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, &env{stdout: out, stderr: errb, getenv: getenv},
			[]string{"proxy", "--upstream", up.URL, "--listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0", "--data", serveData})
	}()
	select {
	case code := <-exited:
		if code != 1 || !strings.Contains(errb.String(), "in use by another prunesched process") {
			t.Fatalf("proxy on serve's directory: exit %d: %s", code, errb.String())
		}
	case line := <-out.ch:
		cancel()
		<-exited
		t.Fatalf("a proxy started on serve's data directory: %s", line)
	}
}

// fakeBinary writes an executable file standing for an installed
// prunesched (never run: the tests only register it).
func fakeBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bin", "prunesched")
	writeFile(t, p, "#!/bin/sh\nexit 1\n")
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// setupHomes are, per agent, config files as users have them (relative
// to HOME), and where the MCP server lands.
var setupHomes = map[string]struct {
	files  map[string]string
	server string // the file holding the MCP server
}{
	"claude-code": {map[string]string{
		".claude/settings.json": "{\n  // mine\n  \"model\": \"opus\",\n}\n",
		".claude.json":          "{\n  \"numStartups\": 7,\n  \"mcpServers\": {\n    \"docs\": {\"type\": \"stdio\", \"command\": \"docs\", \"args\": [], \"env\": {}}\n  }\n}\n",
	}, ".claude.json"},
	"codex": {map[string]string{
		".codex/config.toml": "# mine\nmodel = \"gpt-5.1-codex\"\n\n[mcp_servers.docs]\ncommand = \"docs\"\n",
	}, ".codex/config.toml"},
	"opencode": {map[string]string{
		".config/opencode/opencode.json": "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"mcp\": {\"docs\": {\"type\": \"local\", \"command\": [\"docs\"]}},\n}\n",
	}, ".config/opencode/opencode.json"},
}

// TestSetupMCPCommand: for every agent, setup registers the MCP server
// (--mcp-command) next to the proxy, a second setup changes nothing, undo
// restores every file byte for byte, and --no-mcp leaves the MCP file
// alone.
func TestSetupMCPCommand(t *testing.T) {
	bin := fakeBinary(t)
	for _, name := range []string{"claude-code", "codex", "opencode"} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			environ := map[string]string{"HOME": home}
			h := setupHomes[name]
			for f, c := range h.files {
				writeFile(t, filepath.Join(home, f), c)
			}
			code, out, errOut := runTEnv(t, environ, "setup", name, "--mcp-command", bin)
			if code != 0 || !strings.Contains(out, "MCP server \"prunesched\": "+bin+" mcp") || errOut != "" {
				t.Fatalf("setup: %d\n%s\n%s", code, out, errOut)
			}
			server, err := os.ReadFile(filepath.Join(home, h.server))
			if err != nil || !strings.Contains(string(server), bin) || !strings.Contains(string(server), "prunesched") || !strings.Contains(string(server), "docs") {
				t.Fatalf("%s after setup (%v):\n%s", h.server, err, server)
			}
			snapshot := func() map[string]string {
				m := map[string]string{}
				for f := range h.files {
					b, _ := os.ReadFile(filepath.Join(home, f))
					m[f] = string(b)
				}
				return m
			}
			after := snapshot()
			code, out, _ = runTEnv(t, environ, "setup", name, "--mcp-command", bin)
			if code != 0 || strings.Contains(out, "wrote") || !reflect.DeepEqual(snapshot(), after) {
				t.Fatalf("second setup: %d\n%s", code, out)
			}
			code, out, _ = runTEnv(t, environ, "setup", name, "--undo")
			if code != 0 || strings.Contains(out, "changed since setup") {
				t.Fatalf("undo: %d\n%s", code, out)
			}
			if got := snapshot(); !reflect.DeepEqual(got, h.files) {
				t.Fatalf("undo: got %q, want %q", got, h.files)
			}
			ents, _ := filepath.Glob(filepath.Join(home, "*", "*prunesched-*"))
			more, _ := filepath.Glob(filepath.Join(home, "*prunesched-*"))
			if len(ents)+len(more) > 0 {
				t.Fatalf("left after undo: %v %v", ents, more)
			}

			// --no-mcp: the proxy only.
			code, out, _ = runTEnv(t, environ, "setup", name, "--no-mcp")
			if code != 0 || strings.Contains(out, "MCP server") {
				t.Fatalf("--no-mcp: %d\n%s", code, out)
			}
			if b, _ := os.ReadFile(filepath.Join(home, h.server)); strings.Contains(string(b), bin) {
				t.Fatalf("--no-mcp registered the server:\n%s", b)
			}
			if code, out, errOut := runTEnv(t, environ, "setup", name, "--undo"); code != 0 || !reflect.DeepEqual(snapshot(), h.files) {
				t.Fatalf("undo after --no-mcp: %d\n%s%s", code, out, errOut)
			}
		})
	}
}

// TestSetupMCPDefaultCommand: without --mcp-command the running binary is
// registered; a temporary build (go run, or this test binary) draws a
// warning naming the flag.
func TestSetupMCPDefaultCommand(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	code, out, errOut := runTEnv(t, map[string]string{"HOME": home}, "setup", "codex", "--print")
	if code != 0 || !strings.Contains(out, "command = \""+exe+"\"\nargs = [\"mcp\"]") {
		t.Fatalf("setup: %d\n%s\n%s", code, out, errOut)
	}
	warned := strings.Contains(errOut, "temporary build") && strings.Contains(errOut, "--mcp-command PATH")
	if warned != agentsetup.TemporaryBuild(exe) {
		t.Fatalf("warning %v for %s:\n%s", warned, exe, errOut)
	}
	for _, p := range []string{"/tmp/go-build123/b001/exe/prunesched", "/root/.cache/go-build/ab/cd-d/prunesched"} {
		if !agentsetup.TemporaryBuild(p) {
			t.Errorf("%s is not taken for a temporary build", p)
		}
	}
	if agentsetup.TemporaryBuild("/usr/local/bin/prunesched") || agentsetup.TemporaryBuild("/home/u/go/bin/prunesched") {
		t.Error("an installed binary is taken for a temporary build")
	}
}

// TestSetupUndoLeavesNoDirs: setup into a home without the agent's config
// directory creates it; undo removes what setup created, the directory
// included, and a second undo exits 0 saying there is nothing to undo. A
// directory the user has put something into since stays.
func TestSetupUndoLeavesNoDirs(t *testing.T) {
	for _, name := range []string{"codex", "opencode"} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			environ := map[string]string{"HOME": home}
			if code, out, errOut := runTEnv(t, environ, "setup", name, "--no-mcp"); code != 0 {
				t.Fatalf("setup: %d %s %s", code, out, errOut)
			}
			created, _ := os.ReadDir(home)
			if len(created) == 0 {
				t.Fatal("setup created nothing under the home")
			}
			if code, out, errOut := runTEnv(t, environ, "setup", name, "--undo"); code != 0 {
				t.Fatalf("undo: %d %s %s", code, out, errOut)
			}
			if left, _ := os.ReadDir(home); len(left) != 0 {
				t.Fatalf("left after undo: %v", left)
			}
			code, out, errOut := runTEnv(t, environ, "setup", name, "--undo")
			if code != 0 || !strings.Contains(out, "nothing to undo") || errOut != "" {
				t.Fatalf("second undo: %d %q %q", code, out, errOut)
			}

			// A file of the user's in the created directory keeps it.
			if code, _, errOut := runTEnv(t, environ, "setup", name, "--no-mcp"); code != 0 {
				t.Fatalf("setup again: %s", errOut)
			}
			var dir string
			_ = filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && strings.HasSuffix(p, ".prunesched-setup") {
					dir = filepath.Dir(p)
				}
				return nil
			})
			mine := filepath.Join(dir, "mine.txt")
			writeFile(t, mine, "keep me\n")
			if code, _, errOut := runTEnv(t, environ, "setup", name, "--undo"); code != 0 {
				t.Fatalf("undo again: %s", errOut)
			}
			if b, err := os.ReadFile(mine); err != nil || string(b) != "keep me\n" {
				t.Fatalf("undo touched the user's file in %s: %v", dir, err)
			}
		})
	}
}
