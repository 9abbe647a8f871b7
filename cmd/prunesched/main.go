// Command prunesched is an event-sourced pruning scheduler for LLM agent
// sessions. Run `prunesched help` for the subcommands.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/prunesched/prunesched/policy"
)

// version overrides the module version when set at build time with
// -ldflags "-X main.version=..."; empty reads it from the build info.
var version = ""

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

// env carries the process's streams, so commands are testable.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// stdin is the process's standard input (nil: none; the MCP server
	// needs it).
	stdin io.Reader
}

// usageError makes main exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

func commands() []command {
	return []command{
		{"serve", "run the log, the workers and the HTTP API (embedded NATS by default)", runServe},
		{"analyze", "import trace files into a temporary log, run the pipeline, report per session", runAnalyze},
		{"worker", "run one pipeline worker against an external NATS server", runWorker},
		{"import", "import trace files (claude-code, opencode, native JSONL) into a running server", runImport},
		{"append", "append native JSONL events to a running server", runAppend},
		{"sessions", "list the sessions of a tenant: agent, title, start, items, prunes, dollars saved", runSessions},
		{"stats", "show tokens and dollars saved, per session and for the tenant by day", runStats},
		{"decisions", "list the decisions (certificates) of a session", runDecisions},
		{"item", "print an original item from the log, whatever the bundle shows", runItem},
		{"bundle", "print a session's rendered bundle (anthropic, openai or text)", runBundle},
		{"render", "decide at a request time and print the bundle (what an adapter calls)", runRender},
		{"pin", "protect an item from pruning", controlCmd("pin")},
		{"unpin", "lift a pin", controlCmd("unpin")},
		{"prune", "ask for an item to be pruned (recorded as MANUAL_PRUNE)", controlCmd("prune")},
		{"restore", "bring a pruned item back into the bundle", controlCmd("restore")},
		{"flush", "apply everything pending at the session's next request, whatever the cache break costs", runFlush},
		{"pending", "list the marks the scheduler holds back, and why each waits", runPending},
		{"lab", "run the pruning experiment on ground-truth fixtures: the baseline, the shipped policy, its variants and the peers, one row each", runLab},
		{"proxy", "prune live agents' requests: an Anthropic / OpenAI API proxy in front of the model", runProxy},
		{"setup", "point Claude Code, Codex or OpenCode at the proxy (writes its config; --undo)", runSetup},
		{"mcp", "the context tools for the model (list, prune, recover): an MCP server on stdio, answered by the proxy", runMCP},
		{"bench", "measure the pipeline against raw JetStream and the render path against the request budget", runBench},
		{"policy", "print the effective policy (defaults filled in) as YAML", runPolicy},
		{"version", "print the module version, VCS revision and build time", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, &env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, stdin: os.Stdin}, os.Args[1:]))
}

func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			return run(ctx, e, []string{args[1], "--help"})
		}
		printUsage(e.stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(ctx, e, args[1:])
			var ue *usageError
			switch {
			case err == nil:
				return 0
			case errors.Is(err, pflag.ErrHelp):
				return 0
			case errors.As(err, &ue):
				fmt.Fprintf(e.stderr, "prunesched %s: %v\nRun 'prunesched %s --help' for usage.\n", c.name, err, c.name)
				return 2
			default:
				fmt.Fprintf(e.stderr, "prunesched %s: %v\n", c.name, err)
				return 1
			}
		}
	}
	if s := suggest(args[0], commandNames()); s != "" {
		fmt.Fprintf(e.stderr, "prunesched: unknown command %q; did you mean %q?\nRun 'prunesched help' for the commands.\n", args[0], s)
		return 2
	}
	fmt.Fprintf(e.stderr, "prunesched: unknown command %q\n\n", args[0])
	printUsage(e.stderr)
	return 2
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "prunesched: an event-sourced pruning scheduler for LLM agent sessions.")
	fmt.Fprintln(w, "\nUsage: prunesched <command> [flags] [args]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'prunesched <command> --help' for a command's flags.")
}

