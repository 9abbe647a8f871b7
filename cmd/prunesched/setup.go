package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/prunesched/prunesched/internal/agentsetup"
)

func runSetup(_ context.Context, e *env, args []string) error {
	fs := newFlags(e, "setup", "claude-code|codex|opencode [--print] [--undo] [flags]", `
Point an agent at the prunesched proxy by writing the agent's own config
file, so every session of it goes through 'prunesched proxy', and register
prunesched's MCP server ('prunesched mcp': context_list, context_prune,
context_recover) with it:

  claude-code  ~/.claude/settings.json ($CLAUDE_CONFIG_DIR): env.ANTHROPIC_BASE_URL;
               ~/.claude.json ($CLAUDE_CONFIG_DIR/.claude.json): mcpServers.prunesched
  codex        ~/.codex/config.toml ($CODEX_HOME): a "prunesched" model provider
               (Responses API, key from $OPENAI_API_KEY), selected as model_provider,
               and [mcp_servers.prunesched]
  opencode     ~/.config/opencode/opencode.json, or the opencode.jsonc or
               config.json already there ($XDG_CONFIG_HOME): options.baseURL of
               the built-in anthropic and openai providers, and mcp.prunesched

Only those values change; every other key, comment and line stays. The
first setup keeps the original file beside it (FILE.prunesched-backup, or
-2, -3 ... when that name is taken) and records it in FILE.prunesched-setup;
--undo puts it back byte for byte (a file changed since setup is kept as
FILE.prunesched-undone first; in ~/.claude.json, which Claude Code rewrites
itself, undo then takes out only the prunesched server). Running setup
again changes nothing, or only what differs. A malformed, read-only or
dangling-symlink config file is reported and left alone.`)
	printOnly := fs.Bool("print", false, "print the file setup would write (or --undo restore) on stdout; write nothing")
	undo := fs.Bool("undo", false, "restore the config files as they were before the first setup")
	proxyURL := fs.String("proxy", "http://"+defaultProxyListen, "the proxy's base URL (its --listen address)")
	mcpCommand := fs.String("mcp-command", "", "absolute path of the prunesched binary the agent starts as its MCP server (default: this binary)")
	noMCP := fs.Bool("no-mcp", false, "do not register the MCP server")
	home := fs.String("home", e.getenv("HOME"), "home directory holding the agents' config ($HOME)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want one agent: %s", strings.Join(agentsetup.Agents(), ", "))
	}
	name := fs.Arg(0)
	if *home == "" {
		return usagef("no home directory: set $HOME or --home DIR")
	}
	if *noMCP && *mcpCommand != "" {
		return usagef("--mcp-command and --no-mcp exclude each other")
	}
	proxy, err := agentsetup.NormalizeProxy(*proxyURL)
	if err != nil {
		return usagef("--proxy: %v", err)
	}
	o := agentsetup.Options{Proxy: proxy}
	if !*noMCP && !*undo {
		if o.MCP, err = mcpCommandLine(e, *mcpCommand); err != nil {
			return err
		}
	}
	targets, err := agentsetup.Targets(name, *home, e.getenv, o, *undo)
	if err != nil {
		return usagef("%v", err)
	}
	var results []agentsetup.Result
	var nothing error
	for _, tg := range targets {
		var res agentsetup.Result
		if *undo {
			res, err = agentsetup.Undo(tg, *printOnly)
			if errors.Is(err, agentsetup.ErrNothingToUndo) {
				// Fine for one file (setup --no-mcp left ~/.claude.json
				// alone); an error when it is so for all.
				if nothing == nil {
					nothing = err
				}
				continue
			}
		} else {
			res, err = agentsetup.Setup(tg, o, *printOnly)
		}
		if err != nil {
			// What was done so far is said before the error.
			if len(results) > 0 && !*asJSON {
				_ = printSetup(e, name, o, *undo, *printOnly, results)
			}
			return err
		}
		results = append(results, res)
	}
	if len(results) == 0 && nothing != nil {
		// Undo twice is no error, as setup twice is none: the files are
		// as they were.
		if *asJSON {
			return printJSON(e.stdout, struct {
				Agent string   `json:"agent"`
				Files []string `json:"files"`
			}{Agent: name, Files: []string{}})
		}
		fmt.Fprintf(e.stdout, "%s: nothing to undo: setup has not changed its config files (or undo ran already)\n", name)
		return nil
	}
	if *asJSON {
		type file struct {
			agentsetup.Result
			Content *string `json:"content,omitempty"`
		}
		out := struct {
			Agent string   `json:"agent"`
			Proxy string   `json:"proxy,omitempty"`
			MCP   []string `json:"mcp_command,omitempty"`
			Files []file   `json:"files"`
		}{Agent: name, MCP: o.MCP}
		if !*undo {
			out.Proxy = proxy
		}
		for _, r := range results {
			f := file{Result: r}
			if *printOnly {
				c := string(r.Content)
				f.Content = &c
			}
			out.Files = append(out.Files, f)
		}
		return printJSON(e.stdout, out)
	}
	return printSetup(e, name, o, *undo, *printOnly, results)
}

