package modelrun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/agenttools"
	"github.com/prunesched/prunesched/internal/eval/lab"
	"github.com/prunesched/prunesched/internal/eval/lab/fixtures"
	"github.com/prunesched/prunesched/internal/terms"
	"github.com/prunesched/prunesched/projections"
)

// small is one short fixture session.
var small = lab.Config{Seed: 3, Sessions: 1, MinCalls: 25, MaxCalls: 50}

// truth is what the fake model knows of a question: the probes asking it
// (a question can be asked by several probes of a session).
type truth struct {
	evidence string
	handles  map[string]bool // "#N" of the items that held the evidence
}

// fakeModel is an OpenAI-compatible chat endpoint that answers from what is
// in its context: it answers with every ground-truth fact of the question
// it finds in its messages; otherwise, when context_recover is offered and
// it has not called it yet, it calls it on a handle it sees in a
// placeholder of an item that held the fact; otherwise it says it does not
// know. So a removed fact is really missing.
type fakeModel struct {
	questions map[string][]truth
	mu        sync.Mutex
	recovered map[string]string // handle -> the tool message's content
}

var placeholderHandle = regexp.MustCompile(`, context_recover (#[0-9]+)\]`)

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, "no such route "+r.URL.Path, http.StatusNotFound)
		return
	}
	var req struct {
		Messages []message        `json:"messages"`
		Tools    []map[string]any `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	question, texts, called := "", []string{}, false
	recoverCalls := map[string]string{} // tool call id -> handle
	for _, m := range req.Messages {
		if m.Content != nil {
			texts = append(texts, strs(*m.Content)...)
			if m.Role == "user" {
				question = strings.TrimPrefix(*m.Content, "Task: ")
			}
		}
		for _, tc := range m.ToolCalls {
			texts = append(texts, strs(tc.Function.Arguments)...)
			if tc.Function.Name == string(agenttools.Recover) {
				var a agenttools.RecoverArgs
				_ = json.Unmarshal([]byte(tc.Function.Arguments), &a)
				recoverCalls[tc.ID] = a.Handle
			}
		}
		if h, ok := recoverCalls[m.ToolCallID]; ok && m.Role == "tool" && m.Content != nil {
			called = true
			f.mu.Lock()
			f.recovered[h] = *m.Content
			f.mu.Unlock()
		}
	}
	all := strings.Join(texts, "\n")
	var found []string
	for _, tr := range f.questions[question] {
		if strings.Contains(all, tr.evidence) {
			found = append(found, tr.evidence)
		}
	}
	switch {
	case len(found) > 0:
		answer(w, message{Role: "assistant", Content: ptr("From the context: " + strings.Join(found, " / "))})
	case len(req.Tools) > 0 && !called:
		for _, m := range placeholderHandle.FindAllStringSubmatch(all, -1) {
			for _, tr := range f.questions[question] {
				if tr.handles[m[1]] {
					call := toolCall{ID: "call_recover_" + m[1][1:], Type: "function"}
					call.Function.Name = string(agenttools.Recover)
					call.Function.Arguments = `{"handle":"` + m[1] + `"}`
					answer(w, message{Role: "assistant", ToolCalls: []toolCall{call}})
					return
				}
			}
		}
		answer(w, message{Role: "assistant", Content: ptr("I do not know.")})
	default:
		answer(w, message{Role: "assistant", Content: ptr("I do not know.")})
	}
}

// strs is s and, when s is JSON, every string inside it (tool inputs).
func strs(s string) []string {
	out := []string{s}
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return out
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

func answer(w http.ResponseWriter, m message) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"index": 0, "message": m, "finish_reason": "stop"}}})
}

// newFake builds the fake model's knowledge from the fixture cfg
// generates, and returns the original of every item by handle.
func newFake(t *testing.T, cfg lab.Config) (*fakeModel, map[string]string) {
	t.Helper()
	fx, err := fixtures.Generate(fixtures.Config{Seed: cfg.Seed, Sessions: cfg.Sessions, MinCalls: cfg.MinCalls, MaxCalls: cfg.MaxCalls}, tokens.New())
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeModel{questions: map[string][]truth{}, recovered: map[string]string{}}
	originals := map[string]string{}
	for _, s := range fx.Sessions {
		sess := projections.NewSession(s.Events[0].Tenant, s.Events[0].Session)
		for _, ev := range s.Events {
			sess.Observe(ev)
		}
		texts, err := fx.ItemTexts(s)
		if err != nil {
			t.Fatal(err)
		}
		for id, text := range texts {
			if i, ok := sess.IndexOf(id); ok {
				originals[fmt.Sprintf("#%d", i)] = text
			}
		}
		for _, p := range s.Probes {
			tr := truth{evidence: p.Evidence, handles: map[string]bool{}}
			for _, id := range p.Items {
				if i, ok := sess.IndexOf(id); ok {
					tr.handles[fmt.Sprintf("#%d", i)] = true
				}
			}
			f.questions[p.Question] = append(f.questions[p.Question], tr)
		}
	}
	if len(fx.Sessions) != 1 {
		t.Fatal("handles are per session: the fake knows one session")
	}
	return f, originals
}

// TestRunAgainstFakeModel: with a model that answers only from its
// context, task success is the lab's evidence presence plus, where our
// placeholder names a holder and the tool is offered, one recovery; every
// recovery returns the original byte for byte; the peers offer no tool.
func TestRunAgainstFakeModel(t *testing.T) {
	t.Parallel()
	fake, originals := newFake(t, small)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	var prog bytes.Buffer
	rows := []string{lab.CondA, lab.CondD, lab.CondL3, lab.CondG, lab.CondE, lab.PeerDCP, lab.PeerMasking}
	rep, err := Run(context.Background(), Config{Lab: small, Conditions: rows, MaxRecoveries: 2, Progress: &prog,
		Endpoint: Endpoint{URL: srv.URL + "/v1", Model: "fake", HTTP: srv.Client()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != len(rows) {
		t.Fatalf("%d rows, want %d", len(rep.Rows), len(rows))
	}
	recoveries := 0
	for i, x := range rep.Rows {
		if x.Condition != rows[i] {
			t.Errorf("row %d is %s, want %s", i, x.Condition, rows[i])
		}
		peer := x.Condition == lab.PeerDCP || x.Condition == lab.PeerMasking
		want, calls := x.EvidencePresent+x.Recoverable, x.Recoverable
		if peer {
			want, calls = x.EvidencePresent, 0
		}
		if x.Succeeded != want || x.RecoveryCalls != calls || x.Recovered != calls || x.SucceededAfterRecovery != calls {
			t.Errorf("%s: %+v: want %d successes and %d recoveries", x.Condition, x, want, calls)
		}
		if x.Requests != x.Probes+x.RecoveryCalls {
			t.Errorf("%s: %d requests for %d probes and %d recoveries", x.Condition, x.Requests, x.Probes, x.RecoveryCalls)
		}
		if x.Condition == lab.CondA && x.Succeeded != x.Probes {
			t.Errorf("A: %d/%d: raw history answers every probe", x.Succeeded, x.Probes)
		}
		if x.Condition == lab.CondE && x.Recoverable == 0 {
			t.Error("E: nothing to recover; the test does not exercise recovery")
		}
		recoveries += x.RecoveryCalls
		if !strings.Contains(prog.String(), "model: row "+x.Condition+" done") {
			t.Errorf("no progress line for %s", x.Condition)
		}
	}
	if len(fake.recovered) == 0 {
		t.Fatal("the fake model recovered nothing")
	}
	for h, got := range fake.recovered {
		if got != originals[h] {
			t.Errorf("recovery of %s is not the original byte for byte (%d bytes, want %d)", h, len(got), len(originals[h]))
		}
	}
	var tab bytes.Buffer
	if err := WriteTable(&tab, rep); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + tab.String())
	for _, w := range []string{"task success", "evidence present", "recovery calls", ScorerNote} {
		if !strings.Contains(tab.String(), w) {
			t.Errorf("table lacks %q", w)
		}
	}
}

// TestEndpointErrors: what goes wrong with the endpoint says where and
// what, and never shows the API key.
func TestEndpointErrors(t *testing.T) {
	t.Parallel()
	const key = "sk-test-SECRET-0123456789"
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	cases := []struct {
		name    string
		handler http.HandlerFunc
		url     string
		want    []string
	}{
		{"unreachable", nil, closedURL, []string{closedURL, "--model", "unreachable"}},
		{"server error", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "model overloaded: try later", http.StatusServiceUnavailable)
		}, "", []string{"/chat/completions", "503 Service Unavailable", "model overloaded"}},
		{"echoes the key", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad key "+r.Header.Get("Authorization"), http.StatusUnauthorized)
		}, "", []string{"401", "bad key Bearer [api key]"}},
		{"not a completion", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "<html>proxy login</html>")
		}, "", []string{"not a chat completion", "<html>proxy login"}},
		{"no choices", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"choices":[]}`)
		}, "", []string{"no choices"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.url
			client := http.DefaultClient
			if tc.handler != nil {
				srv := httptest.NewServer(tc.handler)
				defer srv.Close()
				url, client = srv.URL, srv.Client()
			}
			_, err := Run(context.Background(), Config{Lab: small, Conditions: []string{lab.CondA}, MaxRecoveries: 1,
				Endpoint: Endpoint{URL: url, Model: "m", APIKey: key, Flag: "--model", HTTP: client}})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), key) {
				t.Errorf("error shows the API key: %q", err)
			}
		})
	}
}

// TestScore: the ground truth verbatim (case and white space aside), or
// every distinctive term of it.
func TestScore(t *testing.T) {
	ev := "Constraint: the column legacy_quota_id must not be dropped before release 3.2 (QX7-42)."
	for _, c := range []struct {
		name, answer, evidence string
		want                   bool
	}{
		{"verbatim", "Yes: " + ev, ev, true},
		{"case and spaces", strings.ToUpper(strings.ReplaceAll(ev, " ", "  \n")), ev, true},
		{"terms in other words", "No: legacy_quota_id stays until 3.2 per QX7-42.", ev, true},
		{"a term missing", "No: the column stays until 3.2.", ev, false},
		{"no terms, paraphrase", "the tests passed", "All tests pass now", false},
		{"empty answer", "", ev, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Score(c.answer, c.evidence); got != c.want {
				t.Fatalf("Score(%q, %q) = %v (terms %q)", c.answer, c.evidence, got, terms.Of(c.evidence))
			}
		})
	}
}
