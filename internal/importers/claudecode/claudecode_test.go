package claudecode

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
	"github.com/prunesched/prunesched/internal/importers/internal/tracetest"
)

// Small synthetic transcripts, one line per element.
var (
	lineUser   = `{"type":"user","uuid":"u1","sessionId":"s-1","timestamp":"2026-01-01T10:00:00Z","cwd":"/w","version":"2.1.0","message":{"role":"user","content":"read a.go"}}`
	lineA1     = `{"type":"assistant","uuid":"a1","sessionId":"s-1","timestamp":"2026-01-01T10:00:01Z","requestId":"req_1","message":{"id":"msg_1","model":"claude-x","role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"}],"usage":{"input_tokens":3,"output_tokens":5,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"cache_creation":{"ephemeral_1h_input_tokens":100,"ephemeral_5m_input_tokens":0}}}}`
	lineA2     = `{"type":"assistant","uuid":"a2","sessionId":"s-1","timestamp":"2026-01-01T10:00:02Z","requestId":"req_1","message":{"id":"msg_1","model":"claude-x","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/w/a.go","offset":10,"limit":20}}],"usage":{"input_tokens":3,"output_tokens":50,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"cache_creation":{"ephemeral_1h_input_tokens":100,"ephemeral_5m_input_tokens":0}}}}`
	lineR1     = `{"type":"user","uuid":"r1","sessionId":"s-1","timestamp":"2026-01-01T10:00:03Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"     1→package a"}]},"toolUseResult":{"type":"text","file":{"filePath":"/w/a.go","content":"package a"}}}`
	lineSide   = `{"type":"assistant","uuid":"sc1","isSidechain":true,"sessionId":"s-1","timestamp":"2026-01-01T10:00:04Z","message":{"id":"msg_side","model":"claude-x","content":[{"type":"tool_use","id":"toolu_side","name":"Bash","input":{"command":"ls"}}],"usage":{"input_tokens":7,"output_tokens":7}}}`
	lineProg   = `{"type":"progress","uuid":"p1","sessionId":"s-1","timestamp":"2026-01-01T10:00:04Z","data":{"type":"agent_progress","message":{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_nested","name":"Bash","input":{}}]}}}}`
	lineBash   = `{"type":"assistant","uuid":"a3","sessionId":"s-1","timestamp":"2026-01-01T10:00:05Z","requestId":"req_2","message":{"id":"msg_2","model":"claude-x","content":[{"type":"tool_use","id":"toolu_2","name":"Bash","input":{"command":"go test"}}],"usage":{"input_tokens":1,"output_tokens":9,"cache_creation_input_tokens":0,"cache_read_input_tokens":1100}}}`
	lineBashR  = `{"type":"user","uuid":"r2","sessionId":"s-1","timestamp":"2026-01-01T10:00:06Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":"Exit code 2\nFAIL a_test.go"}]},"toolUseResult":"Error: Exit code 2"}`
	lineList   = `{"type":"user","uuid":"r3","sessionId":"s-1","timestamp":"2026-01-01T10:00:07Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_3","content":[{"type":"text","text":"a"},{"type":"image","source":{}},{"type":"text","text":"b"}]}]}}`
	lineCompac = `{"type":"system","subtype":"compact_boundary","uuid":"cb1","sessionId":"s-1","timestamp":"2026-01-01T10:00:08Z","content":"Conversation compacted","compactMetadata":{"trigger":"auto","preTokens":1234}}`
	lineSumm   = `{"type":"user","uuid":"cs1","sessionId":"s-1","timestamp":"2026-01-01T10:00:09Z","isCompactSummary":true,"message":{"role":"user","content":"This session is being continued from a previous conversation."}}`
)

