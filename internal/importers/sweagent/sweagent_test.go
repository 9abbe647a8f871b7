package sweagent

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

// sample0x: a SWE-agent 0.x trajectory (actions as strings, positional).
const sample0x = `{"environment":"swe_main","trajectory":[
 {"action":"open src/a.py 10\n","observation":"[File: src/a.py]","state":"{\"open_file\": \"/r/src/a.py\", \"working_dir\": \"/r\"}"},
 {"action":"edit 3:3\n    return 1\nend_of_edit\n","observation":"Your proposed edit has introduced new syntax error(s).","state":"{\"open_file\": \"/r/src/a.py\", \"working_dir\": \"/r\"}"},
 {"action":"python -m pytest tests\n","observation":"1 passed","state":"{\"open_file\": \"/r/src/a.py\", \"working_dir\": \"/r\"}"}],
 "history":[
 {"role":"system","content":"SETTING","agent":"primary"},
 {"role":"user","content":"DEMO","is_demo":true,"agent":"primary"},
 {"role":"user","content":"ISSUE","agent":"primary"},
 {"role":"assistant","content":"open it","thought":"open it","action":"open src/a.py 10\n","agent":"primary"},
 {"role":"user","content":"[File: src/a.py]","agent":"primary"},
 {"role":"assistant","content":"edit","action":"edit 3:3\n    return 1\nend_of_edit\n","agent":"primary"},
 {"role":"user","content":"Your proposed edit has introduced new syntax error(s).","agent":"primary"},
 {"role":"assistant","content":"test","action":"python -m pytest tests\n","agent":"primary"},
 {"role":"user","content":"1 passed","agent":"primary"}],
 "info":{"model_stats":{"tokens_sent":100}}}`

// sample10: function calling, with the final prompt snapshot collapsing the
// first observation.
const sample10 = `{"trajectory":[
 {"action":"ls -F","observation":"a b","state":{"open_file":"n/a","working_dir":"/testbed"}},
 {"action":"cat a","observation":"x","state":{"open_file":"n/a","working_dir":"/testbed"},
  "messages":[{"role":"system","content":"S"},{"role":"user","content":"I"},
   {"role":"assistant","content":"ls","tool_calls":[{"id":"c1","function":{"name":"bash","arguments":"{\"command\":\"ls -F\"}"}}]},
   {"role":"tool","content":[{"type":"text","text":"Old environment output: (1 lines omitted)"}],"tool_call_ids":["c1"]},
   {"role":"assistant","content":"cat","tool_calls":[{"id":"c2","function":{"name":"bash","arguments":"{\"command\":\"cat a\"}"}}]},
   {"role":"tool","content":"x","tool_call_ids":["c2"]}]}],
 "history":[{"role":"system","content":"S","message_type":"system_prompt"},{"role":"user","content":"I","message_type":"observation"},
   {"role":"assistant","content":"ls","action":"ls -F","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls -F\"}"}}],"message_type":"action"},
   {"role":"tool","content":"a b","tool_call_ids":["c1"],"message_type":"observation"},
   {"role":"assistant","content":"cat","action":"cat a","tool_calls":[{"id":"c2","type":"function","function":{"name":"bash","arguments":"{\"command\":\"cat a\"}"}}],"message_type":"action"},
   {"role":"tool","content":"x","tool_call_ids":["c2"],"message_type":"observation"}],
 "info":{}}`

func importString(t *testing.T, in string) build.Session {
	t.Helper()
	return tracetest.ImportOne(t, Import, in, "x.traj")
}

func TestActionStrings(t *testing.T) {
	s := importString(t, sample0x)
	calls := tracetest.OfType[*events.ToolCall](s)
	if len(calls) != 3 || calls[0].Tool != "open" || calls[0].CallID != "step-0" || string(calls[0].Input) != `{"line_number":10,"path":"src/a.py"}` {
		t.Fatalf("calls %v %s", calls, calls[0].Input)
	}
	if calls[1].Tool != "edit" || !strings.Contains(string(calls[1].Input), `"path":"/r/src/a.py"`) || calls[2].Tool != "bash" {
		t.Errorf("edit/bash %s %s", calls[1].Input, calls[2].Input)
	}
	res := tracetest.OfType[*events.ToolResult](s)
	if len(res) != 3 || res[0].Source == nil || res[0].Source.Path != "src/a.py" || !res[1].IsError || res[1].Error.Type != "edit_rejected" || res[2].IsError {
		t.Errorf("results %+v", res)
	}
	msgs := tracetest.OfType[*events.Message](s)
	if !msgs[1].Meta || msgs[1].Text != "DEMO" || msgs[2].Meta {
		t.Errorf("demo %+v", msgs[1])
	}
	if n := tracetest.Counts(s)[events.TypeModelRequest]; n != 3 {
		t.Errorf("%d requests", n)
	}
	if s.Events[0].Data.(*events.SessionStarted).CWD != "/r" {
		t.Error("cwd from state")
	}
}

