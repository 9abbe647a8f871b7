package lab

import (
	"context"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/eval/lab/fixtures"
)

// TestSpanProbes checks that the span fixtures exercise span references:
// under D (span references are on by default) the range read of each span_range episode is a span
// reference to the whole read its probe needs, and the probe's evidence is
// present in the bundle rendered at the probe's request (through the whole
// read, the reference line itself never counts).
func TestSpanProbes(t *testing.T) {
	t.Parallel()
	fx, err := fixtures.Generate(fixtures.Config{Seed: 5, Sessions: 1, MinCalls: 25, MaxCalls: 50}, tokens.New())
	if err != nil {
		t.Fatal(err)
	}
	var cond condition
	for _, c := range mustConditions(t) {
		if c.name == CondD {
			cond = c
		}
	}
	s := fx.Sessions[0]
	marks, apps := runProduction(*cond.pol, s.Events, fx.Blobs)
	refTo := map[string]bool{} // whole reads named by a span reference
	spanMark := map[string]bool{}
	for _, ev := range marks {
		m := ev.Data.(*events.Mark)
		if m.Reason != events.ReasonSpanReference {
			continue
		}
		spanMark[ev.ID] = true
		for _, e := range m.Evidence {
			if e.Kind == "span" {
				refTo[e.Item] = true
			}
		}
	}
	// A newcomer's span reference is free: it applies at the first request
	// after the read, before the read was ever sent (the application's
	// trigger names its batch, which may hold other marks).
	firstReq := map[string]string{} // item -> first request after it
	var pendingItems []string
	for _, ev := range s.Events {
		switch p := ev.Data.(type) {
		case *events.ToolResult:
			pendingItems = append(pendingItems, p.Item)
		case *events.ModelRequest:
			for _, it := range pendingItems {
				firstReq[it] = p.Request
			}
			pendingItems = nil
		}
	}
	markItem := map[string]string{}
	for _, ev := range marks {
		markItem[ev.ID] = ev.Data.(*events.Mark).Item
	}
	first := map[string]bool{}
	for _, ev := range apps {
		a := ev.Data.(*events.Application)
		for _, id := range a.Marks {
			if spanMark[id] && !first[id] {
				first[id] = true
				if want := firstReq[markItem[id]]; a.Request != want {
					t.Errorf("span mark %s applied at request %s, want %s (before its read was sent)", id, a.Request, want)
				}
			}
		}
	}
	if len(first) == 0 {
		t.Error("no span reference applied")
	}
	n := 0
	for id, l := range s.Labels {
		if l.Category == "span_range" && l.Class == fixtures.Needed {
			n++
			if !refTo[id] {
				t.Errorf("%s: needed by a span_range probe but no span reference names it", id)
			}
		}
	}
	if n == 0 {
		t.Fatal("no span_range probe in the fixture")
	}
	r, err := evaluate(context.Background(), cond, fx, s, tokens.New())
	if err != nil {
		t.Fatal(err)
	}
	if b := r.beh[StrategyScheduled]; b.passed != b.probes || r.pres.falsePr != 0 {
		t.Errorf("D: %d/%d probes passed, %d false prunes", b.passed, b.probes, r.pres.falsePr)
	}
}
