package agentsetup

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

const exe = "/opt/prunesched/bin/prunesched"

var withMCP = Options{Proxy: px, MCP: []string{exe, "mcp"}}

// claudeJSON is Claude Code's ~/.claude.json target.
var claudeJSON = Target{Agent: "claude-code", Part: 1}

// TestEditMCP: the exact bytes setup writes to register the MCP server,
// per agent, in the shape each CLI's own 'mcp add' writes; a second edit
// changes nothing.
func TestEditMCP(t *testing.T) {
	claudeServer := "\"prunesched\": {\n      \"type\": \"stdio\",\n      \"command\": \"" + exe + "\",\n      \"args\": [\n        \"mcp\"\n      ],\n      \"env\": {}\n    }"
	cases := []struct {
		name      string
		target    Target
		src, want string
	}{
		{"claude no file", claudeJSON, "", "{\n  \"mcpServers\": {\n    " + claudeServer + "\n  }\n}\n"},
		{"claude other servers kept", claudeJSON,
			"{\n  \"numStartups\": 3,\n  \"mcpServers\": {\n    \"other\": {\"type\": \"stdio\", \"command\": \"x\"}\n  }\n}",
			"{\n  \"numStartups\": 3,\n  \"mcpServers\": {\n    " + claudeServer + ",\n    \"other\": {\"type\": \"stdio\", \"command\": \"x\"}\n  }\n}"},
		{"claude settings.json gets no MCP", Target{Agent: "claude-code"}, "{}",
			"{\n  \"env\": {\n    \"ANTHROPIC_BASE_URL\": \"http://127.0.0.1:8788\"\n  }\n}"},
		{"opencode no file", Target{Agent: "opencode"}, "",
			"{\n  \"provider\": {\n    \"anthropic\": {\n      \"options\": {\n        \"baseURL\": \"http://127.0.0.1:8788/v1\"\n      }\n    },\n    \"openai\": {\n      \"options\": {\n        \"baseURL\": \"http://127.0.0.1:8788/v1\"\n      }\n    }\n  },\n" +
				"  \"mcp\": {\n    \"prunesched\": {\n      \"type\": \"local\",\n      \"command\": [\n        \"" + exe + "\",\n        \"mcp\"\n      ],\n      \"enabled\": true\n    }\n  }\n}\n"},
		{"opencode jsonc, mcp block and trailing commas kept", Target{Agent: "opencode"},
			"{\n  \"provider\": {\"anthropic\": {\"options\": {\"baseURL\": \"http://127.0.0.1:8788/v1\"}}, \"openai\": {\"options\": {\"baseURL\": \"http://127.0.0.1:8788/v1\"}}},\n  \"theme\": \"x\", // mine\n}\n",
			"{\n  \"provider\": {\"anthropic\": {\"options\": {\"baseURL\": \"http://127.0.0.1:8788/v1\"}}, \"openai\": {\"options\": {\"baseURL\": \"http://127.0.0.1:8788/v1\"}}},\n" +
				"  \"mcp\": {\n    \"prunesched\": {\n      \"type\": \"local\",\n      \"command\": [\n        \"" + exe + "\",\n        \"mcp\"\n      ],\n      \"enabled\": true\n    }\n  },\n  \"theme\": \"x\", // mine\n}\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, changes, err := Edit(c.target, []byte(c.src), withMCP)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("got\n%s\nwant\n%s", got, c.want)
			}
			if len(changes) == 0 {
				t.Error("no change reported")
			}
			again, changes, err := Edit(c.target, got, withMCP)
			if err != nil || string(again) != string(got) || len(changes) != 0 {
				t.Errorf("second edit: %v %+v\n%s", err, changes, again)
			}
		})
	}
	// Another binary path replaces the command in place.
	first, _, _ := Edit(claudeJSON, nil, withMCP)
	moved, changes, err := Edit(claudeJSON, first, Options{Proxy: px, MCP: []string{"/usr/bin/prunesched", "mcp"}})
	if err != nil || strings.Contains(string(moved), exe) || len(changes) != 1 || !strings.Contains(changes[0].Old, exe) {
		t.Errorf("moved binary: %v %+v\n%s", err, changes, moved)
	}
}

