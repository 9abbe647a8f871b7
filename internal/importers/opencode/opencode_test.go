package opencode

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
	"github.com/prunesched/prunesched/internal/importers/internal/tracetest"
)

// A small synthetic export: a user turn with an injected file, then one
// assistant step with reasoning, a completed read (already compacted by
// OpenCode), a failing bash, an errored glob and a running call.
const sample = `{
  "info": {"id": "ses_abc", "directory": "/w", "title": "T", "version": "1.2.5", "time": {"created": 1700000000000}},
  "messages": [
    {"info": {"id": "msg_u1", "role": "user", "time": {"created": 1700000001000}, "model": {"providerID": "anthropic", "modelID": "claude-x"}},
     "parts": [
       {"id": "prt_1", "type": "text", "text": "fix it"},
       {"id": "prt_2", "type": "file", "mime": "text/plain", "filename": "a.go"},
       {"id": "prt_3", "type": "text", "synthetic": true, "text": "Called the Read tool"}
     ]},
    {"info": {"id": "msg_a1", "role": "assistant", "time": {"created": 1700000002000}, "providerID": "anthropic", "modelID": "claude-x",
              "path": {"cwd": "/w"}, "tokens": {"input": 10, "output": 20, "reasoning": 5, "cache": {"read": 100, "write": 50}}},
     "parts": [
       {"id": "prt_4", "type": "step-start"},
       {"id": "prt_5", "type": "reasoning", "text": "think", "time": {"start": 1700000002500}},
       {"id": "prt_6", "type": "tool", "callID": "call_1", "tool": "read",
        "state": {"status": "completed", "input": {"filePath": "/w/a.go", "offset": 5}, "output": "<content>1: x</content>",
                  "time": {"start": 1700000003000, "end": 1700000003100, "compacted": 1700000009000}}},
       {"id": "prt_7", "type": "tool", "callID": "call_2", "tool": "bash",
        "state": {"status": "completed", "input": {"command": "go test"}, "output": "FAIL\nexit status 1", "metadata": {"exit": 1},
                  "time": {"start": 1700000003200, "end": 1700000004000}}},
       {"id": "prt_8", "type": "tool", "callID": "call_3", "tool": "glob",
        "state": {"status": "error", "input": {"pattern": "*.go"}, "error": "Error: No such file or directory: '/w/x'",
                  "time": {"start": 1700000004100, "end": 1700000004200}}},
       {"id": "prt_9", "type": "tool", "callID": "call_4", "tool": "bash",
        "state": {"status": "running", "input": {"command": "sleep 9"}, "time": {"start": 1700000004300}}},
       {"id": "prt_10", "type": "step-finish", "tokens": {"input": 10, "output": 20, "cache": {"read": 100, "write": 50}}}
     ]}
  ]
}`

func importString(t *testing.T, in string) build.Session {
	t.Helper()
	return tracetest.ImportOne(t, Import, in, "x.json")
}