func TestCollapsedByHost(t *testing.T) {
	s := importString(t, sample10)
	res := tracetest.OfType[*events.ToolResult](s)
	if len(res) != 2 || res[0].CallID != "c1" || !res[0].HostPruned || *res[0].Output != "a b" || res[1].HostPruned {
		t.Fatalf("results %+v", res)
	}
	if res[1].Source == nil || res[1].Source.Kind != "file" || res[1].Source.Path != "a" {
		t.Errorf("source %+v", res[1].Source)
	}
}

func TestParseAction(t *testing.T) {
	for _, tc := range []struct{ action, open, tool, input string }{
		{"find_file \"x.py\" src", "", "find_file", `{"dir":"src","file_name":"x.py"}`},
		{"search_dir foo", "", "search_dir", `{"search_term":"foo"}`},
		{"create b.py", "", "create", `{"filename":"b.py"}`},
		{"submit", "", "submit", `{}`},
		{"ls -la | head", "", "bash", `{"command":"ls -la | head"}`},
		{"edit 1:2\nx\nend_of_edit", "n/a", "edit", `{"range":"1:2","text":"x"}`},
	} {
		tool, in := ParseAction(tc.action, tc.open)
		if tool != tc.tool || string(in) != tc.input {
			t.Errorf("ParseAction(%q) = %s %s, want %s %s", tc.action, tool, in, tc.tool, tc.input)
		}
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"syntax", "{\n\"history\": [}", "x.traj:2:"},
		{"empty", `{"info":{}}`, `x.traj: field "history": missing`},
		{"role", `{"history":[{"role":"robot","content":""}]}`, `x.traj: history[0]: field "role": bad value`},
		{"content", `{"history":[{"role":"user","content":5}]}`, `x.traj: history[0]: field "content"`},
		{"entry type", `{"history":[{"role":"user","is_demo":"yes"}]}`, `x.traj: history[0]: field "is_demo"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Import(strings.NewReader(tc.in), "x.traj")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
}

func TestRealTraces(t *testing.T) {
	tracetest.EachTrace(t, "swe-agent", "*.traj", Import, func(t *testing.T, path string, data []byte, s build.Session) {
		var raw struct {
			Trajectory []struct {
				Messages []map[string]any `json:"messages"`
			} `json:"trajectory"`
		}
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatal(err)
		}
		collapsed := 0
		if last := raw.Trajectory[len(raw.Trajectory)-1]; last.Messages != nil {
			for _, m := range last.Messages {
				text, _ := m["content"].(string)
				if l, ok := m["content"].([]any); ok && len(l) > 0 {
					text, _ = l[0].(map[string]any)["text"].(string)
				}
				if strings.HasPrefix(text, CollapsedPrefix) {
					collapsed++
				}
			}
		}
		n := tracetest.Counts(s)
		pruned := 0
		for _, r := range tracetest.OfType[*events.ToolResult](s) {
			if r.HostPruned {
				pruned++
				if strings.HasPrefix(*r.Output, CollapsedPrefix) {
					t.Errorf("%s: imported the collapsed text, not the observation", r.Item)
				}
			}
		}
		if pruned != collapsed {
			t.Errorf("host-pruned %d, want %d collapsed in the final prompt", pruned, collapsed)
		}
		if n[events.TypeToolCall] != len(raw.Trajectory) || n[events.TypeModelRequest] != len(raw.Trajectory) {
			t.Errorf("counts %v, want %d steps", n, len(raw.Trajectory))
		}
		t.Logf("%s: %d events, %d tool calls, %d model requests, %d host-pruned", filepath.Base(path), len(s.Events), n[events.TypeToolCall], n[events.TypeModelRequest], pruned)
	})
}

func FuzzSWEAgent(f *testing.F) {
	f.Add([]byte(sample0x))
	f.Add([]byte(sample10))
	f.Add([]byte(`{"trajectory":[{"action":"edit","state":"{"}],"history":[{"role":"assistant","tool_calls":[{"function":{"name":"x","arguments":5}}]},{"role":"tool","tool_call_ids":["zz"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ss, err := Import(bytes.NewReader(data), "fuzz.traj")
		if err != nil {
			return
		}
		for _, s := range ss {
			tracetest.Check(t, s)
		}
	})
}
