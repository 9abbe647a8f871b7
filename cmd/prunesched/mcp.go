package main

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime/debug"

	"github.com/prunesched/prunesched/internal/mcpserver"
)

// runMCP is `prunesched mcp`: the context tools' MCP server on stdio. The
// agent starts it (setup registers it); the proxy answers its calls.
func runMCP(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "mcp", "", `Serve the context tools to the agent over stdio (the Model Context Protocol):
context_list, context_prune and context_recover. The agent starts this
command itself: 'prunesched setup' registers it in Claude Code, Codex and
OpenCode. The server holds no session: the prunesched proxy on the agent's
model traffic sees each call and answers it from that request's own
session (the list, the judged removal request, the recovered item). Without
the proxy every call answers that the proxy is not in the path.`)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	in, ok := e.stdin.(io.ReadCloser)
	if !ok {
		if e.stdin == nil {
			return errors.New("no standard input: the agent runs this command with its pipes")
		}
		in = io.NopCloser(e.stdin)
	}
	out, ok := e.stdout.(io.WriteCloser)
	if !ok || out == os.Stdout {
		out = nopWriteCloser{e.stdout}
	}
	return mcpserver.Serve(ctx, readBuildInfo(debug.ReadBuildInfo()).Version, in, out)
}

// nopWriteCloser keeps the process's stdout open when the server ends.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
