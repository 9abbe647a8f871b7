package agentsetup

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// originals are config files as users have them, one per agent.
var originals = map[string]string{
	"claude-code": "{\n  // not JSON, but tolerated\n  \"model\": \"opus\",\n  \"env\": {\"DISABLE_TELEMETRY\": \"1\"}\n}",
	"codex":       "# mine\nmodel = \"gpt-5.1-codex\"\nmodel_provider = \"openai\"\n[features]\nplugins = false",
	"opencode":    "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"model\": \"anthropic/claude-sonnet-4-5\"\n}\n",
}

// TestSetupUndo: per agent, setup keeps the original beside the file,
// a second setup changes nothing, a setup with another proxy keeps the
// first backup, and undo restores the original byte for byte (mode
// included) and removes the backup.
func TestSetupUndo(t *testing.T) {
	for _, name := range Agents() {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "conf")
			orig := originals[name]
			if err := os.WriteFile(path, []byte(orig), 0o640); err != nil {
				t.Fatal(err)
			}
			res, err := Setup(Target{Agent: name, File: path}, Options{Proxy: px}, false)
			if err != nil || res.Action != "written" || res.Backup != path+BackupSuffix || len(res.Changes) == 0 {
				t.Fatalf("setup: %+v, %v", res, err)
			}
			if got := read(t, res.Backup); got != orig {
				t.Fatalf("backup differs from the original:\n%s", got)
			}
			written := read(t, path)
			if !strings.Contains(written, px) {
				t.Fatalf("proxy not in the file:\n%s", written)
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
				t.Errorf("mode %v, want the original 0640", fi.Mode().Perm())
			}
			res, err = Setup(Target{Agent: name, File: path}, Options{Proxy: px}, false)
			if err != nil || res.Action != "unchanged" || read(t, path) != written {
				t.Fatalf("second setup: %+v, %v", res, err)
			}
			if _, err := Setup(Target{Agent: name, File: path}, Options{Proxy: "http://127.0.0.1:9999"}, false); err != nil {
				t.Fatal(err)
			}
			if got := read(t, path+BackupSuffix); got != orig {
				t.Fatal("a later setup replaced the backup")
			}
			res, err = Undo(Target{Agent: name, File: path}, false)
			if err != nil || res.Action != "restored" || res.Saved != "" {
				t.Fatalf("undo: %+v, %v", res, err)
			}
			if got := read(t, path); got != orig {
				t.Fatalf("undo did not restore the original:\n%q\nwant\n%q", got, orig)
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
				t.Errorf("mode after undo %v, want 0640", fi.Mode().Perm())
			}
			if exists(path + BackupSuffix) {
				t.Error("backup left after undo")
			}
			if _, err := Undo(Target{Agent: name, File: path}, false); err == nil || !strings.Contains(err.Error(), "nothing to undo") {
				t.Errorf("second undo: %v", err)
			}
		})
	}
}

