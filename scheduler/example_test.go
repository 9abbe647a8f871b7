package scheduler_test

import (
	"context"
	"fmt"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/scheduler"
)

// ExampleCore_Feed drives the timing scheduler by hand, the way the
// scheduler worker does: every fact of the shipped sample goes to the
// timing scheduler's Feed, which at a model request decides what to apply
// (before the request is observed) and returns the application, with the
// trigger that allowed it at that point; then to the eligibility core,
// whose marks the scheduler observes (cores.Session.Feed is this loop).
func ExampleCore_Feed() {
	ctx := context.Background()
	sessions, err := importers.Import("../examples/sample-session.jsonl", "native")
	if err != nil {
		fmt.Println(err)
		return
	}
	blobs, tc := store.NewMemBlobs(), tokens.New() // an in-memory blob store stands in for the log's
	elig := eligibility.New(policy.Default(), events.DefaultTenant, "sample")
	elig.SetContent(func(h string) ([]byte, error) { return blobs.GetBlob(ctx, h) })
	sched := scheduler.New(policy.Default(), events.DefaultTenant, "sample")
	for _, ev := range sessions[0].Events {
		fact, err := events.Prepare(ctx, ev, blobs, tc)
		if err != nil {
			fmt.Println(err)
			return
		}
		if app := sched.Feed(fact); app != nil {
			a := app.Data.(*events.Application)
			fmt.Println(a.Request, a.Trigger, a.Items)
		}
		for _, m := range elig.Observe(fact) {
			sched.Observe(m)
		}
	}
	fmt.Println(len(sched.Pending()), "pending")
	// Output:
	// r4 never_sent [t3]
	// r6 cache_expired [t1]
	// r8 never_sent [t7]
	// 0 pending
}
