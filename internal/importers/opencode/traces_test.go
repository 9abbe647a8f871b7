package opencode

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
	"github.com/prunesched/prunesched/internal/importers/internal/tracetest"
)

// rawExport is an independent, minimal reading of an export.
type rawExport struct {
	Messages []struct {
		Info struct {
			Role   string `json:"role"`
			Tokens struct {
				Input  int `json:"input"`
				Output int `json:"output"`
				Cache  struct {
					Read  int `json:"read"`
					Write int `json:"write"`
				} `json:"cache"`
			} `json:"tokens"`
		} `json:"info"`
		Parts []map[string]any `json:"parts"`
	} `json:"messages"`
}

func TestRealTraces(t *testing.T) {
	tracetest.EachTrace(t, "opencode", "*.json", Import, func(t *testing.T, path string, data []byte, s build.Session) {
		var raw rawExport
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatal(err)
		}
		var toolParts, compacted, finished, assistants int
		var want events.Usage
		for _, m := range raw.Messages {
			if m.Info.Role == "assistant" {
				assistants++
				want.InputTokens += m.Info.Tokens.Input
				want.OutputTokens += m.Info.Tokens.Output
				want.CacheReadTokens += m.Info.Tokens.Cache.Read
				want.CacheWriteTokens += m.Info.Tokens.Cache.Write
			}
			for _, p := range m.Parts {
				if p["type"] != "tool" {
					continue
				}
				toolParts++
				st, _ := p["state"].(map[string]any)
				if st["status"] == "completed" || st["status"] == "error" {
					finished++
				}
				if tm, _ := st["time"].(map[string]any); tm["compacted"] != nil {
					compacted++
				}
			}
		}
		n := tracetest.Counts(s)
		if n[events.TypeToolCall] != toolParts {
			t.Errorf("tool calls: got %d, want %d tool parts", n[events.TypeToolCall], toolParts)
		}
		if n[events.TypeToolResult] != finished {
			t.Errorf("tool results: got %d, want %d finished tool parts", n[events.TypeToolResult], finished)
		}
		if n[events.TypeModelRequest] != assistants {
			t.Errorf("model requests: got %d, want %d assistant messages", n[events.TypeModelRequest], assistants)
		}
		if got := tracetest.UsageSum(s); got != want {
			t.Errorf("usage: got %+v, want %+v", got, want)
		}
		pruned := 0
		for _, e := range s.Events {
			if r, ok := e.Data.(*events.ToolResult); ok && r.HostPruned {
				pruned++
			}
		}
		if pruned != compacted {
			t.Errorf("host-pruned results: got %d, want %d compacted parts", pruned, compacted)
		}
		t.Logf("%s: %d events, %d tool calls, %d model requests, %d host-pruned",
			filepath.Base(path), len(s.Events), n[events.TypeToolCall], n[events.TypeModelRequest], pruned)
	})
}
