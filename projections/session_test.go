package projections

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/placeholder"
)

func TestGolden(t *testing.T) {
	fx := loadFixture(t)
	s := feed(fx.events)
	got := renderAll(t, s, fx.blobs, fx.tc)
	names := make([]string, 0, len(got))
	for k := range got {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		goldenCompare(t, "golden."+k, got[k])
	}
}

// TestRebuild discards the projection and replays the log (issue 2 item 7),
// once plainly and once with every event redelivered: every rendering and
// the decisions are byte-identical.
func TestRebuild(t *testing.T) {
	fx := loadFixture(t)
	first := renderAll(t, feed(fx.events), fx.blobs, fx.tc)

	again := renderAll(t, feed(fx.events), fx.blobs, &wordCounter{})

	redelivered := NewSession("default", "golden")
	for _, e := range fx.events {
		redelivered.Observe(e)
		redelivered.Observe(e)
	}
	dup := renderAll(t, redelivered, fx.blobs, &wordCounter{})

	for k, want := range first {
		testutil.True(t, bytes.Equal(again[k], want), "rebuild changed %s", k)
		testutil.True(t, bytes.Equal(dup[k], want), "redelivery changed %s", k)
	}
}

func TestSemantics(t *testing.T) {
	fx := loadFixture(t)
	s := feed(fx.events)
	items := map[string]Item{}
	for _, it := range s.Items() {
		items[it.ID] = it
	}
	cases := []struct {
		item                             string
		pruned, hostPruned, hostCompacte bool
	}{
		{"t0", false, false, true},
		{"sys0", false, false, true},
		{"toolu_01", true, false, false},        // applied L0 prune
		{"toolu_03/input", true, false, false},  // errored-input prune (mark on the result, part input)
		{"toolu_04", false, false, false},       // the surviving copy
		{"toolu_05", false, true, false},        // host pruned
		{"toolu_06", false, false, false},       // pending mark: no change
		{"toolu_08", false, false, false},       // restored
		{"toolu_10/input", false, false, false}, // no result yet
	}
	for _, c := range cases {
		it, ok := items[c.item]
		testutil.True(t, ok, "item %s missing", c.item)
		testutil.Equal(t, it.Pruned, c.pruned, c.item+" pruned")
		testutil.Equal(t, it.HostPruned, c.hostPruned, c.item+" host_pruned")
		testutil.Equal(t, it.HostCompacted, c.hostCompacte, c.item+" host_compacted")
	}
	testutil.True(t, items["toolu_08"].Restored, "toolu_08 not restored")
	testutil.True(t, items["toolu_06"].LatestMark != nil && !items["toolu_06"].LatestMark.Applied, "toolu_06 mark should be pending")

	dec := map[string]Decision{}
	for _, d := range s.Decisions() {
		dec[d.Item] = d
	}
	d := dec["toolu_01"]
	testutil.True(t, d.Applied && d.InEffect && d.AppliedAt == "r4" && d.Trigger == events.TriggerNextRequest, "toolu_01 decision: %+v", d)
	testutil.Equal(t, d.Application.FirstDivergence, 180, "first divergence")
	testutil.Equal(t, d.Application.MutationRadius, 420, "mutation radius")
	testutil.True(t, dec["toolu_03/input"].Residue != nil, "residue missing")
	testutil.True(t, !dec["toolu_06"].Applied, "pending mark shown applied")
	testutil.True(t, dec["toolu_08"].Applied && !dec["toolu_08"].InEffect, "restored item: %+v", dec["toolu_08"])

	st, err := s.Stats(context.Background(), nil, fx.tc)
	testutil.NoError(t, err)
	testutil.Equal(t, st.DanglingMarks, 1, "dangling marks")
	testutil.Equal(t, st.PrunedItems, 2, "pruned items")
	testutil.Equal(t, st.HostPrunedItems, 1, "host-pruned items")
	testutil.Equal(t, st.HostCompactedItems, 4, "host-compacted items")
	testutil.Equal(t, st.Pending, 1, "pending")
	testutil.Equal(t, st.ToolCalls, 11, "tool calls")
}

