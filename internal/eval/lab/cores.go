package lab

import (
	"context"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/internal/decide"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/scheduler"
)

// runProduction runs the production cores over one session's facts the way
// the pipeline's workers do (decide.Run) and returns the marks and the
// applications in log order. blobs, when set, gives the eligibility core
// the stored outputs, as the pipeline's worker does (span references
// compare their lines).
func runProduction(p policy.Policy, facts []events.Event, blobs *store.MemBlobs) (marks, apps []events.Event) {
	var content func(string) ([]byte, error)
	if blobs != nil {
		content = func(h string) ([]byte, error) { return blobs.GetBlob(context.Background(), h) }
	}
	return decide.Run(p, facts, content)
}

// replay applies a set of marks under a strategy with the production
// scheduler (scheduler.Simulate) and returns the applications it made, for
// rendering, and its ledger.
func replay(p policy.Policy, facts, marks []events.Event, strategy string) ([]events.Event, scheduler.Ledger) {
	all := make([]events.Event, 0, len(facts)+len(marks))
	all = append(append(all, facts...), marks...)
	ledger := scheduler.Simulate(p, all, strategy)
	return ledger.ApplicationEvents, ledger
}
