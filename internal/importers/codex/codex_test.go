package codex

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
	"github.com/prunesched/prunesched/internal/importers/internal/tracetest"
)

func importFile(t *testing.T, path string) build.Session {
	t.Helper()
	return tracetest.ImportFile(t, Import, path)
}

func TestShellCommandGeneration(t *testing.T) {
	s := importFile(t, filepath.Join("testdata", "rollout-060.jsonl"))
	st := s.Events[0].Data.(*events.SessionStarted)
	if st.SourceID != "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b" || st.Agent != "codex/0.60.1" || st.CWD != "/work/repo" || st.Model != "gpt-5-codex" {
		t.Errorf("session started %+v", st)
	}
	// Context from response_item only: the event_msg echoes add nothing.
	msgs := tracetest.OfType[*events.Message](s)
	for _, m := range msgs {
		if m.Role == events.RoleUser && m.Text == "Fix the failing test in calc.go" && m.Meta {
			t.Error("typed user message marked meta")
		}
	}
	if len(msgs) != 5 { // instructions, env context, user, reasoning, assistant
		t.Errorf("%d messages, want 5", len(msgs))
	}
	calls := tracetest.OfType[*events.ToolCall](s)
	if len(calls) != 3 || calls[0].CallID != "call_read1" || calls[0].Tool != "shell_command" || calls[2].Tool != "apply_patch" || !strings.HasPrefix(string(calls[2].Input), `"*** Begin Patch`) {
		t.Fatalf("calls %v", calls)
	}
	res := tracetest.OfType[*events.ToolResult](s)
	if r := res[0]; r.Source == nil || *r.Source != (events.SourceIdentity{Kind: "file", Path: "calc.go", Offset: 1, Limit: 40}) || r.IsError || *r.ExitCode != 0 {
		t.Errorf("read result %+v source %+v", r, r.Source)
	}
	if r := res[1]; !r.IsError || *r.ExitCode != 1 || r.Error.Type != "exit_code" || !strings.HasPrefix(r.Error.Message, "--- FAIL: TestAdd") || r.Source.Kind != "command" {
		t.Errorf("test result %+v %+v", r, r.Error)
	}
	if r := res[2]; r.IsError || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Errorf("patch result %+v", r)
	}
	// Four distinct token_count reports (one repeated, one null) for four
	// requests: their sum is the final cumulative total.
	reqs := tracetest.OfType[*events.ModelRequest](s)
	if len(reqs) != 4 {
		t.Fatalf("%d requests", len(reqs))
	}
	want := *events.OpenAIUsage(13100, 280, 9400, 0)
	if got := tracetest.UsageSum(s); got != want {
		t.Errorf("usage %+v, want %+v", got, want)
	}
}

func TestCodeModeGeneration(t *testing.T) {
	s := importFile(t, filepath.Join("testdata", "rollout-0145-code-mode.jsonl"))
	res := tracetest.OfType[*events.ToolResult](s)
	if len(res) != 3 {
		t.Fatalf("%d results", len(res))
	}
	if r := res[0]; r.Source == nil || r.Source.Kind != "file" || r.Source.Path != "src/main.ts" || r.IsError || !strings.Contains(*r.Output, "import { run }") {
		t.Errorf("exec read %+v %+v", r, r.Source)
	}
	if r := res[1]; !r.IsError || r.ExitCode == nil || *r.ExitCode != 2 || r.Error.Type != "script_failed" {
		t.Errorf("failed build %+v %+v", r, r.Error)
	}
	if n := len(tracetest.OfType[*events.HostCompaction](s)); n != 1 {
		t.Errorf("%d compactions", n)
	}
	if got, want := tracetest.UsageSum(s), *events.OpenAIUsage(15600, 130, 9900, 5300); got != want {
		t.Errorf("usage %+v, want %+v", got, want)
	}
	sys := tracetest.OfType[*events.Message](s)[1]
	if sys.Role != events.RoleSystem || !strings.HasPrefix(sys.Text, "<permissions") {
		t.Errorf("developer message %+v", sys)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"bad json", "{\"type\":\"session_meta\",\"payload\":{}}\n{\"type\":", "x.jsonl:2: invalid JSON"},
		{"no type", `{"timestamp":"2026-01-01T00:00:00Z","payload":{}}`, `x.jsonl:1: field "type": missing`},
		{"bad time", `{"timestamp":"soon","type":"turn_context","payload":{}}`, `x.jsonl:1: field "timestamp"`},
		{"call without id", `{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}"}}`, `x.jsonl:1: field "payload.call_id": missing`},
		{"bad role", `{"type":"response_item","payload":{"type":"message","role":"robot","content":[]}}`, `x.jsonl:1: field "payload.role": bad value`},
		{"payload type", `{"type":"response_item","payload":{"type":"message","role":"user","content":7}}`, `x.jsonl:1: field "payload.content"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Import(strings.NewReader(tc.in), "x.jsonl")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
}

func FuzzCodex(f *testing.F) {
	for _, name := range []string{"rollout-060.jsonl", "rollout-0145-code-mode.jsonl"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"type":"response_item","payload":{"type":"function_call_output","call_id":"@","output":{"content":"x"}}}`))
	f.Add([]byte(`{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":-5}}}}`))
	// Two records on one line (split by the shared line reader).
	f.Add([]byte(`{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}","call_id":"c1"}}{"type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"ok"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ss, err := Import(bytes.NewReader(data), "fuzz.jsonl")
		if err != nil {
			return
		}
		for _, s := range ss {
			tracetest.Check(t, s)
		}
	})
}
