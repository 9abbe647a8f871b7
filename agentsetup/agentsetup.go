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
// unset) and the new one.
type Change struct {
	Key string `json:"key"`
	Old string `json:"old,omitempty"`
	New string `json:"new"`
}

// agent is what setup knows about one CLI.
type agent struct {
	// files returns the config files the CLI reads that setup may edit,
	// the one the CLI lets win first; setup edits the first that exists,
	// else the first.
	files func(home string, getenv func(string) string) []string
	// edit returns src with the agent pointed at the proxy.
	edit func(src []byte, proxy string) ([]byte, []Change, error)
	// Upstream is the proxy's --upstream (and --openai-upstream) the
	// agent's default provider needs.
	upstream string
}

var agents = map[string]agent{
	"claude-code": {
		files: func(home string, getenv func(string) string) []string {
			dir := getenv("CLAUDE_CONFIG_DIR")
			if dir == "" {
				dir = filepath.Join(home, ".claude")
			}
			return []string{filepath.Join(dir, "settings.json")}
		},
		edit:     editClaude,
		upstream: "--upstream https://api.anthropic.com",
	},
	"codex": {
		files: func(home string, getenv func(string) string) []string {
			dir := getenv("CODEX_HOME")
			if dir == "" {
				dir = filepath.Join(home, ".codex")
			}
			return []string{filepath.Join(dir, "config.toml")}
		},
		edit: func(src []byte, proxy string) ([]byte, []Change, error) {
			return editCodex(src, proxy+"/v1")
		},
		upstream: "--upstream https://api.openai.com",
	},
	"opencode": {
		// OpenCode merges config.json, opencode.json, then opencode.jsonc
		// from its config directory, the later winning.
		files: func(home string, getenv func(string) string) []string {
			dir := getenv("XDG_CONFIG_HOME")
			if dir == "" {
				dir = filepath.Join(home, ".config")
			}
			dir = filepath.Join(dir, "opencode")
			return []string{filepath.Join(dir, "opencode.jsonc"), filepath.Join(dir, "opencode.json"), filepath.Join(dir, "config.json")}
		},
		edit:     editOpenCode,
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

// ConfigFile returns the config file setup edits for the agent: under home
// (or $CLAUDE_CONFIG_DIR, $CODEX_HOME, $XDG_CONFIG_HOME as the CLI itself
// honours them), the first of the CLI's candidates that exists (for
// OpenCode the one that wins the merge), else the default one. For undo,
// a candidate that holds a backup comes first.
func ConfigFile(name, home string, getenv func(string) string, forUndo bool) (string, error) {
	a, err := lookup(name)
	if err != nil {
		return "", err
	}
	files := a.files(home, getenv)
	if forUndo {
		for _, f := range files {
			if exists(f+BackupSuffix) || exists(f+CreatedSuffix) {
				return f, nil
			}
		}
	}
	for _, f := range files {
		if exists(f) {
			return f, nil
		}
	}
	// OpenCode's documented global file is opencode.json.
	if len(files) > 1 {
		return files[1], nil
	}
	return files[0], nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// Edit returns the config file src (nil or empty: no file yet) of the
// agent with its traffic pointed at proxy (a base URL such as
// http://127.0.0.1:8788), and the settings it changed. It is idempotent:
// editing its own output with the same proxy returns the same bytes. A
// malformed src is a *SyntaxError with its line and column.
func Edit(name string, src []byte, proxy string) ([]byte, []Change, error) {
	a, err := lookup(name)
	if err != nil {
		return nil, nil, err
	}
	return a.edit(src, proxy)
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

func editClaude(src []byte, proxy string) ([]byte, []Change, error) {
	return setAll(src, []jsonChange{{path: []string{"env", "ANTHROPIC_BASE_URL"}, val: proxy}})
}

// editOpenCode overrides the base URL of OpenCode's built-in anthropic
// and openai providers (options.baseURL, with the /v1 their SDKs expect).
func editOpenCode(src []byte, proxy string) ([]byte, []Change, error) {
	// Each new member goes first in its object: openai is set first so
	// that a new provider block reads anthropic, openai.
	return setAll(src, []jsonChange{
		{path: []string{"provider", "openai", "options", "baseURL"}, val: proxy + "/v1"},
		{path: []string{"provider", "anthropic", "options", "baseURL"}, val: proxy + "/v1"},
	})
}

// setAll applies the changes in order, reporting those that changed a
// value.
func setAll(src []byte, sets []jsonChange) ([]byte, []Change, error) {
	var changes []Change
	for _, c := range sets {
		out, old, _, err := setJSON(src, c.path, c.val)
		if err != nil {
			return nil, nil, err
		}
		if old != c.val {
			changes = append(changes, Change{Key: strings.Join(c.path, "."), Old: old, New: c.val})
		}
		src = out
	}
	return src, changes, nil
}
