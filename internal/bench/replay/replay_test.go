package replay

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/internal/importers"
)

func tiny(t *testing.T, path string) *Sequence {
	t.Helper()
	ss, err := importers.Import(path, importers.FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 {
		t.Fatalf("%s: %d sessions, want 1", path, len(ss))
	}
	return FromEvents(ss[0].Events)
}

// TestBuildShapes rebuilds the tiny traces in every shape and checks each
// request holds the history before it and each answer ends with the
// API's terminal event (streams) or is one JSON object.
func TestBuildShapes(t *testing.T) {
	cc := tiny(t, "../testdata/traces/claude-code/tiny.jsonl")
	oc := tiny(t, "../testdata/traces/opencode/tiny.json")
	if cc.Len() != 3 || oc.Len() != 2 {
		t.Fatalf("requests: claude-code %d (want 3), opencode %d (want 2)", cc.Len(), oc.Len())
	}
	tests := []struct {
		seq      *Sequence
		api      API
		history  string // key of the request's history
		lastHas  string // the last request carries this earlier output
		terminal string
	}{
		{cc, Anthropic, "messages", "ok  \\texample", "event: message_stop"},
		{oc, Chat, "messages", "main_test.go", "data: [DONE]"},
		{oc, Responses, "input", "main_test.go", "event: response.completed"},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			turns := tt.seq.Build(tt.api, stream)
			for i, tu := range turns {
				var req map[string]any
				if err := json.Unmarshal(tu.Body, &req); err != nil {
					t.Fatalf("%s stream=%v request %d: %v", tt.api, stream, i, err)
				}
				if h, _ := req[tt.history].([]any); len(h) == 0 {
					t.Errorf("%s stream=%v request %d: no %s", tt.api, stream, i, tt.history)
				}
				if tools, _ := req["tools"].([]any); len(tools) == 0 {
					t.Errorf("%s stream=%v request %d: no tools", tt.api, stream, i)
				}
				if got := req["stream"] == true; got != stream {
					t.Errorf("%s request %d: stream %v, want %v", tt.api, i, got, stream)
				}
				if stream {
					if tu.ContentType != "text/event-stream" || !strings.Contains(string(tu.Answer), tt.terminal) {
						t.Errorf("%s request %d: stream answer without %q:\n%s", tt.api, i, tt.terminal, tu.Answer)
					}
				} else if tu.ContentType != "application/json" || !json.Valid(tu.Answer) {
					t.Errorf("%s request %d: answer not JSON: %s", tt.api, i, tu.Answer)
				}
			}
			if last := turns[len(turns)-1].Body; !bytes.Contains(last, []byte(tt.lastHas)) {
				t.Errorf("%s stream=%v: last request lacks %q", tt.api, stream, tt.lastHas)
			}
		}
	}
}

func TestChunksKeepRunes(t *testing.T) {
	s := strings.Repeat("é", 50) + "abc"
	var b strings.Builder
	for _, c := range chunks(s, 7) {
		if !strings.HasPrefix(c, "é") && !strings.HasPrefix(c, "a") && !strings.HasPrefix(c, "b") && !strings.HasPrefix(c, "c") {
			t.Fatalf("chunk %q starts inside a rune", c)
		}
		b.WriteString(c)
	}
	if b.String() != s {
		t.Fatalf("chunks do not rebuild the text")
	}
}

// TestHeadIsPrefix: the turns of a sequence's head are the first turns of
// the whole sequence, byte for byte, in every shape.
func TestHeadIsPrefix(t *testing.T) {
	for _, path := range []string{"../testdata/traces/claude-code/tiny.jsonl", "../testdata/traces/opencode/tiny.json"} {
		seq := tiny(t, path)
		for _, api := range []API{Anthropic, Chat, Responses} {
			for _, stream := range []bool{false, true} {
				all := seq.Build(api, stream)
				for n := 0; n <= len(all)+1; n++ {
					head := seq.Head(n).Build(api, stream)
					want := all
					if n > 0 && n < len(all) {
						want = all[:n]
					}
					if len(head) != len(want) {
						t.Fatalf("%s %s stream=%v Head(%d): %d turns, want %d", path, api, stream, n, len(head), len(want))
					}
					for i := range head {
						if !bytes.Equal(head[i].Body, want[i].Body) || !bytes.Equal(head[i].Answer, want[i].Answer) || head[i].ContentType != want[i].ContentType {
							t.Errorf("%s %s stream=%v Head(%d) turn %d differs from the whole sequence's", path, api, stream, n, i)
						}
					}
				}
			}
		}
	}
}

// TestTurnsCarryTimes: each turn carries its model request's recorded
// time, in order, so a replay can keep the agent's cadence.
func TestTurnsCarryTimes(t *testing.T) {
	for _, path := range []string{"../testdata/traces/claude-code/tiny.jsonl", "../testdata/traces/opencode/tiny.json"} {
		turns := tiny(t, path).Build(Anthropic, false)
		for i, tu := range turns {
			if tu.At.IsZero() {
				t.Errorf("%s turn %d: no time", path, i)
			}
			if i > 0 && tu.At.Before(turns[i-1].At) {
				t.Errorf("%s turn %d at %v, before turn %d at %v", path, i, tu.At, i-1, turns[i-1].At)
			}
		}
	}
}