// TestEditCodexMCP: the [mcp_servers.prunesched] table goes into the
// managed block at the end; a rerun with --no-mcp keeps it; a table of the
// user's own by that name is refused.
func TestEditCodexMCP(t *testing.T) {
	src := "# mine\nmodel = \"x\"\n\n[mcp_servers.docs]\ncommand = \"docs-server\"\n"
	got, changes, err := Edit(Target{Agent: "codex"}, []byte(src), withMCP)
	if err != nil {
		t.Fatal(err)
	}
	wantEnd := "wire_api = \"responses\"\n\n[mcp_servers.prunesched]\ncommand = \"" + exe + "\"\nargs = [\"mcp\"]\n" + codexEnd
	if !strings.HasSuffix(string(got), wantEnd) || !strings.Contains(string(got), src) || len(changes) != 3 {
		t.Fatalf("changes %+v, file:\n%s", changes, got)
	}
	var doc struct {
		MCPServers map[string]struct {
			Command string   `toml:"command"`
			Args    []string `toml:"args"`
		} `toml:"mcp_servers"`
	}
	if err := toml.Unmarshal(got, &doc); err != nil || doc.MCPServers["prunesched"].Command != exe || doc.MCPServers["docs"].Command != "docs-server" {
		t.Fatalf("parsed: %+v, %v", doc, err)
	}
	for _, o := range []Options{withMCP, {Proxy: px}} {
		again, changes, err := Edit(Target{Agent: "codex"}, got, o)
		if err != nil || string(again) != string(got) || len(changes) != 0 {
			t.Errorf("rerun with %+v: %v %+v\n%s", o, err, changes, again)
		}
	}
	_, _, err = Edit(Target{Agent: "codex"}, []byte("[mcp_servers.prunesched]\ncommand = \"mine\"\n"), withMCP)
	if err == nil || !strings.Contains(err.Error(), "--no-mcp") {
		t.Errorf("user's own server: %v", err)
	}
	if _, _, err := Edit(Target{Agent: "codex"}, []byte("[mcp_servers.prunesched]\ncommand = \"mine\"\n"), Options{Proxy: px}); err != nil {
		t.Errorf("user's own server, no MCP asked: %v", err)
	}
}

// TestSetupUndoMCP: per agent, in a home as the CLIs lay it out, setup
// writes the proxy and the MCP server into every file of the agent,
// setup twice changes nothing, and undo restores every file byte for byte
// (or removes the ones setup created).
func TestSetupUndoMCP(t *testing.T) {
	seeds := map[string]map[string]string{
		"claude-code": {".claude/settings.json": originals["claude-code"], ".claude.json": "{\n  \"numStartups\": 4,\n  \"mcpServers\": {}\n}"},
		"codex":       {".codex/config.toml": originals["codex"]},
		"opencode":    {".config/opencode/opencode.json": originals["opencode"]},
	}
	for _, name := range Agents() {
		for _, seeded := range []bool{true, false} {
			t.Run(name+map[bool]string{true: " seeded", false: " no files"}[seeded], func(t *testing.T) {
				home := t.TempDir()
				if seeded {
					for f, content := range seeds[name] {
						p := filepath.Join(home, f)
						if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
							t.Fatal(err)
						}
						if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
							t.Fatal(err)
						}
					}
				}
				getenv := func(string) string { return "" }
				targets, err := Targets(name, home, getenv, withMCP, false)
				if err != nil {
					t.Fatal(err)
				}
				written := map[string]string{}
				hasServer := false
				for _, tg := range targets {
					res, err := Setup(tg, withMCP, false)
					if err != nil || res.Action != "written" {
						t.Fatalf("setup %s: %+v, %v", tg.File, res, err)
					}
					written[tg.File] = read(t, tg.File)
					hasServer = hasServer || strings.Contains(written[tg.File], exe)
				}
				if !hasServer {
					t.Fatal("no file holds the MCP server")
				}
				for _, tg := range targets {
					res, err := Setup(tg, withMCP, false)
					if err != nil || res.Action != "unchanged" || read(t, tg.File) != written[tg.File] {
						t.Fatalf("second setup %s: %+v, %v", tg.File, res, err)
					}
				}
				undo, err := Targets(name, home, getenv, Options{}, true)
				if err != nil || len(undo) != len(targets) {
					t.Fatalf("undo targets %+v, %v", undo, err)
				}
				for _, tg := range undo {
					res, err := Undo(tg, false)
					if err != nil || res.Saved != "" {
						t.Fatalf("undo %s: %+v, %v", tg.File, res, err)
					}
				}
				for _, tg := range targets {
					rel, _ := filepath.Rel(home, tg.File)
					orig, had := seeds[name][rel]
					if !seeded {
						had = false
					}
					if got, err := os.ReadFile(tg.File); had && string(got) != orig || !had && err == nil {
						t.Errorf("%s after undo: %q (%v), want %q (there: %v)", tg.File, got, err, orig, had)
					}
				}
				// Nothing of setup's is left in the home.
				_ = filepath.Walk(home, func(p string, fi os.FileInfo, err error) error {
					if err == nil && strings.Contains(p, ".prunesched-") {
						t.Errorf("left after undo: %s", p)
					}
					return nil
				})
			})
		}
	}
}

