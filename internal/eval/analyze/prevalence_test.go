package analyze

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
)

// byteCounter counts one token per byte, so sizes in tests are obvious.
type byteCounter struct{}

func (byteCounter) Count(s string) int { return len(s) }

// sessionBuilder writes a small synthetic session.
type sessionBuilder struct {
	evs []events.Event
	t   time.Time
}

func newSession(cwd string) *sessionBuilder {
	b := &sessionBuilder{t: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	b.add(&events.SessionStarted{Format: "native", CWD: cwd})
	return b
}

func (b *sessionBuilder) add(p events.Payload) {
	b.t = b.t.Add(time.Second)
	b.evs = append(b.evs, events.Event{V: events.SchemaVersion, ID: fmt.Sprintf("e%d", len(b.evs)), Type: p.EventType(), Session: "s", Time: b.t, Data: p})
}

// call adds a tool call and its result.
func (b *sessionBuilder) call(id, tool, input, output string, exit int, hostPruned bool) {
	b.add(&events.ModelRequest{Request: "req-" + id})
	b.add(&events.ToolCall{Item: events.CallInputItem(id), CallID: id, Tool: tool, Input: json.RawMessage(input)})
	out := output
	r := &events.ToolResult{Item: id, CallID: id, Tool: tool, Output: &out, HostPruned: hostPruned}
	if exit != 0 {
		r.IsError = true
		r.ExitCode = &exit
		r.Error = &events.ToolError{Type: "exit_code", Message: "failed"}
	}
	b.add(r)
}

func (b *sessionBuilder) session(source string) importers.Session {
	return importers.Session{Format: "native", Source: source, SourceID: "s", Events: b.evs}
}

func shapesSession() importers.Session {
	b := newSession("/w")
	b.add(&events.Message{Item: "u1", Role: events.RoleUser, Text: "fix a.go"})
	b.call("c1", "Read", `{"file_path":"/w/a.go"}`, "package a // v1", 0, false)
	b.call("c2", "Read", `{"file_path":"a.go"}`, "package a // v1", 0, false)
	b.call("c3", "Grep", `{"pattern":"Add"}`, "a.go:3: func Add", 0, false)
	b.call("c4", "Grep", `{"pattern":"Add"}`, "a.go:3: func Add", 0, false)
	b.call("c5", "Bash", `{"command":"go test ./... 2>&1 | tail -20","description":"run tests"}`, "--- FAIL: TestAdd", 1, false)
	b.call("c6", "Edit", `{"file_path":"/w/a.go","old_string":"a - b","new_string":"a + b"}`, "The file a.go has been updated.", 0, false)
	b.call("c7", "Read", `{"file_path":"/w/a.go"}`, "package a // v2", 0, false)
	b.call("c8", "Bash", `{"command":"go test ./...","description":"again"}`, "ok a 0.1s", 0, false)
	b.call("c9", "Write", `{"file_path":"/ro/x.go","content":"`+strings.Repeat("x", 150)+`"}`, "permission denied", 1, false)
	return b.session("shapes.jsonl")
}

func TestShapeDetection(t *testing.T) {
	s := shapesSession()
	rep := &Report{Sessions: []SessionReport{{Source: "shapes.jsonl", Format: "native", Session: "s", Decisions: []DecisionRow{
		{DecisionSummary: projections.DecisionSummary{Item: "c1", Decision: events.Prune}},
		{DecisionSummary: projections.DecisionSummary{Item: "c3", Decision: events.Abstain}},
		{DecisionSummary: projections.DecisionSummary{Item: "u1", Decision: events.Keep}},
	}}}}
	p, err := Prevalence(rep, []importers.Session{s}, policy.Policy{}, byteCounter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Shape{}
	for _, it := range p.Sessions[0].Items {
		got[it.Item] = it.Shape
	}
	want := map[string]Shape{
		"c1":       ShapeRepeatedRead,
		"c2":       ShapeSupersededRead,
		"c3":       ShapeDuplicateSearch,
		"c5":       ShapeSupersededTest,
		"c6":       ShapeCompletedResidue,
		"c9/input": ShapeFailedLargeInput,
	}
	if len(got) != len(want) {
		t.Errorf("shapes %v, want %v", got, want)
	}
	for item, sh := range want {
		if got[item] != sh {
			t.Errorf("item %s: shape %q, want %q", item, got[item], sh)
		}
	}
	g := p.Total
	row := func(sh Shape) ShapeStats {
		for _, r := range g.Shapes {
			if r.Shape == sh {
				return r
			}
		}
		t.Fatalf("no row %s", sh)
		return ShapeStats{}
	}
	if r := row(ShapeRepeatedRead); r.Count != 1 || r.Tokens != len("package a // v1") || r.Policy.Prune != 1 || r.Policy.PruneTokens != r.Tokens {
		t.Errorf("repeated read row %+v", r)
	}
	if r := row(ShapeDuplicateSearch); r.Policy.Abstain != 1 || r.Policy.None != 0 {
		t.Errorf("duplicate search row %+v", r)
	}
	if r := row(ShapeSupersededTest); r.Policy.None != 1 {
		t.Errorf("test row %+v", r)
	}
	if g.Sessions != 1 || g.ToolOutputs != 9 || g.ToolOutputShare <= 0 || g.ToolOutputShare >= 1 {
		t.Errorf("group %+v", g)
	}
	if p.Sessions[0].Host != nil {
		t.Error("host agreement without host pruning")
	}
}

func TestPrevalenceTotalsAndJSON(t *testing.T) {
	a := shapesSession()
	b := newSession("/w")
	b.call("d1", "read", `{"filePath":"/w/b.go"}`, strings.Repeat("line\n", 40), 0, true)
	b.call("d2", "read", `{"filePath":"/w/b.go"}`, strings.Repeat("line\n", 40), 0, false)
	b.call("d3", "bash", `{"command":"pip install -e ."}`, strings.Repeat("Collecting x\n", 30), 0, false)
	bs := b.session("host.json")
	bs.Format = "opencode"
	rep := &Report{Tokenizer: "bytes", PolicyVersion: "test", Sessions: []SessionReport{
		{Source: "shapes.jsonl", Session: "s"}, {Source: "host.json", Session: "s-2"},
	}}
	p, err := Prevalence(rep, []importers.Session{a, bs}, policy.Policy{}, byteCounter{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back PrevalenceReport
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("prevalence JSON does not parse: %v", err)
	}
	// Formats add up to the total; shapes add up to "any shape".
	sum := newGroup("sum")
	for _, g := range back.Formats {
		sum.merge(g)
		shapeTok := 0
		for _, s := range g.Shapes {
			shapeTok += s.Tokens
		}
		if shapeTok != g.ShapeTokens {
			t.Errorf("%s: shapes %d tokens, any shape %d", g.Name, shapeTok, g.ShapeTokens)
		}
	}
	if sum.Tokens != back.Total.Tokens || sum.ToolOutputTokens != back.Total.ToolOutputTokens || sum.ShapeTokens != back.Total.ShapeTokens || sum.Sessions != 2 {
		t.Errorf("formats sum %+v, total %+v", sum, back.Total)
	}
	for i, s := range back.Total.Shapes {
		if s.Tokens != sum.Shapes[i].Tokens || s.Count != sum.Shapes[i].Count {
			t.Errorf("shape %s: total %d/%d, sum %d/%d", s.Shape, s.Count, s.Tokens, sum.Shapes[i].Count, sum.Shapes[i].Tokens)
		}
	}
	q := back.Total.Policy
	if q.Prune+q.Defer+q.Abstain+q.Keep+q.None != countAll(back.Total.Shapes) {
		t.Errorf("policy counts %+v for %d shaped items", q, countAll(back.Total.Shapes))
	}
	// Host agreement: the host pruned d1, the older identical read;
	// replayed without the host's pruning, our policy keeps that copy
	// (already cached) and prunes the newer one (keep_copy first).
	if len(back.Host) != 1 || back.Host[0].HostPruned != 1 || back.Host[0].Both+back.Host[0].OnlyHost != 1 || back.HostTotal.HostPruned != 1 {
		t.Fatalf("host agreement %+v", back.Host)
	}
	if back.Host[0].OnlyHost != 1 || back.Host[0].OnlyOurs != 1 {
		t.Errorf("host agreement %+v: want the host's copy and ours to differ", back.Host[0])
	}
	var sb strings.Builder
	WritePrevalence(&sb, p)
	for _, want := range []string{"| **all** |", "| repeated_read_unchanged |", "| install_log | 1 |", "| host.json | 1 |"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, sb.String())
		}
	}
}

func TestPrevalenceMismatch(t *testing.T) {
	_, err := Prevalence(&Report{Sessions: []SessionReport{{Source: "a"}}}, nil, policy.Policy{}, byteCounter{})
	if err == nil {
		t.Error("no error for a session count mismatch")
	}
}
