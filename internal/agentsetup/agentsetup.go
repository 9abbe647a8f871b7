// Package agentsetup writes an agent CLI's own config file (Claude Code's
// settings.json, Codex's config.toml, OpenCode's opencode.json) so that its
// model traffic goes through the prunesched proxy, and undoes it exactly:
// the original file is kept beside it and restored byte for byte. Edits
// touch only the values they set; the rest of the file (other keys, their
// order, comments, formatting) is left as it was. 'prunesched setup' is its
// command line.
package agentsetup

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Change is one setting an edit sets: its key, the value it had ("" when
// unset) and the new one. A value that is not a string shows as compact
// JSON (or TOML for Codex).
type Change struct {
	Key string `json:"key"`
	Old string `json:"old,omitempty"`
	New string `json:"new"`
}

// MCPServer is the name setup registers prunesched's MCP server under
// in each agent's config.
const MCPServer = "prunesched"

// Options is what setup points an agent at.
type Options struct {
	// Proxy is the proxy's base URL, as NormalizeProxy returns it.
	Proxy string
	// MCP is the command line that starts prunesched's stdio MCP server
	// (the absolute path of the binary, then "mcp"); nil registers none.
	MCP []string
}

// part is one config file setup edits for an agent.
type part struct {
	// files returns the candidates for the file, the one the CLI lets win
	// first; setup edits the first that exists, else the default (the
	// second of several, else the only one).
	files func(home string, getenv func(string) string) []string
	// edit returns src with what o asks set.
	edit func(src []byte, o Options) ([]byte, []Change, error)
	// mcpOnly: the file holds the MCP registration alone, so setup skips
	// it without one.
	mcpOnly bool
	// live lists the JSON paths setup sets in a file the agent itself
	// rewrites (Claude Code's ~/.claude.json). When such a file changed
	// since setup wrote it, undo reverts only those paths in it instead of
	// restoring the backup over the agent's own changes.
	live [][]string
}

// agent is what setup knows about one CLI.
type agent struct {
	parts []part
	// upstream is the proxy's --upstream (and --openai-upstream) the
	// agent's default provider needs.
	upstream string
}

// claudeDir is Claude Code's config directory.
func claudeDir(home string, getenv func(string) string) string {
	if dir := getenv("CLAUDE_CONFIG_DIR"); dir != "" {
		return dir
	}
	return filepath.Join(home, ".claude")
}

var claudeMCPPath = []string{"mcpServers", MCPServer}

var agents = map[string]agent{
	"claude-code": {
		parts: []part{
			{
				files: func(home string, getenv func(string) string) []string {
					return []string{filepath.Join(claudeDir(home, getenv), "settings.json")}
				},
				edit: editClaude,
			},
			{
				// User-scope MCP servers live in Claude Code's global
				// state file, ~/.claude.json ($CLAUDE_CONFIG_DIR/.claude.json),
				// or the legacy .config.json in its config directory
				// when that is there and not empty (Claude Code then
				// reads it instead). settings.json has no mcpServers.
				files: func(home string, getenv func(string) string) []string {
					global := filepath.Join(home, ".claude.json")
					if dir := getenv("CLAUDE_CONFIG_DIR"); dir != "" {
						global = filepath.Join(dir, ".claude.json")
					}
					legacy := filepath.Join(claudeDir(home, getenv), ".config.json")
					if fi, err := os.Stat(legacy); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
						return []string{legacy}
					}
					return []string{global}
				},
				edit:    editClaudeMCP,
				mcpOnly: true,
				live:    [][]string{claudeMCPPath},
			},
		},
		upstream: "--upstream https://api.anthropic.com",
	},
	"codex": {
		parts: []part{{
			files: func(home string, getenv func(string) string) []string {
				dir := getenv("CODEX_HOME")
				if dir == "" {
					dir = filepath.Join(home, ".codex")
				}
				return []string{filepath.Join(dir, "config.toml")}
			},
			edit: func(src []byte, o Options) ([]byte, []Change, error) {
				return editCodex(src, o.Proxy+"/v1", o.MCP)
			},
		}},
		upstream: "--upstream https://api.openai.com",
	},
	"opencode": {
		parts: []part{{
			// OpenCode merges config.json, opencode.json, then
			// opencode.jsonc from its config directory, the later winning.
			files: func(home string, getenv func(string) string) []string {
				dir := getenv("XDG_CONFIG_HOME")
				if dir == "" {
					dir = filepath.Join(home, ".config")
				}
				dir = filepath.Join(dir, "opencode")
				return []string{filepath.Join(dir, "opencode.jsonc"), filepath.Join(dir, "opencode.json"), filepath.Join(dir, "config.json")}
			},
			edit: editOpenCode,
		}},
		upstream: "--upstream https://api.anthropic.com --openai-upstream https://api.openai.com",
	},
}

