package importers

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/toolspec"
)

// shellTrace writes a one-call trace of a format whose shell call is given
// the JSON arguments args; its result is what the importer reads.
var shellTraces = map[string]func(args string) string{
	FormatCodex: func(args string) string {
		a, _ := json.Marshal(args)
		return `{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":` + string(a) + `,"call_id":"c1"}}` + "\n" +
			`{"type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"ok"}}` + "\n"
	},
	FormatMiniSWE: func(args string) string {
		a, _ := json.Marshal(args)
		return `{"trajectory_format":"mini-swe-agent-1.1","messages":[
 {"role":"user","content":"Fix the bug."},
 {"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":` + string(a) + `}}]},
 {"role":"tool","tool_call_id":"call_1","content":"<returncode>0</returncode>\n<output>\nok\n</output>","extra":{"returncode":0}}]}`
	},
	FormatOpenHands: func(args string) string {
		return `[
 {"id":1,"timestamp":"2025-01-27T23:16:50.2","source":"user","message":"m","action":"message","args":{"content":"fix a.py"}},
 {"id":2,"timestamp":"2025-01-27T23:16:54.2","source":"agent","action":"run","args":` + args + `,
  "tool_call_metadata":{"function_name":"execute_bash","tool_call_id":"t1","total_calls_in_response":1}},
 {"id":3,"timestamp":"2025-01-27T23:16:57.6","source":"agent","observation":"run","cause":2,"content":"ok","extras":{"metadata":{"exit_code":0}},
  "tool_call_metadata":{"function_name":"execute_bash","tool_call_id":"t1"}}]`
	},
}

var traceNames = map[string]string{FormatCodex: "x.jsonl", FormatMiniSWE: "x.traj.json", FormatOpenHands: "dir/x.json", FormatClaudeCode: "x.jsonl", FormatOpenCode: "x.json"}

// onlySource returns the source of the one tool result imported.
func onlySource(t *testing.T, ss []Session) *events.SourceIdentity {
	t.Helper()
	var got *events.SourceIdentity
	n := 0
	for _, e := range ss[0].Events {
		if r, ok := e.Data.(*events.ToolResult); ok {
			got, n = r.Source, n+1
		}
	}
	if n != 1 {
		t.Fatalf("%d results, want 1", n)
	}
	return got
}

// TestImportersAgreeWithToolspec feeds the same shell commands through every
// importer that records a shell call's source and through toolspec: the
// source each importer records must be toolspec's for the command toolspec
// reads from the arguments (one command classifier, one argv reading: an
// argv whose program merely ends in "sh", like ssh, is not a shell's -c).
func TestImportersAgreeWithToolspec(t *testing.T) {
	args := []string{
		`{"command":"cat a.py"}`,
		`{"command":"sed -n 1,20p a.go"}`,
		`{"command":"grep -rn foo ."}`,
		`{"command":"ls -la"}`,
		`{"command":"go test ./..."}`,
		`{"command":"ssh host cat a.py"}`,
		`{"command":["bash","-lc","cat a.py"]}`,
		`{"command":["ssh","-t","cat a.py"]}`,
		`{"command":["/bin/sh","-c","head -5 b.txt"]}`,
		`{"cmd":"tail -n 3 c.log"}`,
	}
	for _, a := range args {
		var m map[string]any
		if err := json.Unmarshal([]byte(a), &m); err != nil {
			t.Fatal(err)
		}
		want := toolspec.ShellSource(toolspec.CommandOf(m))
		for format, trace := range shellTraces {
			if _, argv := m["command"].([]any); argv && format != FormatCodex {
				continue // only Codex records argv commands
			}
			if _, ok := m["cmd"]; ok && format != FormatCodex {
				continue
			}
			t.Run(format+" "+a, func(t *testing.T) {
				ss, err := ImportReader(strings.NewReader(trace(a)), traceNames[format], format)
				if err != nil {
					t.Fatal(err)
				}
				if got := onlySource(t, ss); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("source %+v, toolspec says %+v", got, want)
				}
			})
		}
	}
}

// callTraces write a one-call trace of a format whose tool tool is given
// the JSON input in, in working directory /w.
var callTraces = map[string]func(tool, in string) string{
	FormatClaudeCode: func(tool, in string) string {
		return `{"type":"assistant","uuid":"a1","sessionId":"s-1","cwd":"/w","timestamp":"2026-01-01T10:00:02Z","message":{"id":"msg_1","model":"claude-x","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"` + tool + `","input":` + in + `}]}}` + "\n" +
			`{"type":"user","uuid":"r1","sessionId":"s-1","cwd":"/w","timestamp":"2026-01-01T10:00:03Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}}` + "\n"
	},
	FormatOpenCode: func(tool, in string) string {
		return `{"info": {"id": "ses_abc", "directory": "/w", "time": {"created": 1700000000000}},
  "messages": [
    {"info": {"id": "msg_a1", "role": "assistant", "time": {"created": 1700000002000}, "path": {"cwd": "/w"}},
     "parts": [{"id": "prt_6", "type": "tool", "callID": "call_1", "tool": "` + tool + `",
        "state": {"status": "completed", "input": ` + in + `, "output": "ok", "time": {"start": 1700000003000, "end": 1700000003100}}}]}]}`
	},
}

// TestImportersAgreeOnSources feeds the same read, search and fetch calls
// through the Claude Code and OpenCode importers and toolspec.ToolSource:
// the source each importer records must be toolspec's (one table of what a
// call observed).
func TestImportersAgreeOnSources(t *testing.T) {
	calls := map[string][][2]string{
		FormatClaudeCode: {
			{"Read", `{"file_path":"/w/a.go","offset":10,"limit":20}`},
			{"Read", `{"file_path":"/w/a.go"}`},
			{"Read", `{}`},
			{"Grep", `{"pattern":"x","path":"/w/pkg"}`},
			{"Glob", `{"pattern":"*.go"}`},
			{"WebFetch", `{"url":"https://example.com"}`},
			{"Bash", `{"command":"cat a.go"}`},
			{"Edit", `{"file_path":"/w/a.go"}`},
		},
		FormatOpenCode: {
			{"read", `{"filePath":"/w/a.go","offset":5}`},
			{"grep", `{"pattern":"x"}`},
			{"list", `{"path":"/w/pkg"}`},
			{"webfetch", `{"url":"https://example.com"}`},
			{"bash", `{"command":"cat a.go"}`},
		},
	}
	for format, cs := range calls {
		for _, c := range cs {
			t.Run(format+" "+c[0]+" "+c[1], func(t *testing.T) {
				want := toolspec.ToolSource(c[0], json.RawMessage(c[1]), "/w")
				ss, err := ImportReader(strings.NewReader(callTraces[format](c[0], c[1])), traceNames[format], format)
				if err != nil {
					t.Fatal(err)
				}
				if got := onlySource(t, ss); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("source %+v, toolspec says %+v", got, want)
				}
			})
		}
	}
}