// TestUndoClaudeJSONChangedMeanwhile: Claude Code rewrites ~/.claude.json
// itself (counters, projects, servers added with 'claude mcp add'). Undo
// of a file changed since setup takes only prunesched's server out of it
// and keeps the rest (and a copy of the file before undo).
func TestUndoClaudeJSONChangedMeanwhile(t *testing.T) {
	cases := []struct{ name, orig, meanwhile, want string }{
		{"no mcpServers before: the block goes again",
			"{\n  \"numStartups\": 1\n}\n",
			"{\n  \"mcpServers\": {\n    \"prunesched\": {\n      \"type\": \"stdio\",\n      \"command\": \"" + exe + "\",\n      \"args\": [\n        \"mcp\"\n      ],\n      \"env\": {}\n    }\n  },\n  \"numStartups\": 2,\n  \"projects\": {}\n}",
			"{\n  \"numStartups\": 2,\n  \"projects\": {}\n}"},
		{"a server added meanwhile stays",
			"{\"numStartups\": 1}",
			"{\n  \"numStartups\": 5,\n  \"mcpServers\": {\n    \"prunesched\": {\"type\": \"stdio\", \"command\": \"" + exe + "\", \"args\": [\"mcp\"], \"env\": {}},\n    \"docs\": {\"type\": \"stdio\", \"command\": \"docs\"}\n  }\n}",
			"{\n  \"numStartups\": 5,\n  \"mcpServers\": {\n    \"docs\": {\"type\": \"stdio\", \"command\": \"docs\"}\n  }\n}"},
		{"an empty mcpServers of the original stays",
			"{\"mcpServers\": {}, \"n\": 1}",
			"{\"n\": 2, \"mcpServers\": {\"prunesched\": {\"type\": \"stdio\", \"command\": \"" + exe + "\", \"args\": [\"mcp\"], \"env\": {}}}}",
			"{\"n\": 2, \"mcpServers\": {}}"},
		{"the user's own prunesched server comes back",
			"{\"mcpServers\": {\"prunesched\": {\"command\": \"old\"}}}",
			"{\"n\": 2, \"mcpServers\": {\"prunesched\": {\"type\": \"stdio\", \"command\": \"" + exe + "\", \"args\": [\"mcp\"], \"env\": {}}}}",
			"{\"n\": 2, \"mcpServers\": {\"prunesched\": {\"command\": \"old\"}}}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), ".claude.json")
			if err := os.WriteFile(path, []byte(c.orig), 0o600); err != nil {
				t.Fatal(err)
			}
			tg := claudeJSON
			tg.File = path
			if _, err := Setup(tg, withMCP, false); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(c.meanwhile), 0o600); err != nil {
				t.Fatal(err)
			}
			res, err := Undo(tg, true)
			if err != nil || res.Action != "would-revert" || string(res.Content) != c.want {
				t.Fatalf("dry undo: %+v, %v\n%s", res, err, res.Content)
			}
			res, err = Undo(tg, false)
			if err != nil || res.Action != "reverted" || res.Saved != path+UndoneSuffix {
				t.Fatalf("undo: %+v, %v", res, err)
			}
			if got := read(t, path); got != c.want {
				t.Fatalf("got\n%s\nwant\n%s", got, c.want)
			}
			if read(t, res.Saved) != c.meanwhile || exists(res.Backup) || exists(res.State) {
				t.Error("the file before undo was not kept, or setup's files are left")
			}
			if !json.Valid([]byte(c.want)) {
				t.Fatal("the test's want is not JSON")
			}
		})
	}
	// Unchanged since setup: the original comes back byte for byte, with
	// no copy kept.
	path := filepath.Join(t.TempDir(), ".claude.json")
	orig := "{\"a\":1}"
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	tg := claudeJSON
	tg.File = path
	if _, err := Setup(tg, withMCP, false); err != nil {
		t.Fatal(err)
	}
	if res, err := Undo(tg, false); err != nil || res.Action != "restored" || res.Saved != "" || read(t, path) != orig {
		t.Fatalf("undo: %+v, %v", res, err)
	}
}

// TestDeleteJSON: removing a member keeps the layout of the others.
func TestDeleteJSON(t *testing.T) {
	keepNone := func([]string) bool { return false }
	cases := []struct{ src, want string }{
		{"{\"k\": {\"x\": 1}, \"a\": 1}", "{\"a\": 1}"},
		{"{\n  \"k\": {\"x\": 1},\n  \"a\": 1\n}", "{\n  \"a\": 1\n}"},
		{"{\n  \"a\": 1,\n  \"k\": {\"x\": 1}\n}", "{\n  \"a\": 1\n}"},
		{"{\n  \"a\": 1,\n  \"k\": {\"x\": 1},\n}", "{\n  \"a\": 1,\n}"},
		{"{\n  \"a\": 1 /* c */,\n  \"k\": {\"x\": 1}\n}", "{\n  \"a\": 1 /* c */\n}"},
		{"{\"a\": 1, \"k\": {\"x\": 1, \"y\": 2}}", "{\"a\": 1, \"k\": {\"y\": 2}}"},
		{"{\"k\": {\"x\": 1}}", "{}"},
		{"{\"a\": 1}", "{\"a\": 1}"},
	}
	for _, c := range cases {
		got, err := deleteJSON([]byte(c.src), []string{"k", "x"}, keepNone)
		if err != nil || string(got) != c.want {
			t.Errorf("%q: got %q, %v; want %q", c.src, got, err, c.want)
		}
	}
}