// TestSetupCreatesAndUndoRemoves: with no config file, setup creates it
// (mode 0600) and undo removes it again.
func TestSetupCreatesAndUndoRemoves(t *testing.T) {
	for _, name := range Agents() {
		path := filepath.Join(t.TempDir(), "sub", "conf")
		res, err := Setup(Target{Agent: name, File: path}, Options{Proxy: px}, false)
		if err != nil || res.Action != "written" || !res.Created || res.Backup != "" || res.State != path+StateSuffix {
			t.Fatalf("%s setup: %+v, %v", name, res, err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: created file: %v %v", name, fi, err)
		}
		res, err = Undo(Target{Agent: name, File: path}, false)
		if err != nil || res.Action != "removed" || exists(path) || exists(path+StateSuffix) {
			t.Fatalf("%s undo: %+v, %v", name, res, err)
		}
	}
}

// TestUndoKeepsLaterChanges: a file changed after setup (here: a key the
// user added) is kept as .prunesched-undone before the original comes
// back; a file changed only by another setup is not.
func TestUndoKeepsLaterChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	orig := `{"model": "opus"}`
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Setup(Target{Agent: "claude-code", File: path}, Options{Proxy: px}, false); err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(read(t, path), `"model"`, `"theme": "dark", "model"`, 1)
	if err := os.WriteFile(path, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Undo(Target{Agent: "claude-code", File: path}, false)
	if err != nil || res.Saved != path+UndoneSuffix {
		t.Fatalf("undo: %+v, %v", res, err)
	}
	if read(t, path) != orig || read(t, res.Saved) != changed {
		t.Fatal("undo lost the changed file or did not restore the original")
	}
	// A second round keeps the first saved copy.
	if _, err := Setup(Target{Agent: "claude-code", File: path}, Options{Proxy: px}, false); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err = Undo(Target{Agent: "claude-code", File: path}, false)
	if err != nil || res.Saved != path+UndoneSuffix+"-2" || read(t, path+UndoneSuffix) != changed {
		t.Fatalf("second undo: %+v, %v", res, err)
	}
}

// TestDryRunWritesNothing: --print computes the file but touches nothing.
func TestDryRunWritesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	orig := originals["codex"]
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Setup(Target{Agent: "codex", File: path}, Options{Proxy: px}, true)
	if err != nil || res.Action != "would-write" || !strings.Contains(string(res.Content), px+"/v1") {
		t.Fatalf("dry setup: %+v, %v", res, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || read(t, path) != orig {
		t.Fatalf("dry run wrote something: %v", ents)
	}
	if _, err := Setup(Target{Agent: "codex", File: path}, Options{Proxy: px}, false); err != nil {
		t.Fatal(err)
	}
	res, err = Undo(Target{Agent: "codex", File: path}, true)
	if err != nil || res.Action != "would-restore" || string(res.Content) != orig || !exists(path+BackupSuffix) {
		t.Fatalf("dry undo: %+v, %v", res, err)
	}
}

// TestMalformedFileUntouched: a malformed file is reported with file,
// line and column, and neither it nor a backup is written.
func TestMalformedFileUntouched(t *testing.T) {
	for name, bad := range map[string]string{
		"claude-code": "{\n  \"model\": \"opus\"\n  \"env\": {}\n}\n",
		"codex":       "model = \"x\"\n[features\n",
		"opencode":    "{\n  \"provider\": \"anthropic\"\n}\n",
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "conf")
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Setup(Target{Agent: name, File: path}, Options{Proxy: px}, false)
		if err == nil || !strings.HasPrefix(err.Error(), path+":") || !strings.Contains(err.Error(), "left as it is") {
			t.Errorf("%s: err %v, want one naming %s:LINE:COL", name, err, path)
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 || read(t, path) != bad {
			t.Errorf("%s: the malformed file was touched or a backup written: %v", name, ents)
		}
	}
}

// TestSetupFollowsSymlink: a config file linked from a dotfiles repository
// is edited where it lives; the link stays a link.
func TestSetupFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "dotfiles-settings.json")
	link := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(real, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Setup(Target{Agent: "claude-code", File: link}, Options{Proxy: px}, false); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the link was replaced by a file")
	}
	if !strings.Contains(read(t, real), px) || !exists(real+BackupSuffix) {
		t.Fatal("the linked file was not edited")
	}
	if _, err := Undo(Target{Agent: "claude-code", File: link}, false); err != nil || read(t, real) != "{}" {
		t.Fatalf("undo through the link: %v", err)
	}
}

// TestTargets: where each agent's files are, with the CLIs' own
// variables, OpenCode's winning file, and Claude Code's MCP file only
// when an MCP server is registered.
func TestTargets(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	mcp := Options{MCP: []string{"/bin/prunesched", "mcp"}}
	check := func(name string, o Options, want ...string) {
		t.Helper()
		ts, err := Targets(name, home, getenv, o, false)
		var got []string
		for i, tg := range ts {
			if tg.Agent != name || tg.Part != i {
				t.Errorf("%s: target %+v", name, tg)
			}
			got = append(got, tg.File)
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	check("claude-code", Options{}, filepath.Join(home, ".claude", "settings.json"))
	check("claude-code", mcp, filepath.Join(home, ".claude", "settings.json"), filepath.Join(home, ".claude.json"))
	check("codex", mcp, filepath.Join(home, ".codex", "config.toml"))
	check("opencode", mcp, filepath.Join(home, ".config", "opencode", "opencode.json"))
	env["CLAUDE_CONFIG_DIR"], env["CODEX_HOME"], env["XDG_CONFIG_HOME"] = "/c", "/x", filepath.Join(home, "xdg")
	check("claude-code", mcp, "/c/settings.json", "/c/.claude.json")
	check("codex", Options{}, "/x/config.toml")
	oc := filepath.Join(home, "xdg", "opencode")
	if err := os.MkdirAll(oc, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "opencode.jsonc"} {
		if err := os.WriteFile(filepath.Join(oc, f), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	check("opencode", Options{}, filepath.Join(oc, "opencode.jsonc")) // loaded last, wins
	// Claude Code's legacy global file, when there and not empty, wins.
	env["CLAUDE_CONFIG_DIR"] = filepath.Join(home, "cc")
	legacy := filepath.Join(home, "cc", ".config.json")
	if err := os.MkdirAll(filepath.Dir(legacy), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(legacy, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	check("claude-code", mcp, filepath.Join(home, "cc", "settings.json"), filepath.Join(home, "cc", ".claude.json"))
	if err := os.WriteFile(legacy, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	check("claude-code", mcp, filepath.Join(home, "cc", "settings.json"), legacy)
	// Undo looks at every file, the MCP one too.
	if ts, err := Targets("claude-code", home, getenv, Options{}, true); err != nil || len(ts) != 2 {
		t.Errorf("undo targets: %+v, %v", ts, err)
	}
	if _, err := Targets("aider", home, getenv, Options{}, false); err == nil {
		t.Error("unknown agent accepted")
	}
}
