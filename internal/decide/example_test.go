package decide_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/decide"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
)

// ExampleRun runs both cores over the shipped sample session without NATS
// (what the lab and analyze --compare do): the eligibility core's marks and
// the timing scheduler's applications, decided at each model request. The
// projection then rebuilds the bundle from the merged log, and the text
// rendering shows the placeholders that replaced the pruned outputs.
func ExampleRun() {
	ctx := context.Background()
	sessions, err := importers.Import("../../examples/sample-session.jsonl", "native")
	if err != nil {
		fmt.Println(err)
		return
	}
	blobs, tc := store.NewMemBlobs(), tokens.New() // an in-memory blob store stands in for the log's
	var facts []events.Event
	for _, ev := range sessions[0].Events {
		fact, err := events.Prepare(ctx, ev, blobs, tc) // outputs into the blob store, tokens counted
		if err != nil {
			fmt.Println(err)
			return
		}
		facts = append(facts, fact)
	}
	content := func(h string) ([]byte, error) { return blobs.GetBlob(ctx, h) }
	marks, apps := decide.Run(policy.Default(), facts, content)
	fmt.Println(len(facts), "facts,", len(marks), "marks,", len(apps), "applications")

	sess := projections.NewSession(events.DefaultTenant, "sample")
	for _, ev := range events.MergeLog(facts, marks, apps) {
		sess.Observe(ev)
	}
	text, err := sess.Snapshot().RenderText(ctx, blobs, tc)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, "[prunesched:") {
			fmt.Println(line)
		}
	}
	// Output:
	// 28 facts, 5 marks, 3 applications
	// [prunesched: output of Read config/config.go removed: L2 SUPERSEDED, 195 tokens, newer #13, context_recover #4]
	// [prunesched: output of Read config/config.go removed: L0 DUPLICATE_OUTPUT, 194 tokens, copy #4 (since removed: L2 SUPERSEDED, see #13), context_recover #9]
	// [prunesched: output of Read config/config.go removed: L0 DUPLICATE_OUTPUT, 221 tokens, copy #13, context_recover #17]
}
