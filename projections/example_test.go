package projections_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/projections"
)

// ExampleSession rebuilds a session's projection from its log: the
// shipped sample's facts, then a manual PRUNE mark and the application
// that applies it (what `prunesched prune` records). The projection's
// decisions say what was applied and by which rule, and the Anthropic
// rendering carries the placeholder, not the output.
func ExampleSession() {
	ctx := context.Background()
	sessions, err := importers.Import("../examples/sample-session.jsonl", "native")
	if err != nil {
		fmt.Println(err)
		return
	}
	blobs, tc := store.NewMemBlobs(), tokens.New() // an in-memory blob store stands in for the log's
	sess := projections.NewSession(events.DefaultTenant, "sample")
	var last time.Time
	for _, ev := range sessions[0].Events {
		fact, err := events.Prepare(ctx, ev, blobs, tc)
		if err != nil {
			fmt.Println(err)
			return
		}
		sess.Observe(fact)
		last = fact.Time
	}
	before, _ := sess.Snapshot().RenderAnthropic(ctx, blobs, tc)
	sess.Observe(events.Event{V: 1, ID: "m1", Type: events.TypeMark, Session: "sample", Time: last,
		Data: &events.Mark{Item: "t5", Decision: events.Prune, Reason: events.ReasonManualPrune, Part: "output"}})
	sess.Observe(events.Event{V: 1, ID: "a1", Type: events.TypeApplication, Session: "sample", Time: last,
		Data: &events.Application{Request: "manual", Marks: []string{"m1"}, Items: []string{"t5"}, Trigger: events.TriggerManual}})
	after, _ := sess.Snapshot().RenderAnthropic(ctx, blobs, tc)
	for _, d := range sess.Decisions() {
		fmt.Println(d.Item, d.Decision, d.Reason, "applied:", d.Applied, d.Trigger)
	}
	fmt.Println("rendered bytes shrink:", len(after) < len(before))
	// Output:
	// t5 PRUNE MANUAL_PRUNE applied: true manual_flush
	// rendered bytes shrink: true
}
