package scheduler

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// sb builds a synthetic session. Fact indices are returned by every fact
// helper so marks can name their cause.
type sb struct {
	evs   []events.Event
	facts int
	now   time.Time
	n     int
}

func newSession() *sb {
	b := &sb{now: t0}
	b.fact(&events.SessionStarted{Format: "native", Provider: "anthropic", Model: "claude-sonnet-4-5"})
	return b
}

// at sets the clock to t0+d for the following events.
func (b *sb) at(d time.Duration) *sb { b.now = t0.Add(d); return b }

func (b *sb) add(p events.Payload) events.Event {
	b.n++
	ev := events.New(fmt.Sprintf("e%d", b.n), "", "s1", b.now, p)
	b.evs = append(b.evs, ev)
	return ev
}

func (b *sb) fact(p events.Payload) int {
	b.add(p)
	b.facts++
	return b.facts - 1
}

func (b *sb) msg(item string, tokens int) int {
	return b.fact(&events.Message{Item: item, Role: events.RoleAssistant, Text: "x", Tokens: tokens})
}

func (b *sb) result(item string, tokens int) int {
	out := strings.Repeat("abcd", tokens)
	return b.fact(&events.ToolResult{Item: item, CallID: item, Tool: "Read", Output: &out})
}

func (b *sb) req(id string) int { return b.fact(&events.ModelRequest{Request: id}) }

func (b *sb) reqWith(p *events.ModelRequest) int { return b.fact(p) }

// mark records a mark on item with the given cause index; it returns the
// mark's event id.
func (b *sb) mark(item string, d events.Decision, cause int) string {
	m := &events.Mark{Item: item, Decision: d, Reason: events.ReasonDuplicateOutput, Cause: fmt.Sprintf("e%d", cause), CauseIndex: cause, PolicyVersion: "test@1"}
	switch d {
	case events.Prune:
		m.Rung = events.L0
	case events.Keep:
		m.Reason = events.ReasonRestored
	}
	return b.add(m).ID
}

func pol(mode string) policy.Policy {
	p := policy.Default()
	p.Scheduler.Mode = mode
	return p
}

// drive feeds evs to a fresh core the way the worker does (Feed: a model
// request is decided just before it is observed, and its application fed
// back). It returns the applications.
func drive(t testing.TB, p policy.Policy, evs []events.Event) (*Core, []events.Event) {
	t.Helper()
	c := New(p, "", "s1")
	var apps []events.Event
	for _, ev := range evs {
		if a := c.Feed(ev); a != nil {
			if err := a.Validate(); err != nil {
				t.Fatalf("application invalid: %v", err)
			}
			apps = append(apps, *a)
		}
	}
	return c, apps
}

func appOf(ev events.Event) *events.Application { return ev.Data.(*events.Application) }

func encodeAll(t testing.TB, evs []events.Event) string {
	t.Helper()
	var sb strings.Builder
	for _, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		sb.Write(b)
		sb.WriteByte('\n')
	}
	return sb.String()
}
