package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/prunesched/prunesched/internal/agenttools"
)

// TestToolsOverStdioPipes: a client on the server's pipes lists exactly
// the three context tools, with agenttools' descriptions and schemas byte
// for byte, and every call answers the tool's stub.
func TestToolsOverStdioPipes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, "test", sr, sw) }()

	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != len(agenttools.Kinds) {
		t.Fatalf("%d tools, want %d", len(res.Tools), len(agenttools.Kinds))
	}
	for i, tool := range res.Tools {
		k := agenttools.Kinds[i]
		if tool.Name != string(k) || tool.Description != agenttools.Description(k) {
			t.Errorf("tool %d: %q %q", i, tool.Name, tool.Description)
		}
		got, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(agenttools.Schema(k), &b); err != nil {
			t.Fatal(err)
		}
		ga, _ := json.Marshal(a)
		gb, _ := json.Marshal(b)
		if string(ga) != string(gb) {
			t.Errorf("%s schema %s, want %s", k, ga, gb)
		}
	}
	args := map[agenttools.Kind]map[string]any{
		agenttools.List:    {},
		agenttools.Prune:   {"handles": []string{"#3"}, "reason": "done"},
		agenttools.Recover: {"handle": "#3"},
	}
	for _, k := range agenttools.Kinds {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: string(k), Arguments: args[k]})
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if len(r.Content) != 1 || r.IsError {
			t.Fatalf("%s: %+v", k, r)
		}
		if tc, ok := r.Content[0].(*mcp.TextContent); !ok || tc.Text != agenttools.Stub(k) {
			t.Fatalf("%s: content %+v", k, r.Content[0])
		}
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	_ = cw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