// A pending mark changes nothing; applying it prunes; a later applied KEEP
// brings the item back; a restore brings it back at once, and an older PRUNE
// applied after the restore is stale.
func TestApplyKeepRestore(t *testing.T) {
	fx := loadFixture(t)
	s := feed(fx.events)
	ctx := context.Background()
	render := func() string {
		b, err := RenderAnthropic(ctx, s.Bundle(), fx.blobs, fx.tc)
		testutil.NoError(t, err)
		return string(b)
	}
	at := time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)
	n := 0
	add := func(p events.Payload) string {
		n++
		id := "x" + string(rune('a'+n))
		s.Observe(events.New(id, "", "golden", at.Add(time.Duration(n)*time.Second), p))
		return id
	}
	mark := func(item string, d events.Decision, r events.Reason) string {
		m := &events.Mark{Item: item, Decision: d, Reason: r, Cause: "e27", CauseIndex: 25, PolicyVersion: "pv1"}
		if d == events.Prune {
			m.Rung = events.L0
		}
		return add(m)
	}
	apply := func(marks ...string) {
		add(&events.Application{Request: "r9", Marks: marks, Items: marks, Trigger: events.TriggerManual, PolicyVersion: "pv1"})
	}
	pruned := func(id string) bool {
		for _, it := range s.Items() {
			if it.ID == id {
				return it.Pruned
			}
		}
		t.Fatalf("no item %s", id)
		return false
	}

	before := render()
	pending := mark("toolu_07", events.Prune, events.ReasonDuplicateOutput)
	testutil.Equal(t, render(), before, "bundle after a pending mark")

	apply(pending)
	testutil.True(t, pruned("toolu_07"), "applied prune not in effect")
	testutil.True(t, strings.Contains(render(), ", context_recover #"), "placeholder missing")

	keep := mark("toolu_07", events.Keep, events.ReasonUnique)
	testutil.True(t, pruned("toolu_07"), "pending KEEP changed the bundle")
	apply(keep)
	testutil.True(t, !pruned("toolu_07"), "applied KEEP did not bring it back")

	apply(pending) // re-applying the old PRUNE puts it back into effect
	testutil.True(t, pruned("toolu_07"), "re-applied prune not in effect")
	add(&events.Restore{Item: "toolu_07"})
	testutil.True(t, !pruned("toolu_07"), "restore not immediate")
	apply(pending) // older than the restore: stale
	testutil.True(t, !pruned("toolu_07"), "stale prune applied")
	st, err := s.Stats(ctx, nil, fx.tc)
	testutil.NoError(t, err)
	testutil.Equal(t, st.StaleApplications, 1, "stale applications")

	// A prune on a thinking block is never rendered.
	apply(mark("a1", events.Prune, events.ReasonDuplicateOutput))
	testutil.True(t, !pruned("a1"), "thinking block pruned")
}

func TestObserveIgnoresOtherSessions(t *testing.T) {
	s := NewSession("", "one")
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	s.Observe(events.New("e1", "", "two", at, &events.Message{Item: "m", Role: events.RoleUser, Text: "x"}))
	s.Observe(events.New("e2", "acme", "one", at, &events.Message{Item: "m", Role: events.RoleUser, Text: "x"}))
	testutil.Equal(t, len(s.Items()), 0, "items from other sessions")
	s.Observe(events.New("e3", "default", "one", at, &events.Message{Item: "m", Role: events.RoleUser, Text: "x"}))
	s.Observe(events.New("e4", "", "one", at, &events.Message{Item: "m", Role: events.RoleUser, Text: "y"}))
	testutil.Equal(t, len(s.Items()), 1, "items")
	st, err := s.Stats(context.Background(), nil, nil)
	testutil.NoError(t, err)
	testutil.Equal(t, st.DuplicateItems, 1, "duplicate items")
}

func TestMissingBlobIsAnError(t *testing.T) {
	fx := loadFixture(t)
	s := feed(fx.events)
	_, err := RenderAnthropic(context.Background(), s.Bundle(), store.NewMemBlobs(), nil)
	testutil.True(t, err != nil && strings.Contains(err.Error(), "output of item"), "got %v", err)
}