func TestSample(t *testing.T) {
	s := importString(t, sample)
	var got []string
	for _, e := range s.Events {
		got = append(got, e.ID+":"+string(e.Type))
	}
	want := []string{
		"oc-start:session_started",
		"oc-0-0-0:message", "oc-0-2-0:message",
		"oc-1-req:model_request", "oc-1-1-0:message",
		"oc-1-2-0:tool_call", "oc-1-3-0:tool_call", "oc-1-4-0:tool_call", "oc-1-5-0:tool_call",
		"oc-1-2-1:tool_result", "oc-1-3-1:tool_result", "oc-1-4-1:tool_result",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	st := s.Events[0].Data.(*events.SessionStarted)
	if *st != (events.SessionStarted{Format: "opencode", SourcePath: "x.json", SourceID: "ses_abc", Agent: "opencode/1.2.5", CWD: "/w", Provider: "anthropic", Model: "claude-x", Title: "T"}) {
		t.Errorf("session started %+v", st)
	}
	if s.Events[0].Session != "ses_abc" {
		t.Errorf("session %q", s.Events[0].Session)
	}
	msgs := tracetest.OfType[*events.Message](s)
	if msgs[0].Meta || !msgs[1].Meta || msgs[1].Item != "prt_3" || msgs[2].Kind != events.KindThinking || msgs[2].Role != events.RoleAssistant {
		t.Errorf("messages %+v %+v %+v", msgs[0], msgs[1], msgs[2])
	}
	mr := tracetest.OfType[*events.ModelRequest](s)[0]
	if *mr.Usage != (events.Usage{InputTokens: 10, OutputTokens: 20, CacheReadTokens: 100, CacheWriteTokens: 50}) || mr.Request != "msg_a1" || mr.CacheTTL != "5m" {
		t.Errorf("model request %+v usage %+v", mr, mr.Usage)
	}
	res := tracetest.OfType[*events.ToolResult](s)
	read, bash, glob := res[0], res[1], res[2]
	if !read.HostPruned || read.IsError || *read.Output != "<content>1: x</content>" ||
		*read.Source != (events.SourceIdentity{Kind: "file", Path: "/w/a.go", Offset: 5}) {
		t.Errorf("read %+v", read)
	}
	if !bash.IsError || bash.ExitCode == nil || *bash.ExitCode != 1 || bash.Error.Type != "exit_code" || bash.Error.Message != "FAIL\nexit status 1" || bash.HostPruned {
		t.Errorf("bash %+v %+v", bash, bash.Error)
	}
	if !glob.IsError || glob.Error.Type != "not_found" || *glob.Output != "Error: No such file or directory: '/w/x'" ||
		*glob.Source != (events.SourceIdentity{Kind: "search", Path: "/w"}) {
		t.Errorf("glob %+v %+v", glob, glob.Error)
	}
	// Results come after the step, at their end times.
	if got := s.Events[len(s.Events)-1].Time.UnixMilli(); got != 1700000004300 {
		t.Errorf("last result at %d (clamped to the running call's start)", got)
	}
}

func TestRepeatedCallID(t *testing.T) {
	in := `{"info":{"id":"ses_1"},"messages":[{"info":{"id":"m","role":"assistant"},"parts":[
	  {"id":"p","type":"tool","callID":"c","tool":"read","state":{"status":"completed","input":{},"output":"a"}},
	  {"id":"p","type":"tool","callID":"c","tool":"read","state":{"status":"completed","output":"b"}},
	  {"id":"p","type":"text","text":"x"},{"id":"p","type":"text","text":"y"}]}]}`
	s := importString(t, in)
	calls := tracetest.OfType[*events.ToolCall](s)
	if calls[0].CallID != "c" || calls[1].CallID != "c:2" || string(calls[1].Input) != "{}" {
		t.Errorf("calls %+v %+v", calls[0], calls[1])
	}
	msgs := tracetest.OfType[*events.Message](s)
	if msgs[0].Item != "p" || msgs[1].Item != "p:2" {
		t.Errorf("items %s %s", msgs[0].Item, msgs[1].Item)
	}
	// No times anywhere: the epoch stands in.
	if !s.Events[0].Time.Equal(s.Events[len(s.Events)-1].Time) || s.Events[0].Time.Unix() != 0 {
		t.Errorf("times %v", s.Events[0].Time)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"bad json", "{\n \"info\": {\n  \"id\": \"ses\",\n}", `x.json:4:1: invalid JSON`},
		{"no info", `{"messages":[]}`, `x.json: field "info": missing`},
		{"no messages", `{"info":{}}`, `x.json: field "messages": missing`},
		{"messages not a list", `{"info":{},"messages":{}}`, `x.json: field "messages": bad value`},
		{"role missing", `{"info":{},"messages":[{"info":{}}]}`, `x.json: messages[0]: field "info.role": missing`},
		{"role bad", `{"info":{},"messages":[{"info":{"role":"robot"}}]}`, `x.json: messages[0]: field "info.role": bad value "robot"`},
		{"tokens wrong type", `{"info":{},"messages":[{"info":{"role":"assistant","tokens":{"input":"1"}}}]}`, `x.json: messages[0]: field "info.tokens.input": bad value`},
		{"part type missing", `{"info":{},"messages":[{"info":{"role":"user"},"parts":[{"text":"x"}]}]}`, `x.json: messages[0].parts[0]: field "type": missing`},
		{"callID missing", `{"info":{},"messages":[{"info":{"role":"assistant"},"parts":[{"type":"tool","tool":"read","state":{}}]}]}`, `x.json: messages[0].parts[0]: field "callID": missing`},
		{"state missing", `{"info":{},"messages":[{"info":{"role":"assistant"},"parts":[{"type":"tool","tool":"read","callID":"c"}]}]}`, `x.json: messages[0].parts[0]: field "state": missing`},
		{"text wrong type", `{"info":{},"messages":[{"info":{"role":"user"},"parts":[{"type":"text","text":7}]}]}`, `x.json: messages[0].parts[0]: field "text": bad value`},
		{"negative tokens", `{"info":{},"messages":[{"info":{"role":"assistant","tokens":{"input":-1}}}]}`, `x.json: messages[0]: field "data.usage": negative`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Import(strings.NewReader(tc.in), "x.json")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
}

func FuzzOpenCode(f *testing.F) {
	for _, in := range []string{
		sample,
		`{"info":{"id":"ses_1"},"messages":[]}`,
		`{"info":{"id":"s"},"messages":[{"info":{"id":"m","role":"assistant","time":{"created":1}},"parts":[{"type":"tool","callID":"c","tool":"bash","state":{"status":"error","error":{"x":1},"metadata":{"exit":2}}}]}]}`,
		`{"info":{},"messages":[{"info":{"role":"user"},"parts":[{"type":"reasoning","text":"x"},{"type":"compaction"}]}]}`,
	} {
		f.Add([]byte(in))
	}
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