func jsonl(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func importString(t *testing.T, in string) build.Session {
	t.Helper()
	return tracetest.ImportOne(t, Import, in, "x.jsonl")
}

func TestStreamingSplit(t *testing.T) {
	s := importString(t, jsonl(lineUser, lineA1, lineA2, lineR1))
	types := []events.Type{}
	for _, e := range s.Events {
		types = append(types, e.Type)
	}
	want := []events.Type{events.TypeSessionStarted, events.TypeMessage, events.TypeModelRequest, events.TypeMessage, events.TypeToolCall, events.TypeToolResult}
	if len(types) != len(want) {
		t.Fatalf("types %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("types %v, want %v", types, want)
		}
	}
	mr := tracetest.OfType[*events.ModelRequest](s)[0]
	wantU := events.Usage{InputTokens: 3, OutputTokens: 50, CacheReadTokens: 1000, CacheWriteTokens: 100, CacheWrite1hTokens: 100}
	if mr.Usage == nil || *mr.Usage != wantU {
		t.Errorf("usage %+v, want %+v", mr.Usage, wantU)
	}
	if mr.Request != "msg_1" || mr.SourceID != "req_1" || mr.Provider != "anthropic" || mr.Model != "claude-x" || mr.CacheTTL != "1h" {
		t.Errorf("model request %+v", mr)
	}
	if got := s.Events[2].Time.Format("15:04:05"); got != "10:00:01" {
		t.Errorf("model request at %s, want the response's first line", got)
	}
	th := tracetest.OfType[*events.Message](s)[1]
	if th.Kind != events.KindThinking || th.Signature != "sig" || th.Item != "a1" {
		t.Errorf("thinking %+v", th)
	}
	st := s.Events[0].Data.(*events.SessionStarted)
	if st.SourceID != "s-1" || st.CWD != "/w" || st.Model != "claude-x" || st.Agent != "claude-code/2.1.0" || s.Events[0].Session != "s-1" {
		t.Errorf("session started %+v (session %s)", st, s.Events[0].Session)
	}
	r := tracetest.OfType[*events.ToolResult](s)[0]
	if *r.Output != "     1→package a" {
		t.Errorf("output %q: must be message content, not toolUseResult", *r.Output)
	}
	if r.Source == nil || *r.Source != (events.SourceIdentity{Kind: "file", Path: "/w/a.go", Offset: 10, Limit: 20}) {
		t.Errorf("source %+v", r.Source)
	}
	c := tracetest.OfType[*events.ToolCall](s)[0]
	if c.Item != "toolu_1/input" || c.CallID != "toolu_1" || c.Tool != "Read" || string(c.Input) != `{"file_path":"/w/a.go","offset":10,"limit":20}` {
		t.Errorf("call %+v", c)
	}
}

func TestSidechainAndProgressSkipped(t *testing.T) {
	s := importString(t, jsonl(lineUser, lineSide, lineProg))
	if n := len(tracetest.OfType[*events.ToolCall](s)); n != 0 {
		t.Errorf("%d tool calls from sidechain/progress", n)
	}
	if n := len(tracetest.OfType[*events.ModelRequest](s)); n != 0 {
		t.Errorf("%d model requests from sidechain", n)
	}
}

func TestErrorResult(t *testing.T) {
	s := importString(t, jsonl(lineBash, lineBashR))
	r := tracetest.OfType[*events.ToolResult](s)[0]
	if !r.IsError || r.Error == nil || r.Error.Type != "exit_code" || r.Error.Message != "FAIL a_test.go" || r.ExitCode == nil || *r.ExitCode != 2 {
		t.Errorf("result %+v error %+v", r, r.Error)
	}
	if *r.Output != "Exit code 2\nFAIL a_test.go" {
		t.Errorf("output %q", *r.Output)
	}
	if mr := tracetest.OfType[*events.ModelRequest](s)[0]; mr.CacheTTL != "" {
		t.Errorf("cache ttl %q without cache writes", mr.CacheTTL)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct{ in, typ, msg string }{
		{"The user doesn't want to proceed with this tool use.", "rejected", "The user doesn't want to proceed with this tool use."},
		{"<tool_use_error>File does not exist.</tool_use_error>", "not_found", "File does not exist."},
		{"<tool_use_error>Sibling tool call errored</tool_use_error>", "sibling_error", "Sibling tool call errored"},
		{"<tool_use_error>String to replace not found</tool_use_error>", "tool_use_error", "String to replace not found"},
		{"Exit code 1", "exit_code", "Exit code 1"},
		{"boom", "tool_error", "boom"},
	} {
		e, _ := classify(tc.in)
		if e.Type != tc.typ || e.Message != tc.msg {
			t.Errorf("classify(%q) = %+v, want %s %q", tc.in, e, tc.typ, tc.msg)
		}
	}
}

func TestListContent(t *testing.T) {
	s := importString(t, jsonl(lineList))
	r := tracetest.OfType[*events.ToolResult](s)[0]
	if *r.Output != "a\n[image]\nb" {
		t.Errorf("output %q", *r.Output)
	}
	// No call on the main thread: the result keeps the source's id.
	if r.Item != "toolu_3" || r.CallID != "toolu_3" || r.Tool != "" {
		t.Errorf("orphan result %+v", r)
	}
}

func TestCompaction(t *testing.T) {
	s := importString(t, jsonl(lineUser, lineCompac, lineSumm))
	hc := tracetest.OfType[*events.HostCompaction](s)
	if len(hc) != 1 || *hc[0] != (events.HostCompaction{Host: "claude-code", SourceID: "cb1", PreTokens: 1234}) {
		t.Fatalf("host compaction %+v", hc)
	}
	m := tracetest.OfType[*events.Message](s)
	if len(m) != 2 || !m[1].Meta || m[1].Role != events.RoleUser || m[0].Meta {
		t.Errorf("messages %+v", m)
	}
}

func TestIDsAndTimes(t *testing.T) {
	in := jsonl(
		`{"type":"user","uuid":"u1","sessionId":"weird id/ü","timestamp":"2026-01-01T10:00:05Z","message":{"content":[{"type":"text","text":"one"},{"type":"text","text":"<system-reminder>x</system-reminder>"}]}}`,
		`{"type":"assistant","uuid":"a1","timestamp":"2026-01-01T10:00:01Z","message":{"id":"m1","model":"c","content":[{"type":"tool_use","id":"t1","name":"Grep","input":{"pattern":"x"}}]}}`,
		`{"type":"assistant","uuid":"a2","message":{"id":"m2","model":"c","content":[{"type":"tool_use","id":"t1","name":"Grep","input":{"pattern":"y","path":"/p"}}]}}`,
		`{"type":"user","uuid":"r1","cwd":"/w","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"first"}]}}`,
		`{"type":"user","uuid":"r2","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"second"}]}}`,
		`{"type":"brand-new-type","whatever":[1,2,3]}`,
		`{"type":"assistant","uuid":"a3","timestamp":"2026-01-01T10:00:09Z","message":{"id":"x","model":"<synthetic>","content":[{"type":"text","text":"No response requested."}]}}`,
	)
	s := importString(t, in)
	if s.Events[0].Session != "weird-id--" {
		t.Errorf("session %q", s.Events[0].Session)
	}
	m := tracetest.OfType[*events.Message](s)
	if m[0].Item != "u1/0" || m[1].Item != "u1/1" || m[0].Meta || !m[1].Meta {
		t.Errorf("messages %+v %+v", m[0], m[1])
	}
	calls := tracetest.OfType[*events.ToolCall](s)
	if len(calls) != 2 || calls[0].CallID != "t1" || calls[1].CallID != "t1:2" || calls[1].Item != "t1:2/input" {
		t.Errorf("calls %+v", calls)
	}
	res := tracetest.OfType[*events.ToolResult](s)
	if len(res) != 2 || res[0].Item != "t1" || *res[0].Output != "first" || res[1].Item != "t1:2" || *res[1].Output != "second" {
		t.Errorf("results %+v", res)
	}
	// The Grep with no path searched the working directory of its line
	// (unknown here: the call's line has no cwd), the second its path.
	if res[1].Source == nil || res[1].Source.Kind != "search" || res[1].Source.Path != "/p" {
		t.Errorf("source %+v", res[1].Source)
	}
	if n := len(tracetest.OfType[*events.ModelRequest](s)); n != 2 {
		t.Errorf("%d model requests, want 2 (synthetic lines make none)", n)
	}
	// Times: line 2 goes back (clamped), lines 3-5 have none (reused).
	for _, e := range s.Events[1:6] {
		if got := e.Time.Format("15:04:05"); got != "10:00:05" {
			t.Errorf("event %s at %s, want 10:00:05", e.ID, got)
		}
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"bad json", jsonl(lineUser, `{"type":"user",`), `x.jsonl:2: invalid JSON`},
		{"not an object", jsonl(`[1,2]`), `x.jsonl:1: not a JSON object`},
		{"tool_use without id", jsonl(`{"type":"assistant","uuid":"a","message":{"id":"m","content":[{"type":"tool_use","name":"Bash","input":{}}]}}`), `x.jsonl:1: field "message.content[0].id": missing`},
		{"tool_result without id", jsonl(lineUser, `{"type":"user","uuid":"r","message":{"content":[{"type":"tool_result","content":"x"}]}}`), `x.jsonl:2: field "message.content[0].tool_use_id": missing`},
		{"no message", jsonl(`{"type":"user","uuid":"u"}`), `x.jsonl:1: field "message": missing`},
		{"no content", jsonl(`{"type":"user","uuid":"u","message":{"role":"user"}}`), `x.jsonl:1: field "message.content": missing`},
		{"content wrong type", jsonl(`{"type":"user","uuid":"u","message":{"content":42}}`), `x.jsonl:1: field "message.content": want a string or an array`},
		{"text wrong type", jsonl(`{"type":"user","uuid":"u","message":{"content":[{"type":"text","text":1}]}}`), `x.jsonl:1: field "message.content[0].text": bad value`},
		{"usage wrong type", jsonl(`{"type":"assistant","uuid":"a","message":{"id":"m","content":[],"usage":{"input_tokens":"3"}}}`), `x.jsonl:1: field "message.usage.input_tokens": bad value`},
		{"negative usage", jsonl(`{"type":"assistant","uuid":"a","message":{"id":"m","content":[],"usage":{"input_tokens":-3}}}`), `x.jsonl:1: field "data.usage": negative`},
		{"bad timestamp", jsonl(`{"type":"user","uuid":"u","timestamp":"yesterday","message":{"content":"x"}}`), `x.jsonl:1: field "timestamp"`},
		{"result content wrong type", jsonl(`{"type":"user","uuid":"u","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":{"a":1}}]}}`), `x.jsonl:1: field "message.content[0].content": want a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Import(strings.NewReader(tc.in), "x.jsonl")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
}

func TestEmpty(t *testing.T) {
	s := importString(t, "\n\n")
	if len(s.Events) != 1 || s.Events[0].Session != "x" {
		t.Errorf("events %+v", s.Events)
	}
}

func FuzzClaudeCode(f *testing.F) {
	for _, in := range []string{
		jsonl(lineUser, lineA1, lineA2, lineR1),
		jsonl(lineUser, lineA1+lineA2, lineR1),
		jsonl(lineSide, lineProg, lineBash, lineBashR),
		jsonl(lineList, lineCompac, lineSumm),
		jsonl(`{"type":"assistant","uuid":"a","message":{"id":"m","content":[{"type":"redacted_thinking","data":"x"},{"type":"text","text":"t"}]}}`),
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"@@","content":[{"type":"text"}]}]}}`,
		"",
	} {
		f.Add([]byte(in))
	}
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

// TestConcatenatedObjectsOnOneLine: a real transcript had two JSON objects
// written on one line ("invalid JSON at byte 1784: invalid character '{'
// after top-level value"); each is imported, as if on its own line.
func TestConcatenatedObjectsOnOneLine(t *testing.T) {
	want := importString(t, jsonl(lineUser, lineA1, lineA2, lineR1))
	got := importString(t, jsonl(lineUser, lineA1+lineA2, lineR1))
	if len(got.Events) != len(want.Events) {
		t.Fatalf("%d events, want %d", len(got.Events), len(want.Events))
	}
	for i := range want.Events {
		// Event ids name the line, so they differ; types and payloads do not.
		if got.Events[i].Type != want.Events[i].Type || !reflect.DeepEqual(got.Events[i].Data, want.Events[i].Data) {
			t.Errorf("event %d: %s %+v, want %s %+v", i, got.Events[i].Type, got.Events[i].Data, want.Events[i].Type, want.Events[i].Data)
		}
	}
	// A truncated second object still names the line.
	if _, err := Import(strings.NewReader(jsonl(lineUser, lineA1+`{"type":"user",`)), "x.jsonl"); err == nil || !strings.HasPrefix(err.Error(), "x.jsonl:2: invalid JSON") {
		t.Errorf("error %v", err)
	}
}