// One writer and several readers at once (run with -race).
func TestConcurrentObserveAndRead(t *testing.T) {
	fx := loadFixture(t)
	s := NewSession("", "golden")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, e := range fx.events {
			s.Observe(e)
		}
	}()
	ctx := context.Background()
	for {
		select {
		case <-done:
			return
		default:
		}
		_, err := RenderText(ctx, s.Bundle(), fx.blobs, fx.tc)
		testutil.NoError(t, err)
		_, err = s.Stats(ctx, nil, fx.tc)
		testutil.NoError(t, err)
		_ = s.Decisions()
	}
}

// TestPlaceholderFollowsARemovedSurvivor: when the copy a pruned item
// deferred to is pruned later, the placeholder stops claiming it is kept.
func TestPlaceholderFollowsARemovedSurvivor(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	out := "package config\n"
	changed := "package config // v2\n"
	var evs []events.Event
	n := 0
	add := func(p events.Payload) string {
		n++
		id := fmt.Sprintf("e%d", n)
		evs = append(evs, events.New(id, "", "golden", at.Add(time.Duration(n)*time.Second), p))
		return id
	}
	for _, c := range []struct{ id, out string }{{"r1", out}, {"r2", out}, {"r3", changed}} {
		add(&events.ToolCall{Item: c.id + "/input", CallID: c.id, Tool: "Read", Input: json.RawMessage(`{"file_path":"config.go"}`)})
		o := c.out
		add(&events.ToolResult{Item: c.id, CallID: c.id, Tool: "Read", Output: &o})
	}
	m1 := add(&events.Mark{Item: "r1", Decision: events.Prune, Rung: events.L0, Reason: events.ReasonDuplicateOutput,
		Recoverability: &events.Recoverability{Log: "e2", Survivor: "r2"}, Cause: "e4", CauseIndex: 3, PolicyVersion: "pv"})
	add(&events.Application{Request: "q1", Marks: []string{m1}, Items: []string{"r1"}, Trigger: events.TriggerNextRequest, PolicyVersion: "pv"})
	s := feed(evs)
	text := func() string {
		b, err := RenderText(context.Background(), s.Bundle(), store.NewMemBlobs(), nil)
		testutil.NoError(t, err)
		return string(b)
	}
	handle := func(id string) string {
		for _, it := range s.Items() {
			if it.ID == id {
				return placeholder.Handle(it.Index)
			}
		}
		return "?"
	}
	testutil.True(t, strings.Contains(text(), "copy "+handle("r2")+", context_recover"), "placeholder does not name the kept copy:\n%s", text())

	n2 := len(evs)
	m2 := add(&events.Mark{Item: "r2", Decision: events.Prune, Rung: events.L2, Reason: events.ReasonSuperseded,
		Recoverability: &events.Recoverability{Log: "e4", Survivor: "r3"}, Cause: "e6", CauseIndex: 5, PolicyVersion: "pv"})
	add(&events.Application{Request: "q2", Marks: []string{m2}, Items: []string{"r2"}, Trigger: events.TriggerNextRequest, PolicyVersion: "pv"})
	for _, e := range evs[n2:] {
		s.Observe(e)
	}
	got := text()
	testutil.True(t, !strings.Contains(got, "copy "+handle("r2")+", context_recover"), "placeholder still claims r2 is kept:\n%s", got)
	testutil.True(t, strings.Contains(got, "copy "+handle("r2")+" (since removed: L2 SUPERSEDED, see "+handle("r3")+")"), "placeholder does not say r2 was removed:\n%s", got)
}

