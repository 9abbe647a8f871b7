package service

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// warmSession is a session whose cache is warm when a read of a.go is
// superseded (re-read after an edit): removing that early read would break
// a long cached prefix, so its PRUNE waits at request r3 and again at r4,
// where a duplicate read at the end is removed (an application) while the
// early one keeps waiting. Events are returned in batches, one per
// request.
func warmSession() [][]string {
	at := func(s int) string { return fmt.Sprintf("2026-11-30T09:00:%02dZ", s) }
	ev := func(id, typ string, s int, data any) string {
		b, err := json.Marshal(map[string]any{"v": 1, "id": id, "type": typ, "session": "warm", "time": at(s), "data": data})
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	req := func(id string, s int) string {
		return ev(id, "model_request", s, map[string]any{"request": id, "provider": "anthropic", "model": "claude-sonnet-4-5"})
	}
	read := func(n, out string, s int) []string {
		return []string{
			ev("c"+n, "tool_call", s, map[string]any{"item": n + "/input", "call_id": n, "tool": "Read", "input": map[string]any{"file_path": "/src/a.go"}}),
			ev("o"+n, "tool_result", s, map[string]any{"item": n, "call_id": n, "tool": "Read", "output": out}),
		}
	}
	before := "     1\tpackage a\n     2\t\n     3\tfunc A() int { return 1 }\n" + strings.Repeat("     4\t// filler line of a.go\n", 40)
	after := strings.Replace(before, "return 1", "return 2", 1)
	big := strings.Repeat("The agent explains its plan in detail before it continues. ", 600)
	return [][]string{
		{
			ev("s0", "session_started", 0, map[string]any{"format": "native", "agent": "test", "provider": "anthropic", "model": "claude-sonnet-4-5"}),
			ev("m0", "message", 0, map[string]any{"item": "sys", "role": "system", "text": big}),
			ev("m1", "message", 1, map[string]any{"item": "u1", "role": "user", "text": "Make A return 2."}),
			req("r0", 2),
		},
		append(read("t1", before, 3), req("r1", 4)),
		{ev("m2", "message", 5, map[string]any{"item": "a1", "role": "assistant", "text": big}), req("r2", 6)},
		append([]string{
			ev("c2", "tool_call", 7, map[string]any{"item": "t2/input", "call_id": "t2", "tool": "Edit", "input": map[string]any{"file_path": "/src/a.go", "old_string": "return 1", "new_string": "return 2"}}),
			ev("o2", "tool_result", 7, map[string]any{"item": "t2", "call_id": "t2", "tool": "Edit", "output": "The file /src/a.go has been updated."}),
		}, append(read("t3", after, 8), req("r3", 9))...),
		append(read("t4", after, 10), req("r4", 11)),
	}
}

// TestPendingReasonsSurviveRestart: /pending after a restart answers byte
// for byte what it answered before, reasons included, when the last
// request both applied a mark and left another waiting (issue 32, item 5:
// the rebuilt reasons were those of the request before).
func TestPendingReasonsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	svc := startT(t, dir)
	base := "http://" + svc.HTTPAddr
	var atR3 []byte
	for i, batch := range warmSession() {
		if code, out := httpDo(t, "POST", base+"/v1/events", []byte(strings.Join(batch, "\n"))); code != 200 {
			t.Fatalf("append batch %d: %d %s", i, code, out)
		}
		if i == 3 {
			_, atR3 = httpDo(t, "GET", base+"/v1/sessions/warm/pending", nil)
		}
	}
	code, before := httpDo(t, "GET", base+"/v1/sessions/warm/pending", nil)
	if code != 200 || !bytes.Contains(before, []byte(`"item": "t1"`)) || !bytes.Contains(before, []byte("cache warm: break")) {
		t.Fatalf("pending before the restart: %d %s; the test needs t1 waiting on a warm cache", code, before)
	}
	if bytes.Equal(before, atR3) {
		t.Fatalf("the reason at r4 equals the one at r3: the test cannot tell them apart\n%s", before)
	}
	if _, dec := httpDo(t, "GET", base+"/v1/sessions/warm/decisions", nil); !bytes.Contains(dec, []byte(`"applied_at": "r4"`)) {
		t.Fatalf("nothing applied at r4: the test needs an application at the last request\n%s", dec)
	}
	svc.Close()
	svc2 := startT(t, dir)
	defer svc2.Close()
	_, after := httpDo(t, "GET", "http://"+svc2.HTTPAddr+"/v1/sessions/warm/pending", nil)
	if !bytes.Equal(before, after) {
		t.Errorf("pending changed across the restart:\nbefore: %s\nafter:  %s\n(at r3 it was %s)", before, after, atR3)
	}
}
