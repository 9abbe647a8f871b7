package openhands

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
	"github.com/prunesched/prunesched/internal/importers/internal/tracetest"
)

const resp1 = `{"id":"chatcmpl-1","model":"claude-x","choices":[{"message":{"tool_calls":[{"id":"toolu_1","function":{"arguments":"{\"command\": \"view\", \"path\": \"/w/a.py\"}","name":"str_replace_editor"}},{"id":"toolu_2","function":{"arguments":"{\"command\": \"pytest\"}","name":"execute_bash"}}]}}],"usage":{"prompt_tokens":3475,"completion_tokens":95,"prompt_tokens_details":{"cached_tokens":0},"cache_creation_input_tokens":3471,"cache_read_input_tokens":0}}`

// sample: one model response with two actions (read, run); the response and
// its usage are copied onto both actions and both observations.
var sample = `[
 {"id":0,"timestamp":"2025-01-27T23:16:50.2","source":"user","message":"m","action":"message","args":{"content":"fix a.py"}},
 {"id":1,"timestamp":"2025-01-27T23:16:51.0","source":"environment","observation":"agent_state_changed","content":"","extras":{"agent_state":"running"}},
 {"id":3,"timestamp":"2025-01-27T23:16:54.1","source":"agent","action":"read","args":{"path":"/w/a.py","thought":"look first","impl_source":"oh_aci"},
  "tool_call_metadata":{"function_name":"str_replace_editor","tool_call_id":"toolu_1","total_calls_in_response":2,"model_response":` + resp1 + `}},
 {"id":4,"timestamp":"2025-01-27T23:16:54.2","source":"agent","action":"run","args":{"command":"pytest","thought":"look first"},
  "tool_call_metadata":{"function_name":"execute_bash","tool_call_id":"toolu_2","total_calls_in_response":2,"model_response":` + resp1 + `}},
 {"id":5,"timestamp":"2025-01-27T23:16:54.3","source":"agent","observation":"read","cause":3,"content":"1\tx = 1","extras":{"path":"/w/a.py"},
  "tool_call_metadata":{"function_name":"str_replace_editor","tool_call_id":"toolu_1","model_response":` + resp1 + `}},
 {"id":6,"timestamp":"2025-01-27T23:16:57.6","source":"agent","observation":"run","cause":4,"content":"1 failed","extras":{"command":"pytest","metadata":{"exit_code":1}},"success":false,
  "tool_call_metadata":{"function_name":"execute_bash","tool_call_id":"toolu_2","model_response":` + resp1 + `}},
 {"id":7,"timestamp":"2025-01-27T23:16:58.0","source":"agent","action":"message","args":{"content":"Tests fail."}}
]`

func importString(t *testing.T, in string) build.Session {
	t.Helper()
	return tracetest.ImportOne(t, Import, in, "dir/x.json")
}

func TestSample(t *testing.T) {
	s := importString(t, sample)
	n := tracetest.Counts(s)
	if n[events.TypeModelRequest] != 1 || n[events.TypeToolCall] != 2 || n[events.TypeToolResult] != 2 || n[events.TypeMessage] != 3 {
		t.Fatalf("counts %v", n)
	}
	if got, want := tracetest.UsageSum(s), (events.Usage{InputTokens: 4, CacheWriteTokens: 3471, OutputTokens: 95}); got != want {
		t.Errorf("usage %+v, want %+v (once for the response)", got, want)
	}
	calls := tracetest.OfType[*events.ToolCall](s)
	if calls[0].CallID != "toolu_1" || calls[0].Tool != "str_replace_editor" || string(calls[0].Input) != `{"command": "view", "path": "/w/a.py"}` {
		t.Errorf("call %+v %s", calls[0], calls[0].Input)
	}
	res := tracetest.OfType[*events.ToolResult](s)
	if r := res[0]; r.CallID != "toolu_1" || r.Source == nil || *r.Source != (events.SourceIdentity{Kind: "file", Path: "/w/a.py"}) || r.IsError {
		t.Errorf("read %+v", r)
	}
	if r := res[1]; r.CallID != "toolu_2" || !r.IsError || *r.ExitCode != 1 || r.Error.Type != "exit_code" || r.Source.Kind != "command" {
		t.Errorf("run %+v", r)
	}
	if s.SourceID != "x" || s.Events[1].Time.Format("15:04:05.0") != "23:16:50.2" {
		t.Errorf("source id %q time %s", s.SourceID, s.Events[1].Time)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"syntax", "[\n{,}]", "x.json:2:"},
		{"object", `{"a":1}`, `x.json: not a JSON object`},
		{"v1", `[{"kind":"ActionEvent","id":"a"}]`, `x.json: [0]: field "kind": OpenHands V1`},
		{"time", `[{"id":1,"timestamp":"then","action":"message","args":{}}]`, `x.json: [0]: field "timestamp"`},
		{"type", `[{"id":1,"action":"run","args":{}},{"id":2,"observation":"run","cause":1,"timestamp":5}]`, `x.json: [1]: field "timestamp"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Import(strings.NewReader(tc.in), "x.json")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
}

func TestRealTraces(t *testing.T) {
	tracetest.EachTrace(t, "openhands", "*.json", Import, func(t *testing.T, path string, data []byte, s build.Session) {
		var raw []map[string]any
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatal(err)
		}
		responses := map[string]events.Usage{}
		calls, results := 0, 0
		actionCalls := map[float64]bool{}
		for _, e := range raw {
			tm, _ := e["tool_call_metadata"].(map[string]any)
			if _, ok := e["action"]; ok && tm != nil {
				calls++
				actionCalls[e["id"].(float64)] = true
				r := tm["model_response"].(map[string]any)
				u := r["usage"].(map[string]any)
				read, write := int(u["cache_read_input_tokens"].(float64)), int(u["cache_creation_input_tokens"].(float64))
				responses[r["id"].(string)] = events.Usage{InputTokens: int(u["prompt_tokens"].(float64)) - read - write, CacheReadTokens: read, CacheWriteTokens: write, OutputTokens: int(u["completion_tokens"].(float64))}
			}
			if c, ok := e["cause"].(float64); ok && actionCalls[c] {
				results++
			}
		}
		var want events.Usage
		for _, u := range responses {
			want.InputTokens += u.InputTokens
			want.CacheReadTokens += u.CacheReadTokens
			want.CacheWriteTokens += u.CacheWriteTokens
			want.OutputTokens += u.OutputTokens
		}
		n := tracetest.Counts(s)
		if n[events.TypeToolCall] != calls || n[events.TypeToolResult] != results || n[events.TypeModelRequest] != len(responses) {
			t.Errorf("counts %v, want %d calls %d results %d responses", n, calls, results, len(responses))
		}
		if got := tracetest.UsageSum(s); got != want {
			t.Errorf("usage %+v, want %+v", got, want)
		}
		t.Logf("%s: %d events, %d tool calls, %d model requests", filepath.Base(path), len(s.Events), n[events.TypeToolCall], n[events.TypeModelRequest])
	})
}

func FuzzOpenHands(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte(`[{"id":"1","action":"run","args":[],"tool_call_metadata":{}},{"observation":"error","cause":"1","content":"boom"}]`))
	f.Add([]byte(`[{"id":1e400}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ss, err := Import(bytes.NewReader(data), "fuzz.json")
		if err != nil {
			return
		}
		for _, s := range ss {
			tracetest.Check(t, s)
		}
	})
}