// TestDecisionControl: a certificate names who decided it, by
// events.Control: the evidence ladder ("rule"), the agent's request
// ("agent", accepted or refused) or a person ("person").
func TestDecisionControl(t *testing.T) {
	fx := loadFixture(t)
	s := feed(fx.events)
	at := time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)
	marks := []struct {
		item string
		m    events.Mark
		want string
	}{
		{"toolu_07", events.Mark{Decision: events.Prune, Reason: events.ReasonAgentRequest, By: events.ByAgent}, events.ControlAgent},
		{"toolu_08", events.Mark{Decision: events.Keep, Reason: events.ReasonRecentTurn, By: events.ByAgent, Protection: []events.Reason{events.ReasonRecentTurn}}, events.ControlAgent},
		{"toolu_09", events.Mark{Decision: events.Prune, Reason: events.ReasonManualPrune, By: "alice"}, events.ControlPerson},
		{"toolu_02", events.Mark{Decision: events.Prune, Rung: events.L0, Reason: events.ReasonDuplicateOutput, By: "eligibility"}, events.ControlRule},
	}
	for i, c := range marks {
		m := c.m
		m.Item, m.Cause, m.CauseIndex, m.PolicyVersion = c.item, "e27", 25, "pv1"
		s.Observe(events.New(fmt.Sprintf("xc%d", i), "", "golden", at.Add(time.Duration(i)*time.Second), &m))
	}
	got := map[string]string{}
	for _, d := range s.Decisions() {
		got[d.Item] = d.Control
	}
	for _, c := range marks {
		testutil.Equal(t, got[c.item], c.want, c.item+" control")
	}
}

// TestItemStateSize: an item state fits the allocator's 256-byte size
// class (one per item; the next class is 288 bytes).
func TestItemStateSize(t *testing.T) {
	if size := unsafe.Sizeof(itemState{}); size > 256 {
		t.Fatalf("item states of %d bytes: over the 256-byte size class", size)
	}
}

// TestObserveIgnoresRedelivery observes random sessions (every event
// kind, repeated item ids, marks, applications) with earlier events of
// every kind observed again along the way: the session's event-id index
// refers to where each id is kept, and a redelivered event must be
// ignored whichever list keeps its id. Every rendering (or its error),
// the items and the decisions match the plain feed.
func TestObserveIgnoresRedelivery(t *testing.T) {
	for seed := range 8 {
		blobs := store.NewMemBlobs()
		evs := randomSession(t, uint64(seed), 120, blobs)
		plain := NewSession("", "rand")
		again := NewSession("", "rand")
		for i, e := range evs {
			plain.Observe(e)
			again.Observe(e)
			again.Observe(evs[(i*7+seed)%(i+1)])
		}
		for name, r := range renderers {
			want := renderOrErr(r, plain.Bundle(), blobs, &wordCounter{})
			got := renderOrErr(r, again.Bundle(), blobs, &wordCounter{})
			testutil.True(t, got == want, "seed %d: redelivery changed %s", seed, name)
		}
		testutil.True(t, reflect.DeepEqual(plain.Items(), again.Items()), "seed %d: redelivery changed the items", seed)
		testutil.True(t, reflect.DeepEqual(plain.Decisions(), again.Decisions()), "seed %d: redelivery changed the decisions", seed)
		testutil.True(t, plain.pos == again.pos && plain.seen.len() == again.seen.len(), "seed %d: %d/%d events observed, %d/%d ids", seed, again.pos, plain.pos, again.seen.len(), plain.seen.len())
	}
}

// TestItemViewFields: an item state holds every field of Item but for
// the three a view computes, with the same type, and itemView copies
// each (set to a distinct non-zero value here).
func TestItemViewFields(t *testing.T) {
	computed := map[string]bool{"Pruned": true, "Applied": true, "LatestMark": true}
	var it itemState
	st := reflect.ValueOf(&it).Elem()
	view := reflect.TypeFor[Item]()
	for i := range view.NumField() {
		f := view.Field(i)
		if computed[f.Name] {
			continue
		}
		sf, ok := st.Type().FieldByName(f.Name)
		testutil.True(t, ok && sf.Type == f.Type, "itemState lacks Item.%s (%s)", f.Name, f.Type)
		v := st.FieldByIndex(sf.Index)
		switch v.Kind() {
		case reflect.String:
			v.SetString("v" + f.Name)
		case reflect.Int:
			v.SetInt(int64(i + 1))
		case reflect.Bool:
			v.SetBool(true)
		default:
			t.Fatalf("Item.%s: kind %s not covered", f.Name, v.Kind())
		}
	}
	got := reflect.ValueOf(NewSession("", "s").itemView(&it, nil))
	for i := range view.NumField() {
		f := view.Field(i)
		if computed[f.Name] {
			continue
		}
		testutil.True(t, got.Field(i).Equal(st.FieldByName(f.Name)), "itemView does not copy Item.%s", f.Name)
	}
}