// newFlags returns a flag set (github.com/spf13/pflag: flags are accepted
// before, between and after the positional arguments, and "--" ends them)
// that returns errors rather than exiting. --help / -h print the usage to
// e.stdout; parse errors are reported on e.stderr by run.
func newFlags(e *env, name, usage, help string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(e.stdout, "Usage: prunesched %s %s\n\n%s\n\nFlags:\n", name, usage, strings.TrimSpace(help))
		fs.SetOutput(e.stdout)
		fs.PrintDefaults()
		fs.SetOutput(e.stderr)
	}
	return fs
}

// parse parses flags, mapping flag errors to usage errors.
func parse(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return &usageError{flagSuggestion(fs, err)}
	}
	return nil
}

// noArgs is the usage error of a command that takes no positional
// arguments but got some.
func noArgs(fs *pflag.FlagSet) error {
	if fs.NArg() > 0 {
		return usagef("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return nil
}

// buildInfo is what 'prunesched version' prints: the module version, the VCS
// revision and time, and whether the tree had uncommitted changes.
type buildInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// readBuildInfo reads the build info the Go toolchain embeds (go install
// and go build record the module version and, in a VCS checkout, vcs.*).
func readBuildInfo(bi *debug.BuildInfo, ok bool) buildInfo {
	out := buildInfo{Version: "(devel)"}
	if ok {
		out.Go = bi.GoVersion
		if v := bi.Main.Version; v != "" {
			out.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				out.Revision = s.Value
			case "vcs.time":
				out.Time = s.Value
			case "vcs.modified":
				out.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		out.Version = version
	}
	return out
}

func runVersion(_ context.Context, e *env, args []string) error {
	fs := newFlags(e, "version", "[--json]", "Print the module version, the VCS revision and time it was built from (with +dirty when the tree had uncommitted changes), and the Go version, from the binary's build info.")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	bi := readBuildInfo(debug.ReadBuildInfo())
	if *asJSON {
		return printJSON(e.stdout, bi)
	}
	fmt.Fprintf(e.stdout, "prunesched %s\n", bi.Version)
	rev := bi.Revision
	if rev == "" {
		rev = "unknown (built without VCS information)"
	} else if bi.Modified {
		rev += "+dirty"
	}
	fmt.Fprintf(e.stdout, "revision:  %s\n", rev)
	if bi.Time != "" {
		fmt.Fprintf(e.stdout, "committed: %s\n", bi.Time)
	}
	if bi.Go != "" {
		fmt.Fprintf(e.stdout, "go:        %s\n", bi.Go)
	}
	return nil
}

// defaultServeListen is serve's HTTP API address, where the client
// commands look by default.
const defaultServeListen = "127.0.0.1:7070"

// defaultDataDir is where serve keeps its log: $PRUNESCHED_DATA, else
// $XDG_DATA_HOME/prunesched, else ~/.local/share/prunesched.
func defaultDataDir(getenv func(string) string) string {
	if d := getenv("PRUNESCHED_DATA"); d != "" {
		return d
	}
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "prunesched")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "prunesched")
	}
	return ".prunesched"
}

func loadPolicy(path string) (policy.Policy, error) {
	if path == "" {
		return policy.Default(), nil
	}
	return policy.Load(path)
}

func newLogger(w io.Writer, level string, json bool) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	if json {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

func runPolicy(_ context.Context, e *env, args []string) error {
	fs := newFlags(e, "policy", "[--policy FILE]", "Print the effective policy: the file's settings with every default filled in, and its version.")
	path := fs.String("policy", "", "policy file (YAML); empty = defaults")
	if err := parse(fs, args); err != nil {
		return err
	}
	p, err := loadPolicy(*path)
	if err != nil {
		return err
	}
	b, err := p.YAML()
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "# version: %s\n%s", p.Version(), b)
	return nil
}

// printJSON writes v as indented JSON: the --json form of a report.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