// Agents lists the agents setup knows, in the order the help shows them.
func Agents() []string { return []string{"claude-code", "codex", "opencode"} }

func lookup(name string) (agent, error) {
	a, ok := agents[name]
	if !ok {
		return agent{}, fmt.Errorf("unknown agent %q: want %s", name, strings.Join(Agents(), ", "))
	}
	return a, nil
}

// Upstream returns the proxy flags the agent's default providers need,
// e.g. "--upstream https://api.anthropic.com".
func Upstream(name string) string { return agents[name].upstream }

// Target is one config file setup edits for an agent. Targets returns
// them; the zero Part is the agent's main config file.
type Target struct {
	Agent string
	// File is the config file's path.
	File string
	// Part is which of the agent's files it is: 0 the main one (proxy
	// settings, and for Codex and OpenCode the MCP server too), 1 Claude
	// Code's ~/.claude.json (its MCP server).
	Part int
}

func (t Target) part() (part, error) {
	a, err := lookup(t.Agent)
	if err != nil {
		return part{}, err
	}
	if t.Part < 0 || t.Part >= len(a.parts) {
		return part{}, fmt.Errorf("agent %s has no config file %d", t.Agent, t.Part)
	}
	return a.parts[t.Part], nil
}

// Targets returns the config files setup edits for the agent: under home
// (or $CLAUDE_CONFIG_DIR, $CODEX_HOME, $XDG_CONFIG_HOME as the CLI itself
// honours them), for each of its files the first candidate that exists
// (for OpenCode the one that wins the merge), else the default one.
// Claude Code's MCP file is left out when o registers no MCP server. For
// undo (forUndo), every file is returned, and a candidate holding setup's
// state file comes first.
func Targets(name, home string, getenv func(string) string, o Options, forUndo bool) ([]Target, error) {
	a, err := lookup(name)
	if err != nil {
		return nil, err
	}
	var out []Target
	for i, p := range a.parts {
		if p.mcpOnly && o.MCP == nil && !forUndo {
			continue
		}
		out = append(out, Target{Agent: name, File: pick(p.files(home, getenv), forUndo), Part: i})
	}
	return out, nil
}

