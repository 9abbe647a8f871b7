package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events/store"
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
	if code != 0 || !strings.Contains(out, `"ANTHROPIC_BASE_URL": "http://127.0.0.1:8788"`) || !strings.Contains(errOut, "would-write") {
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
		Action, File, Backup, Proxy string
		Changes                     []struct{ Key, Old, New string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Action != "written" || res.Proxy != "http://127.0.0.1:9999" ||
		len(res.Changes) != 1 || res.Changes[0].Old != "http://127.0.0.1:8788" || res.Backup != settings+".prunesched-backup" {
		t.Fatalf("--json: %d %+v\n%s", code, res, out)
	}
	code, out, _ = runTEnv(t, environ, "setup", "claude-code", "--undo")
	if code != 0 || !strings.Contains(out, "restored "+settings) {
		t.Fatalf("--undo: %d\n%s", code, out)
	}
	if got, _ := os.ReadFile(settings); string(got) != orig {
		t.Fatalf("undo: %q, want %q", got, orig)
	}
	if code, _, errOut := runTEnv(t, environ, "setup", "claude-code", "--undo"); code != 1 || !strings.Contains(errOut, "nothing to undo") {
		t.Fatalf("second --undo: %d %s", code, errOut)
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

	for _, args := range [][]string{{"setup"}, {"setup", "aider"}, {"setup", "codex", "--proxy", "127.0.0.1:8788"}, {"setup", "codex", "opencode"}} {
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
