// Package mcpserver is `prunesched mcp`: an MCP server (the official Go SDK,
// over stdio) that offers the model the three context tools of package
// agenttools.
//
// It holds no session and reads no log. An MCP server the agent starts
// cannot tell which conversation, tenant or credential a call belongs to;
// the prunesched proxy on the agent's model traffic can. So every tool
// answers with agenttools.Stub, and the proxy, which sees the call in the
// answer it records and the result in the next request, replaces the stub
// with the real answer, decided from that request's own session before the
// result is first sent (a new item: no cached prefix changes). It must not
// answer from anything but its arguments: a handle resolved here would
// cross sessions.
package mcpserver

import (
	"context"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/prunesched/prunesched/internal/agenttools"
)

// New returns the MCP server with the three context tools, named version.
func New(version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: agenttools.Server, Title: "prunesched context tools", Version: version}, nil)
	for _, k := range agenttools.Kinds {
		s.AddTool(&mcp.Tool{Name: string(k), Description: agenttools.Description(k), InputSchema: agenttools.Schema(k)}, stub(k))
	}
	return s
}

// stub answers a call with the kind's stub text.
func stub(k agenttools.Kind) mcp.ToolHandler {
	return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: agenttools.Stub(k)}}}, nil
	}
}

// Serve runs the server over in and out (the agent's pipes) until the
// agent closes them or ctx ends.
func Serve(ctx context.Context, version string, in io.ReadCloser, out io.WriteCloser) error {
	t := &mcp.IOTransport{Reader: in, Writer: out}
	if err := New(version).Run(ctx, t); err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp server: %w", err)
	}
	return nil
}
