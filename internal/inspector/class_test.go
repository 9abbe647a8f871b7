package inspector

import (
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/projections"
)

func TestClassOf(t *testing.T) {
	mark := func(d events.Decision, applied bool) *projections.MarkRef {
		return &projections.MarkRef{Decision: d, Applied: applied}
	}
	protected := &projections.Decision{DecisionSummary: projections.DecisionSummary{Decision: events.Keep}, Protection: []events.Reason{events.ReasonUserMessage}}
	cases := []struct {
		name string
		it   projections.Item
		d    *projections.Decision
		want string
	}{
		{"no mark", projections.Item{}, nil, ClassKept},
		{"plain keep", projections.Item{LatestMark: mark(events.Keep, false)}, &projections.Decision{DecisionSummary: projections.DecisionSummary{Decision: events.Keep}}, ClassKept},
		{"keep under protection", projections.Item{LatestMark: mark(events.Keep, false)}, protected, ClassProtected},
		{"pinned", projections.Item{Pinned: true}, nil, ClassProtected},
		{"pinned beats a pending prune", projections.Item{Pinned: true, LatestMark: mark(events.Prune, false)}, nil, ClassProtected},
		{"applied prune in effect", projections.Item{Pruned: true, LatestMark: mark(events.Prune, true)}, nil, ClassPruned},
		{"pending prune", projections.Item{LatestMark: mark(events.Prune, false)}, nil, ClassDeferred},
		{"restored prune", projections.Item{Restored: true, LatestMark: mark(events.Prune, true)}, nil, ClassKept},
		{"defer", projections.Item{LatestMark: mark(events.Defer, false)}, nil, ClassDeferred},
		{"abstain", projections.Item{LatestMark: mark(events.Abstain, false)}, nil, ClassAbstained},
		{"host compacted beats pruned", projections.Item{HostCompacted: true, Pruned: true}, nil, ClassHostRemoved},
		{"host pruned", projections.Item{HostPruned: true, LatestMark: mark(events.Abstain, false)}, nil, ClassHostRemoved},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := classOf(tc.it, tc.d); got != tc.want {
				t.Errorf("classOf = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBuildStripAggregates(t *testing.T) {
	mk := func(n int) []projections.Item {
		items := make([]projections.Item, n)
		for i := range items {
			items[i] = projections.Item{Index: i, ID: string(rune('a'+i%26)) + string(rune('0'+i%10)), Tokens: 10 + i%100}
			if i%5 == 0 {
				items[i].Pruned = true
			}
		}
		return items
	}
	tm := timing{first: map[string]int{}, appAt: map[string]int{}, hc: -1}
	small := buildStrip(mk(MaxBlocks), nil, tm)
	if len(small.Blocks) != MaxBlocks || small.Aggregates != nil {
		t.Fatalf("%d items: %d blocks, %d aggregates; want one block each", MaxBlocks, len(small.Blocks), len(small.Aggregates))
	}
	for _, b := range small.Blocks {
		if b.Width < 4 || b.Width > stripWidth {
			t.Fatalf("block width %d outside [4, %d]", b.Width, stripWidth)
		}
	}
	big := buildStrip(mk(20000), nil, tm)
	if big.Blocks != nil || len(big.Aggregates) == 0 || len(big.Aggregates) > MaxBlocks {
		t.Fatalf("20000 items: %d blocks, %d aggregates", len(big.Blocks), len(big.Aggregates))
	}
	// Aggregates cover every item once, in order, and their segments add
	// up to their tokens.
	next, tokens := 0, 0
	for _, a := range big.Aggregates {
		if a.From != next || a.To < a.From {
			t.Fatalf("aggregate %d-%d after item %d", a.From, a.To, next-1)
		}
		next = a.To + 1
		seg := 0
		for _, s := range a.Segs {
			seg += s.Tokens
		}
		if seg != a.Tokens {
			t.Fatalf("aggregate %d-%d: segments %d tokens, aggregate %d", a.From, a.To, seg, a.Tokens)
		}
		tokens += a.Tokens
	}
	if next != 20000 || tokens != big.Tokens {
		t.Fatalf("aggregates end at %d with %d tokens; want 20000 and %d", next, tokens, big.Tokens)
	}
}

func TestTimingOf(t *testing.T) {
	ev := func(id string, p events.Payload) events.Event { return events.Event{ID: id, Data: p} }
	evs := []events.Event{
		ev("e1", &events.Message{Item: "u1"}),
		ev("e2", &events.ModelRequest{Request: "r0"}),
		ev("e3", &events.ToolCall{Item: "c1", CallID: "k"}),
		ev("e4", &events.ToolResult{Item: "t1", CallID: "k"}),
		ev("e5", &events.ModelRequest{Request: "r1"}),
		// Published after its request's fact (as the scheduler worker
		// does for imported traces): it counts at r1 by its request id.
		ev("a1", &events.Application{Request: "r1"}),
		ev("e6", &events.HostCompaction{}),
		ev("a2", &events.Application{Request: "live"}), // unknown id: the next request
		ev("e7", &events.Message{Item: "u2"}),
	}
	tm := timingOf(evs, map[string]int{"r0": 0, "r1": 1})
	want := map[string]int{"u1": 0, "c1": 1, "t1": 1, "u2": 2}
	for id, k := range want {
		if tm.first[id] != k {
			t.Errorf("item %s first in request %d, want %d", id, tm.first[id], k)
		}
	}
	if tm.appAt["a1"] != 1 || tm.appAt["a2"] != 2 || tm.hc != 2 {
		t.Errorf("applications at %v, host compaction at %d; want a1:1 a2:2, 2", tm.appAt, tm.hc)
	}
	b := tm.blockOf(projections.Item{ID: "t1", Pruned: true, Applied: &projections.AppliedRef{Application: "a1"}}, nil)
	if b.R != 1 || b.P != 1 || b.H != -1 || b.Class != ClassPruned {
		t.Errorf("pruned t1: %+v", b)
	}
	b = tm.blockOf(projections.Item{ID: "u1", HostCompacted: true}, nil)
	if b.H != 2 || b.Class != ClassHostRemoved {
		t.Errorf("compacted u1: %+v", b)
	}
}
