package importers

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/tracetest"
)

func TestDetect(t *testing.T) {
	long := `{"parentUuid":null,"type":"user","sessionId":"s","message":{"content":"` + strings.Repeat("x", 100) // cut off
	for _, tc := range []struct{ name, head, file, want string }{
		{"native", "# comment\n\n" + `{"v":1,"id":"e1","type":"message","session":"s","time":"2026-01-01T00:00:00Z","data":{}}` + "\n", "a.jsonl", FormatNative},
		{"claude code snapshot", `{"type":"file-history-snapshot","messageId":"m","snapshot":{}}` + "\n", "a.jsonl", FormatClaudeCode},
		{"claude code user", `{"type":"user","uuid":"u","sessionId":"s","message":{"content":"x"}}` + "\n", "a.jsonl", FormatClaudeCode},
		{"claude code cut off", long, "a.jsonl", FormatClaudeCode},
		{"opencode one line", `{"info":{"id":"ses_1"},"messages":[]}`, "a.json", FormatOpenCode},
		{"opencode pretty", "{\n  \"info\": {\n    \"id\": \"ses_1\",", "export.txt", FormatOpenCode},
		{"json by extension", "{\n  \"something\": 1,", "a.json", FormatOpenCode},
		{"bom", "\xef\xbb\xbf" + `{"type":"user","uuid":"u"}`, "a.jsonl", FormatClaudeCode},
		{"codex", `{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"x"}}` + "\n", "rollout.jsonl", FormatCodex},
		{"mini-swe-agent cut off", `{"info": {"model_stats": {"api_calls": 3}, "mini_version": "2.2.7", "config": {"agent": {`, "t.json", FormatMiniSWE},
		{"mini-swe-agent by name", `{"info": {"config": {"x": "` + strings.Repeat("y", 50), "a.traj.json", FormatMiniSWE},
		{"mini-swe-agent keys", `{"messages": [], "trajectory_format": "mini-swe-agent-1.1", "instance_id": "i"}`, "a.json", FormatMiniSWE},
		{"swe-agent", "{\n  \"environment\": \"swe_main\",\n  \"trajectory\": [\n    {\n      \"action\": \"ls", "a.traj", FormatSWEAgent},
		{"swe-agent history first", `{"history": [{"role": "system"}], "info": {}}`, "a.json", FormatSWEAgent},
		{"openhands", "[\n  {\n    \"id\": 0,\n    \"timestamp\": \"2025-01-27T23:16:50\",\n    \"source\": \"user\",\n    \"action\": \"message\"", "t.json", FormatOpenHands},
		{"aider", "\n# aider chat started at 2025-06-02 11:47:49\n\n> Aider v0.84.0  \n", "history.md", FormatAider},
		{"aider by name", "#### hi  \n", "x/.aider.chat.history.md", FormatAider},
		{"unknown array", `[1, 2]`, "a.json", ""},
		{"unknown", `{"hello":"world"}`, "a.jsonl", ""},
		{"not json", "hello", "a.txt", ""},
		{"empty", "  \n", "a.jsonl", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect([]byte(tc.head), tc.file)
			if got != tc.want || (tc.want == "") != (err != nil) {
				t.Errorf("Detect = %q, %v; want %q", got, err, tc.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), tc.file+": ") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestNativeGroups(t *testing.T) {
	in := strings.Join([]string{
		`{"v":1,"id":"e1","type":"session_started","session":"a","time":"2026-01-01T00:00:00Z","data":{"format":"native","source_id":"orig-a"}}`,
		`{"v":1,"id":"e1","type":"session_started","session":"b","time":"2026-01-01T00:00:00Z","data":{"format":"native"}}`,
		`{"v":1,"id":"e2","type":"message","session":"a","time":"2026-01-01T00:00:01Z","data":{"item":"u1","role":"user","text":"hi"}}`,
		`{"v":1,"id":"e2","type":"message","session":"b","time":"2026-01-01T00:00:01Z","data":{"item":"u1","role":"user","text":"yo"}}`,
	}, "\n")
	ss, err := ImportReader(strings.NewReader(in), "n.jsonl", FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 2 || ss[0].SourceID != "orig-a" || ss[1].SourceID != "b" || len(ss[0].Events) != 2 || len(ss[1].Events) != 2 {
		t.Fatalf("sessions %+v", ss)
	}
	if m := ss[1].Events[1].Data.(*events.Message); m.Text != "yo" || ss[0].Format != FormatNative || ss[0].Source != "n.jsonl" {
		t.Errorf("session b %+v", ss[1])
	}
}

func TestNativeError(t *testing.T) {
	_, err := ImportReader(strings.NewReader(`{"v":1,"id":"e1","type":"message","session":"a","time":"2026-01-01T00:00:00Z","data":{"role":"user"}}`), "n.jsonl", FormatNative)
	if err == nil || !strings.HasPrefix(err.Error(), `n.jsonl:1: field "data.item": missing`) {
		t.Errorf("error %v", err)
	}
}

func TestUnknownFormat(t *testing.T) {
	_, err := ImportReader(strings.NewReader(""), "a", "cursor")
	if err == nil || !strings.Contains(err.Error(), `unknown format "cursor"`) {
		t.Errorf("error %v", err)
	}
	if _, err := Import(filepath.Join(t.TempDir(), "missing.jsonl"), FormatAuto); err == nil {
		t.Error("no error for a missing file")
	}
}

// TestRealTracesAuto imports every real trace through Import with format
// detection and checks the detected format and the session invariants.
func TestRealTracesAuto(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ sub, pattern, format string }{
		{"claude-code", "*.jsonl", FormatClaudeCode},
		{"opencode", "*.json", FormatOpenCode},
		{"swe-agent", "*.traj", FormatSWEAgent},
		{"mini-swe-agent", "*.traj.json", FormatMiniSWE},
		{"openhands", "*.json", FormatOpenHands},
		{"aider", "*.md", FormatAider},
	} {
		t.Run(tc.sub, func(t *testing.T) {
			t.Parallel()
			for _, path := range tracetest.Files(t, tc.sub, tc.pattern) {
				ss, err := Import(path, FormatAuto)
				if err != nil {
					t.Fatal(err)
				}
				if len(ss) != 1 || ss[0].Format != tc.format || ss[0].Source != path || ss[0].SourceID == "" {
					t.Fatalf("%s: sessions %d format %q", path, len(ss), ss[0].Format)
				}
				tracetest.Check(t, ss[0])
				n := tracetest.Counts(ss[0])
				pruned := 0
				for _, e := range ss[0].Events {
					if r, ok := e.Data.(*events.ToolResult); ok && r.HostPruned {
						pruned++
					}
				}
				t.Logf("%s: %d events, %d tool calls, %d model requests, %d host-pruned", filepath.Base(path), len(ss[0].Events), n[events.TypeToolCall], n[events.TypeModelRequest], pruned)
			}
		})
	}
}

// TestCodexTestdataAuto imports the synthetic Codex rollouts with detection.
func TestCodexTestdataAuto(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("codex", "testdata", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no codex testdata: %v", err)
	}
	for _, path := range files {
		ss, err := Import(path, FormatAuto)
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) != 1 || ss[0].Format != FormatCodex {
			t.Fatalf("%s: %d sessions, format %q", path, len(ss), ss[0].Format)
		}
		tracetest.Check(t, ss[0])
	}
}

// TestBadFileNamesPosition checks that an unreadable file of every JSON
// format gets an error naming the line or JSON path.
func TestBadFileNamesPosition(t *testing.T) {
	for _, tc := range []struct{ format, in, want string }{
		{FormatSWEAgent, "{\n\"history\": [\n{\"role\": \"user\", \"content\": 1}]}", `x: history[0]: field "content"`},
		{FormatMiniSWE, "{\n\"messages\": [\n  {\"role\": 1}]}", `x: messages[0]: field "role"`},
		{FormatOpenHands, "[\n{\"id\": 1, \"timestamp\": 1}]", `x: [0]: field "timestamp"`},
		{FormatCodex, "{\"type\":\"session_meta\",\"payload\":{}}\n{\"type\": 1}", `x:2: field "type"`},
		{FormatSWEAgent, "{\n\n  \"history\": [}", `x:3:`},
	} {
		_, err := ImportReader(strings.NewReader(tc.in), "x", tc.format)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want prefix %q", tc.format, err, tc.want)
		}
	}
}

func TestSampleNativeFile(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "sample-session.jsonl")
	ss, err := Import(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 || ss[0].Format != FormatNative {
		t.Fatalf("sessions %+v", ss)
	}
}
