package miniswe

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

// sample: one turn stored twice (the message and extra.response), a read, a
// failing test and an unanswered submit.
const sample = `{"trajectory_format":"mini-swe-agent-1.1","instance_id":"repo__1","info":{"mini_version":"2.2.7"},"messages":[
 {"role":"system","content":"You are a helpful assistant."},
 {"role":"user","content":"Fix the bug."},
 {"role":"assistant","content":"Look at a.py","tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\": \"cat a.py\"}"}}],
  "extra":{"timestamp":1775795344.5,"actions":[{"command":"cat a.py","tool_call_id":"call_1"}],
   "response":{"id":"r1","created":1775795343,"model":"deepseek-chat","choices":[{"message":{"content":"Look at a.py","tool_calls":[{"id":"call_1","function":{"name":"bash","arguments":"{\"command\": \"cat a.py\"}"}}]}}],
   "usage":{"prompt_tokens":1500,"completion_tokens":70,"prompt_tokens_details":{"cached_tokens":320},"prompt_cache_hit_tokens":320,"prompt_cache_miss_tokens":1180}}}},
 {"role":"tool","tool_call_id":"call_1","content":"<returncode>0</returncode>\n<output>\nx = 1\n</output>","extra":{"raw_output":"x = 1\n","returncode":0,"timestamp":1775795345.0}},
 {"role":"assistant","content":"","tool_calls":[{"id":"call_2","type":"function","function":{"name":"bash","arguments":"{\"command\": \"cd /testbed && python -m pytest -x\"}"}}],
  "extra":{"timestamp":1775795347.0,"response":{"id":"r2","model":"deepseek-chat","usage":{"prompt_tokens":1700,"completion_tokens":30,"prompt_cache_hit_tokens":1500}}}},
 {"role":"tool","tool_call_id":"call_2","content":"<returncode>1</returncode>\n<output>\nFAILED test_a.py::test_x\n</output>","extra":{"raw_output":"FAILED","returncode":1,"timestamp":1775795348.0,"exception_info":""}},
 {"role":"assistant","content":"done","tool_calls":[{"id":"call_3","type":"function","function":{"name":"bash","arguments":"{\"command\": \"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\"}"}}],"extra":{"response":{"id":"r3","usage":{"prompt_tokens":1800,"completion_tokens":5}}}},
 {"role":"exit","content":"diff --git a/a.py b/a.py","extra":{"exit_status":"Submitted"}}]}`

func importString(t *testing.T, in string) build.Session {
	t.Helper()
	return tracetest.ImportOne(t, Import, in, "x.traj.json")
}

func TestSample(t *testing.T) {
	s := importString(t, sample)
	if s.SourceID != "repo__1" || s.Events[0].Data.(*events.SessionStarted).Agent != "mini-swe-agent/2.2.7" {
		t.Errorf("session %+v", s.Events[0].Data)
	}
	n := tracetest.Counts(s)
	// The doubled turn (extra.response) counts once: 3 requests, 3 calls.
	if n[events.TypeModelRequest] != 3 || n[events.TypeToolCall] != 3 || n[events.TypeToolResult] != 2 || n[events.TypeMessage] != 4 {
		t.Errorf("counts %v", n)
	}
	want := events.Usage{InputTokens: 1180 + 200 + 1800, CacheReadTokens: 320 + 1500, OutputTokens: 105}
	if got := tracetest.UsageSum(s); got != want {
		t.Errorf("usage %+v, want %+v", got, want)
	}
	res := tracetest.OfType[*events.ToolResult](s)
	if r := res[0]; r.Item != "call_1" || r.Source == nil || r.Source.Kind != "file" || r.Source.Path != "a.py" || *r.ExitCode != 0 || !strings.HasPrefix(*r.Output, "<returncode>0") {
		t.Errorf("read %+v %+v", r, r.Source)
	}
	if r := res[1]; !r.IsError || *r.ExitCode != 1 || r.Error.Message != "FAILED test_a.py::test_x" || r.Source.Kind != "command" || r.Determinism != "" {
		t.Errorf("test %+v %+v", r, r.Error)
	}
	if got := s.Events[2].Time.Unix(); got != 1775795344 {
		t.Errorf("time %d", got)
	}
}

