package claudecode

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
	"github.com/prunesched/prunesched/internal/importers/internal/tracetest"
)

// rawCounts is an independent reading of a transcript with generic maps:
// distinct main-thread tool_use ids, distinct real responses and their
// usage (field-wise max over a response's lines), and toolUseResult copies.
type rawCounts struct {
	toolUses  map[string]bool
	responses map[string]events.Usage
	// display holds toolUseResult.file.content by tool_use_id.
	display     map[string]string
	compactions int
}

func readRaw(t *testing.T, path string) rawCounts {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rc := rawCounts{toolUses: map[string]bool{}, responses: map[string]events.Usage{}, display: map[string]string{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if m["isSidechain"] == true {
			continue
		}
		if m["type"] == "system" && m["subtype"] == "compact_boundary" {
			rc.compactions++
		}
		msg, _ := m["message"].(map[string]any)
		switch m["type"] {
		case "assistant":
			for _, b := range blocks(msg) {
				if b["type"] == "tool_use" {
					rc.toolUses[b["id"].(string)] = true
				}
			}
			if msg["model"] == "<synthetic>" {
				continue
			}
			u, _ := msg["usage"].(map[string]any)
			num := func(m map[string]any, k string) int { f, _ := m[k].(float64); return int(f) }
			cc, _ := u["cache_creation"].(map[string]any)
			id := msg["id"].(string)
			acc := rc.responses[id]
			acc.InputTokens = max(acc.InputTokens, num(u, "input_tokens"))
			acc.OutputTokens = max(acc.OutputTokens, num(u, "output_tokens"))
			acc.CacheReadTokens = max(acc.CacheReadTokens, num(u, "cache_read_input_tokens"))
			acc.CacheWriteTokens = max(acc.CacheWriteTokens, num(u, "cache_creation_input_tokens"))
			acc.CacheWrite1hTokens = max(acc.CacheWrite1hTokens, num(cc, "ephemeral_1h_input_tokens"))
			rc.responses[id] = acc
		case "user":
			tur, _ := m["toolUseResult"].(map[string]any)
			file, _ := tur["file"].(map[string]any)
			content, ok := file["content"].(string)
			if !ok {
				continue
			}
			for _, b := range blocks(msg) {
				if b["type"] == "tool_result" {
					rc.display[b["tool_use_id"].(string)] = content
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rc
}

func blocks(msg map[string]any) []map[string]any {
	list, _ := msg["content"].([]any)
	var out []map[string]any
	for _, x := range list {
		if b, ok := x.(map[string]any); ok {
			out = append(out, b)
		}
	}
	return out
}

func importFile(t *testing.T, path string) build.Session {
	t.Helper()
	return tracetest.ImportFile(t, Import, path)
}

func TestRealTraces(t *testing.T) {
	t.Parallel()
	tracetest.EachTrace(t, "claude-code", "*.jsonl", Import, func(t *testing.T, path string, _ []byte, s build.Session) {
		rc := readRaw(t, path)
		n := tracetest.Counts(s)
		if n[events.TypeToolCall] != len(rc.toolUses) {
			t.Errorf("tool calls: got %d, want %d distinct tool_use ids", n[events.TypeToolCall], len(rc.toolUses))
		}
		if n[events.TypeModelRequest] != len(rc.responses) {
			t.Errorf("model requests: got %d, want %d distinct message ids", n[events.TypeModelRequest], len(rc.responses))
		}
		var want events.Usage
		for _, u := range rc.responses {
			want.InputTokens += u.InputTokens
			want.OutputTokens += u.OutputTokens
			want.CacheReadTokens += u.CacheReadTokens
			want.CacheWriteTokens += u.CacheWriteTokens
			want.CacheWrite1hTokens += u.CacheWrite1hTokens
		}
		if got := tracetest.UsageSum(s); got != want {
			t.Errorf("usage: got %+v, want %+v", got, want)
		}
		if n[events.TypeHostCompaction] != rc.compactions {
			t.Errorf("host compactions: got %d, want %d", n[events.TypeHostCompaction], rc.compactions)
		}
		// No output comes from the toolUseResult display copy.
		for _, e := range s.Events {
			r, ok := e.Data.(*events.ToolResult)
			if !ok {
				continue
			}
			if d, ok := rc.display[r.CallID]; ok && d != "" && *r.Output == d {
				t.Errorf("result %s: output is the toolUseResult copy", r.Item)
			}
		}
		t.Logf("%s: %d events, %d tool calls, %d model requests, %d compactions",
			filepath.Base(path), len(s.Events), n[events.TypeToolCall], n[events.TypeModelRequest], n[events.TypeHostCompaction])
	})
}

// TestRealTraceDetails checks known cases in particular files.
func TestRealTraceDetails(t *testing.T) {
	t.Parallel()
	files := tracetest.Files(t, "claude-code", "*.jsonl")
	byName := map[string]string{}
	for _, f := range files {
		byName[filepath.Base(f)] = f
	}
	t.Run("read output is content, not toolUseResult", func(t *testing.T) {
		path, ok := byName["entirecli-64-267478c135-0.jsonl"]
		if !ok {
			t.Skip("file not present")
		}
		s := importFile(t, path)
		r := findResult(s, "toolu_019E9F84EtLwBtVcQy22D1uq")
		if r == nil {
			t.Fatal("result not found")
		}
		// The model saw the line-numbered text; toolUseResult.file.content
		// holds the bare file.
		if !strings.HasPrefix(*r.Output, "     1→Now I have") {
			t.Errorf("output starts %q", (*r.Output)[:min(40, len(*r.Output))])
		}
		if r.Source == nil || r.Source.Kind != "file" || r.Source.Path == "" {
			t.Errorf("source = %+v, want a file", r.Source)
		}
	})
	for _, name := range []string{"entirecli-0e-3fdc072c53-0.jsonl", "entirecli-d0-161e0df1cb-0.jsonl"} {
		t.Run("compaction "+name, func(t *testing.T) {
			path, ok := byName[name]
			if !ok {
				t.Skip("file not present")
			}
			s := importFile(t, path)
			found := false
			for i, e := range s.Events {
				hc, ok := e.Data.(*events.HostCompaction)
				if !ok {
					continue
				}
				found = true
				if hc.Host != "claude-code" || hc.SourceID == "" || hc.PreTokens <= 0 {
					t.Errorf("host compaction %+v", hc)
				}
				// The summary follows as a meta user message.
				for _, f := range s.Events[i+1:] {
					if m, ok := f.Data.(*events.Message); ok {
						if m.Role != events.RoleUser || !m.Meta || !strings.HasPrefix(m.Text, "This session is being continued") {
							t.Errorf("message after compaction: %+v", m)
						}
						break
					}
				}
			}
			if !found {
				t.Error("no host_compaction event")
			}
		})
	}
}

func findResult(s build.Session, callID string) *events.ToolResult {
	for _, e := range s.Events {
		if r, ok := e.Data.(*events.ToolResult); ok && r.CallID == callID {
			return r
		}
	}
	return nil
}