// pick returns the candidate setup edits (see part.files).
func pick(files []string, forUndo bool) string {
	if forUndo {
		for _, f := range files {
			if exists(f + StateSuffix) {
				return f
			}
		}
	}
	for _, f := range files {
		if exists(f) {
			return f
		}
	}
	// OpenCode's documented global file is opencode.json.
	if len(files) > 1 {
		return files[1]
	}
	return files[0]
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// Edit returns the config file src (nil or empty: no file yet) of the
// target with what o asks set (the proxy's base URL, the MCP server),
// and the settings it changed. It is idempotent: editing its own output
// with the same options returns the same bytes. A malformed src is a
// *SyntaxError with its line and column.
func Edit(t Target, src []byte, o Options) ([]byte, []Change, error) {
	p, err := t.part()
	if err != nil {
		return nil, nil, err
	}
	return p.edit(src, o)
}

// CheckMCPCommand checks the path of the binary an agent is to start as
// the MCP server: absolute, and an executable regular file.
func CheckMCPCommand(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("MCP command %q: want an absolute path (the agent starts it from any directory)", path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("MCP command: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("MCP command %s: not an executable file", path)
	}
	return nil
}

// TemporaryBuild reports whether the executable path is a temporary build
// of 'go run' (or a test binary): a directory named go-build* (Go's work
// directory under $TMPDIR, or its build cache) holds it, and it may be
// gone when an agent starts it.
func TemporaryBuild(path string) bool {
	for _, el := range strings.Split(filepath.ToSlash(path), "/") {
		if strings.HasPrefix(el, "go-build") {
			return true
		}
	}
	return false
}

// NormalizeProxy checks a --proxy URL (http or https, a host, no query) and
// returns it without a trailing slash. The agents add /v1 themselves where
// their API needs it, so a URL ending in /v1 is refused.
func NormalizeProxy(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("proxy URL %q: %w", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("proxy URL %q: want http://HOST:PORT (the proxy's --listen address)", s)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("proxy URL %q: want no user, query or fragment", s)
	}
	out := strings.TrimRight(u.String(), "/")
	if strings.HasSuffix(out, "/v1") {
		return "", fmt.Errorf("proxy URL %q: give the proxy's base URL without /v1 (setup adds it where the agent needs it)", s)
	}
	return out, nil
}

func editClaude(src []byte, o Options) ([]byte, []Change, error) {
	return setAll(src, []jsonChange{{path: []string{"env", "ANTHROPIC_BASE_URL"}, val: o.Proxy}})
}

// claudeMCP is a user-scope stdio server in ~/.claude.json, as 'claude
// mcp add --scope user' writes it.
type claudeMCP struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

// editClaudeMCP registers the MCP server in ~/.claude.json.
func editClaudeMCP(src []byte, o Options) ([]byte, []Change, error) {
	if o.MCP == nil {
		return src, nil, nil
	}
	return setAll(src, []jsonChange{{path: claudeMCPPath, val: claudeMCP{Type: "stdio", Command: o.MCP[0], Args: o.MCP[1:], Env: map[string]string{}}}})
}

// openCodeMCP is a local MCP server in opencode.json.
type openCodeMCP struct {
	Type    string   `json:"type"`
	Command []string `json:"command"`
	Enabled bool     `json:"enabled"`
}

// editOpenCode overrides the base URL of OpenCode's built-in anthropic
// and openai providers (options.baseURL, with the /v1 their SDKs expect)
// and registers the MCP server.
func editOpenCode(src []byte, o Options) ([]byte, []Change, error) {
	// Each new member goes first in its object: openai is set first so
	// that a new provider block reads anthropic, openai. A new mcp block
	// goes right after provider, so that it lands in the same place
	// whether the provider block was there already or not (undo compares
	// files edited in either order).
	sets := []jsonChange{
		{path: []string{"provider", "openai", "options", "baseURL"}, val: o.Proxy + "/v1"},
		{path: []string{"provider", "anthropic", "options", "baseURL"}, val: o.Proxy + "/v1"},
	}
	if o.MCP != nil {
		sets = append(sets, jsonChange{path: []string{"mcp", MCPServer}, val: openCodeMCP{Type: "local", Command: o.MCP, Enabled: true}, after: "provider"})
	}
	return setAll(src, sets)
}

// setAll applies the changes in order, reporting those that changed a
// value.
func setAll(src []byte, sets []jsonChange) ([]byte, []Change, error) {
	var changes []Change
	for _, c := range sets {
		out, old, changed, err := setJSONAfter(src, c.path, c.val, c.after)
		if err != nil {
			return nil, nil, err
		}
		if changed {
			changes = append(changes, Change{Key: strings.Join(c.path, "."), Old: old, New: display(c.val)})
		}
		src = out
	}
	return src, changes, nil
}
