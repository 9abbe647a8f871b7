package inspector_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/inspector"
)

// TestControlShown: every decision shows who decided it (events.Control):
// the strip's tooltip, the item panel's badge and control row, and the
// pending marks table. The session holds one decision of each mode: a
// rule's KEEP, a person's manual prune and the agent's prune request, both
// waiting for the next request.
func TestControlShown(t *testing.T) {
	const sess = "control"
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var evs []events.Event
	add := func(p events.Payload) {
		evs = append(evs, events.New(fmt.Sprintf("e%d", len(evs)+1), "", sess, t0.Add(time.Duration(len(evs))*time.Second), p))
	}
	add(&events.SessionStarted{Format: "native", Agent: "test", Provider: "anthropic", Model: "claude-sonnet-4-5"})
	add(&events.Message{Item: "u1", Role: events.RoleUser, Text: "start", Tokens: 40})
	for _, id := range []string{"r1", "r2", "r3"} {
		add(&events.ToolCall{Item: id + "/input", CallID: id, Tool: "Bash", Input: []byte(`{"command":"ls"}`), InputTokens: 20})
		add(&events.ToolResult{Item: id, CallID: id, Tool: "Bash", OutputRef: &events.ContentRef{Hash: "sha256:" + strings.Repeat(id[1:], 64), Tokens: 400}})
	}
	add(&events.ModelRequest{Request: "q1", Provider: "anthropic", Model: "claude-sonnet-4-5"})
	add(&events.Mark{Item: "r1", Decision: events.Keep, Reason: events.ReasonUnique, Part: "output", Cause: "e4", CauseIndex: 3, PolicyVersion: "pv", By: "eligibility"})
	add(&events.Mark{Item: "r2", Decision: events.Prune, Reason: events.ReasonManualPrune, Part: "output", TokensEstimated: 380, Cause: "e6", CauseIndex: 5, PolicyVersion: "pv", By: "alice"})
	add(&events.Mark{Item: "r3", Decision: events.Prune, Reason: events.ReasonAgentRequest, Part: "output", TokensEstimated: 380, Cause: "e8", CauseIndex: 7, PolicyVersion: "pv", By: events.ByAgent})

	src := newMemSource(evs)
	srv := httptest.NewServer(inspector.New(inspector.Config{Source: src, Tenant: func(*http.Request) (string, int, error) { return events.DefaultTenant, 200, nil }}))
	defer srv.Close()
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		return string(b)
	}

	page := get("/ui/sessions/" + sess)
	for _, want := range []string{
		"KEEP UNIQUE · by rule\"",
		"PRUNE MANUAL_PRUNE · by person\"",
		"PRUNE AGENT_REQUEST · by agent\"",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("session page: no strip tooltip ending %q", want)
		}
	}
	if len(src.core.Pending()) != 2 {
		t.Fatalf("want the two prunes pending, got %+v", src.core.Pending())
	}
	_, pending, _ := strings.Cut(page, `<table class="pending">`)
	for item, want := range map[string]string{
		"r2": `<td>PRUNE</td><td><span class="badge ctl-person">person</span>`,
		"r3": `<td>PRUNE</td><td><span class="badge ctl-agent">agent</span>`,
	} {
		// item, tool, source, then the decision and who decided.
		_, row, _ := strings.Cut(pending, `data-item="`+item+`">`+item+`</a></td>`)
		row, _, _ = strings.Cut(row, "</tr>")
		if !strings.Contains(row, want) || strings.Count(row, "<td>") < 4 {
			t.Errorf("pending marks table: row %s is %q, want tool, source and %q", item, row, want)
		}
	}

	for item, mode := range map[string]string{"r1": "rule", "r2": "person", "r3": "agent"} {
		panel := get("/ui/sessions/" + sess + "/items/" + item)
		if !strings.Contains(panel, `<span class="badge ctl-`+mode+`">`+mode+`</span></td></tr>`) {
			t.Errorf("item %s: no %s badge beside the decision", item, mode)
		}
		if !strings.Contains(panel, `<td class="control"><b>`+mode+`</b><br><small>`) {
			t.Errorf("item %s: no control row saying %s", item, mode)
		}
	}
}