// mcpCommandLine returns the command line the agent starts the MCP server
// with: --mcp-command (checked), else this binary, with a warning when it
// is a temporary build of 'go run'.
func mcpCommandLine(e *env, flag string) ([]string, error) {
	if flag != "" {
		if err := agentsetup.CheckMCPCommand(flag); err != nil {
			return nil, usagef("--mcp-command: %v", err)
		}
		return []string{flag, "mcp"}, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("setup: find the prunesched binary to register as the MCP server: %w (give it with --mcp-command PATH, or pass --no-mcp)", err)
	}
	if agentsetup.TemporaryBuild(exe) {
		fmt.Fprintf(e.stderr, "warning: this prunesched is a temporary build (%s, from 'go run' or a test), which may be gone when the agent starts its MCP server: install prunesched and pass its path with --mcp-command PATH (or --no-mcp)\n", exe)
	}
	if err := agentsetup.CheckMCPCommand(exe); err != nil {
		return nil, fmt.Errorf("setup: %w (give the binary with --mcp-command PATH, or pass --no-mcp)", err)
	}
	return []string{exe, "mcp"}, nil
}

// printSetup says what setup or undo did, per file.
func printSetup(e *env, name string, o agentsetup.Options, undo, printOnly bool, results []agentsetup.Result) error {
	if printOnly {
		// The files alone on stdout (so one can be redirected), what they
		// mean on stderr; several files each after a "==> FILE <==" line.
		for _, res := range results {
			fmt.Fprintf(e.stderr, "prunesched setup %s: %s %s\n", name, res.Action, res.File)
			for _, c := range res.Changes {
				fmt.Fprintf(e.stderr, "  %s: %s -> %s\n", c.Key, orUnset(c.Old), c.New)
			}
			if len(results) > 1 {
				fmt.Fprintf(e.stdout, "==> %s <==\n", res.File)
			}
			if _, err := e.stdout.Write(res.Content); err != nil {
				return err
			}
		}
		return nil
	}
	w := e.stdout
	for _, res := range results {
		switch res.Action {
		case "unchanged":
			fmt.Fprintf(w, "%s: %s is set up already; nothing changed\n", name, res.File)
		case "written":
			fmt.Fprintf(w, "%s: wrote %s\n", name, res.File)
			for _, c := range res.Changes {
				fmt.Fprintf(w, "  %s: %s -> %s\n", c.Key, orUnset(c.Old), c.New)
			}
			if res.Created {
				fmt.Fprintf(w, "  the file is new; 'prunesched setup %s --undo' removes it\n", name)
			} else {
				fmt.Fprintf(w, "  original kept in %s; 'prunesched setup %s --undo' restores it\n", res.Backup, name)
			}
		case "restored", "removed":
			fmt.Fprintf(w, "%s: %s %s (as before setup)\n", name, res.Action, res.File)
		case "reverted":
			fmt.Fprintf(w, "%s: took prunesched's settings out of %s (changed since setup: the rest kept)\n", name, res.File)
		}
		if res.Saved != "" {
			fmt.Fprintf(w, "  it had changed since setup: that version is kept in %s\n", res.Saved)
		}
	}
	if !undo {
		if o.MCP != nil {
			fmt.Fprintf(w, "MCP server %q: %s\n", agentsetup.MCPServer, strings.Join(o.MCP, " "))
		}
		fmt.Fprintln(w, "Next:")
		fmt.Fprintf(w, "  prunesched proxy %s   # leave it running; the agent's requests go through it\n", agentsetup.Upstream(name))
		fmt.Fprintln(w, "  prunesched stats                          # what pruning saved; the inspector is at http://"+defaultProxyAPIListen+"/")
	}
	return nil
}

func orUnset(s string) string {
	if s == "" {
		return "(unset)"
	}
	return s
}