func TestFencedBlock(t *testing.T) {
	s := importString(t, `{"trajectory_format":"mini-swe-agent-1","messages":[{"role":"assistant","content":"THOUGHT\n`+"```bash\\nls -la\\n```"+`"},{"role":"user","content":"<returncode>2</returncode>\n<output>ls: no</output>"}]}`)
	res := tracetest.OfType[*events.ToolResult](s)
	if len(res) != 1 || !res[0].IsError || *res[0].ExitCode != 2 || res[0].Source.Kind != "search" {
		t.Fatalf("results %+v", res)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"syntax", "{\n\"messages\": [,]}", "x.traj.json:2:"},
		{"no messages", `{"info":{}}`, `x.traj.json: field "messages": missing`},
		{"role", `{"messages":[{"role":"robot","content":""}]}`, `x.traj.json: messages[0]: field "role": bad value`},
		{"content", `{"messages":[{"role":"user","content":5}]}`, `x.traj.json: messages[0]: field "content"`},
		{"call id", `{"messages":[{"role":"assistant","content":"","tool_calls":[{"function":{"name":"bash"}}]}]}`, `x.traj.json: messages[0]: field "tool_calls[0].id": missing`},
		{"usage type", `{"messages":[{"role":"assistant","content":"","extra":{"response":{"usage":{"prompt_tokens":"x"}}}}]}`, `x.traj.json: messages[0]: field "extra.response.usage.prompt_tokens"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Import(strings.NewReader(tc.in), "x.traj.json")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
}

func TestRealTraces(t *testing.T) {
	tracetest.EachTrace(t, "mini-swe-agent", "*.traj.json", Import, func(t *testing.T, path string, data []byte, s build.Session) {
		var raw struct {
			Messages []map[string]any `json:"messages"`
		}
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatal(err)
		}
		var assistants, tools, calls, failed int
		var want events.Usage
		for _, m := range raw.Messages {
			switch m["role"] {
			case "assistant":
				assistants++
				tc, _ := m["tool_calls"].([]any)
				calls += len(tc)
				u := m["extra"].(map[string]any)["response"].(map[string]any)["usage"].(map[string]any)
				hit := int(u["prompt_cache_hit_tokens"].(float64))
				want.CacheReadTokens += hit
				want.InputTokens += int(u["prompt_tokens"].(float64)) - hit
				want.OutputTokens += int(u["completion_tokens"].(float64))
			case "tool":
				tools++
				if !strings.HasPrefix(m["content"].(string), "<returncode>0") {
					failed++
				}
			}
		}
		n := tracetest.Counts(s)
		if n[events.TypeModelRequest] != assistants || n[events.TypeToolCall] != calls || n[events.TypeToolResult] != tools {
			t.Errorf("counts %v, want %d requests %d calls %d results", n, assistants, calls, tools)
		}
		if got := tracetest.UsageSum(s); got != want {
			t.Errorf("usage %+v, want %+v (each turn once)", got, want)
		}
		errs := 0
		for _, r := range tracetest.OfType[*events.ToolResult](s) {
			if r.IsError {
				errs++
			}
		}
		if errs != failed {
			t.Errorf("%d errors, want %d", errs, failed)
		}
		t.Logf("%s: %d events, %d tool calls, %d model requests, %d errors", filepath.Base(path), len(s.Events), n[events.TypeToolCall], n[events.TypeModelRequest], errs)
	})
}

func FuzzMiniSWE(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte(`{"messages":[{"role":"tool","tool_call_id":"x","content":[{"type":"text","text":"<returncode>-1</returncode>"}],"extra":{"returncode":"7"}}]}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","content":"` + "```sh\\nrm -rf /\\n```" + `"},{"role":"user","content":"<returncode>0</returncode>"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ss, err := Import(bytes.NewReader(data), "fuzz.traj.json")
		if err != nil {
			return
		}
		for _, s := range ss {
			tracetest.Check(t, s)
		}
	})
}
