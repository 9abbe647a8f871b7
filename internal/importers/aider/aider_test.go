package aider

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers/internal/build"
	"github.com/prunesched/prunesched/internal/importers/internal/tracetest"
)

const sample = `
# aider chat started at 2025-06-02 11:47:49

> Aider v0.84.0  
> litellm.APIError: boom  

#### /run go test ./...  
> FAIL calc  
> exit status 1  

#### fix it  

calc.go
` + "```go" + `
<<<<<<< SEARCH
return a - b
=======
return a + b
>>>>>>> REPLACE
` + "```" + `

> Tokens: 9.7k sent, 85 received. Cost: $0.01 message, $0.01 session.  
> The LLM did not conform to the edit format.  

## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in calc.go
<<<<<<< SEARCH
return a - b
=======
return a + b
>>>>>>> REPLACE
The SEARCH section must exactly match an existing block of lines including all white space, comments, indentation, docstrings, etc  
Sorry, here is the right block:

calc.go
<<<<<<< SEARCH
	return a - b
=======
	return a + b
>>>>>>> REPLACE

> Tokens: 10k sent, 2.5k cache write, 1k cache hit, 40 received.  
> Applied edit to calc.go  

# aider chat started at 2025-06-02 12:00:00

#### hello  
Hi!  
> Tokens: 1.2k sent, 3 received.  
`

func importString(t *testing.T, in string) build.Session {
	t.Helper()
	return tracetest.ImportOne(t, Import, in, "x.aider.chat.history.md")
}

func TestSample(t *testing.T) {
	s := importString(t, sample)
	calls := tracetest.OfType[*events.ToolCall](s)
	if len(calls) != 3 || calls[0].Tool != "shell" || string(calls[0].Input) != `{"command":"go test ./..."}` || calls[1].Tool != "edit" || !strings.Contains(string(calls[1].Input), `"path":"calc.go"`) {
		t.Fatalf("calls %v", calls)
	}
	res := tracetest.OfType[*events.ToolResult](s)
	if len(res) != 3 {
		t.Fatalf("results %+v", res)
	}
	if *res[0].Output != "FAIL calc\nexit status 1" || res[0].Source.Kind != "command" {
		t.Errorf("run output %q", *res[0].Output)
	}
	if r := res[1]; !r.IsError || r.Error.Type != "search_replace_no_match" || !strings.HasPrefix(*r.Output, "## SearchReplaceNoExactMatch") || !strings.HasSuffix(*r.Output, "docstrings, etc") {
		t.Errorf("failed edit %+v %q", r, *r.Output)
	}
	if r := res[2]; r.IsError || *r.Output != "Applied edit to calc.go" {
		t.Errorf("applied edit %+v", r)
	}
	reqs := tracetest.OfType[*events.ModelRequest](s)
	if len(reqs) != 3 || *reqs[0].Usage != (events.Usage{InputTokens: 9700, OutputTokens: 85}) || *reqs[1].Usage != (events.Usage{InputTokens: 6500, CacheWriteTokens: 2500, CacheReadTokens: 1000, OutputTokens: 40}) {
		t.Errorf("requests %+v %+v", reqs[0].Usage, reqs[1].Usage)
	}
	// The second run starts a fresh context; terminal output (the litellm
	// error, the banner) is not context.
	if n := len(tracetest.OfType[*events.HostCompaction](s)); n != 1 {
		t.Errorf("%d compactions", n)
	}
	for _, m := range tracetest.OfType[*events.Message](s) {
		if strings.Contains(m.Text, "litellm") || strings.Contains(m.Text, "<<<<<<< SEARCH") {
			t.Errorf("message %q", m.Text)
		}
	}
	if got := s.Events[0].Time.Format("2006-01-02 15:04:05"); got != "2025-06-02 11:47:49" {
		t.Errorf("start %s", got)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	_, err := Import(strings.NewReader("\n# aider chat started at yesterday\n"), "x.md")
	if err == nil || !strings.HasPrefix(err.Error(), `x.md:2: run start time "yesterday"`) {
		t.Errorf("error %v", err)
	}
	_, err = Import(strings.NewReader(strings.Repeat("x", events.MaxLineBytes+10)), "x.md")
	if err == nil || !strings.HasPrefix(err.Error(), "x.md:1: ") {
		t.Errorf("error %v", err)
	}
}

func TestRealTraces(t *testing.T) {
	t.Parallel()
	tracetest.EachTrace(t, "aider", "*.md", Import, func(t *testing.T, path string, data []byte, s build.Session) {
		text := string(data)
		n := tracetest.Counts(s)
		if got, want := n[events.TypeModelRequest], strings.Count(text, "\n> Tokens: "); got < want {
			t.Errorf("%d requests, want at least %d Tokens lines", got, want)
		}
		failed := 0
		for _, r := range tracetest.OfType[*events.ToolResult](s) {
			if r.IsError {
				failed++
			}
		}
		if want := strings.Count(text, "\n## SearchReplaceNoExactMatch"); failed > want || (want > 0 && failed == 0) {
			t.Errorf("%d failed edits for %d SearchReplaceNoExactMatch sections", failed, want)
		}
		t.Logf("%s: %d events, %d tool calls, %d model requests, %d failed edits, %d runs", filepath.Base(path), len(s.Events), n[events.TypeToolCall], n[events.TypeModelRequest], failed, strings.Count(text, RunPrefix))
	})
}

func FuzzAider(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte("#### /run\n> x\n## SearchReplaceNoExactMatch\n<<<<<<< SEARCH\n"))
	f.Add([]byte("> Tokens: 1e9k sent, -3 received.\nreply\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ss, err := Import(bytes.NewReader(data), "fuzz.md")
		if err != nil {
			return
		}
		for _, s := range ss {
			tracetest.Check(t, s)
		}
	})
}
