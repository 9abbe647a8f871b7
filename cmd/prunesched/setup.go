package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/prunesched/prunesched/agentsetup"
)

func runSetup(_ context.Context, e *env, args []string) error {
	fs := newFlags(e, "setup", "claude-code|codex|opencode [--print] [--undo] [flags]", `
Point an agent at the prunesched proxy by writing the agent's own config
file, so every session of it goes through 'prunesched proxy':

  claude-code  ~/.claude/settings.json ($CLAUDE_CONFIG_DIR): env.ANTHROPIC_BASE_URL
  codex        ~/.codex/config.toml ($CODEX_HOME): a "prunesched" model provider
               (Responses API, key from $OPENAI_API_KEY), selected as model_provider
  opencode     ~/.config/opencode/opencode.json, or the opencode.jsonc or
               config.json already there ($XDG_CONFIG_HOME): options.baseURL of
               the built-in anthropic and openai providers

Only those values change; every other key, comment and line stays. The
first setup keeps the original file beside it (FILE.prunesched-backup, or
FILE.prunesched-created when there was none); --undo puts it back byte for
byte (a file changed since setup is kept as FILE.prunesched-undone first).
Running setup again changes nothing, or only the proxy URL. A malformed
config file is reported with its line and left alone.`)
	printOnly := fs.Bool("print", false, "print the file setup would write (or --undo restore) on stdout; write nothing")
	undo := fs.Bool("undo", false, "restore the config file as it was before the first setup")
	proxyURL := fs.String("proxy", "http://"+defaultProxyListen, "the proxy's base URL (its --listen address)")
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
	proxy, err := agentsetup.NormalizeProxy(*proxyURL)
	if err != nil {
		return usagef("--proxy: %v", err)
	}
	path, err := agentsetup.ConfigFile(name, *home, e.getenv, *undo)
	if err != nil {
		return usagef("%v", err)
	}
	var res agentsetup.Result
	if *undo {
		res, err = agentsetup.Undo(name, path, *printOnly)
	} else {
		res, err = agentsetup.Setup(name, path, proxy, *printOnly)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		out := struct {
			agentsetup.Result
			Proxy   string `json:"proxy,omitempty"`
			Content string `json:"content,omitempty"`
		}{Result: res}
		if !*undo {
			out.Proxy = proxy
		}
		if *printOnly {
			out.Content = string(res.Content)
		}
		return printJSON(e.stdout, out)
	}
	if *printOnly {
		// The file alone on stdout (so it can be redirected), what it
		// means on stderr.
		fmt.Fprintf(e.stderr, "prunesched setup %s: %s %s\n", name, res.Action, res.File)
		for _, c := range res.Changes {
			fmt.Fprintf(e.stderr, "  %s: %s -> %s\n", c.Key, orUnset(c.Old), c.New)
		}
		_, err := e.stdout.Write(res.Content)
		return err
	}
	w := e.stdout
	switch res.Action {
	case "unchanged":
		fmt.Fprintf(w, "%s: %s already points at %s; nothing changed\n", name, res.File, proxy)
	case "written":
		fmt.Fprintf(w, "%s: wrote %s\n", name, res.File)
		for _, c := range res.Changes {
			fmt.Fprintf(w, "  %s: %s -> %s\n", c.Key, orUnset(c.Old), c.New)
		}
		if strings.HasSuffix(res.Backup, agentsetup.CreatedSuffix) {
			fmt.Fprintf(w, "  the file is new; 'prunesched setup %s --undo' removes it\n", name)
		} else {
			fmt.Fprintf(w, "  original kept in %s; 'prunesched setup %s --undo' restores it\n", res.Backup, name)
		}
		fmt.Fprintf(w, "Run the proxy: prunesched proxy %s\n", agentsetup.Upstream(name))
	case "restored", "removed":
		fmt.Fprintf(w, "%s: %s %s (as before setup)\n", name, res.Action, res.File)
		if res.Saved != "" {
			fmt.Fprintf(w, "  it had changed since setup: that version is kept in %s\n", res.Saved)
		}
	}
	return nil
}

func orUnset(s string) string {
	if s == "" {
		return "(unset)"
	}
	return s
}
