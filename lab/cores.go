package lab

import (
	"context"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/lab/fixtures"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/scheduler"
)

// runProduction runs the production cores over one session's facts the way
// the pipeline's workers do: every fact goes to the eligibility core, whose
// marks go to the scheduler core; at each model request the scheduler
// decides (Decide at the request's fact index, before it observes the
// request) and its application is fed back. It returns the marks and the
// applications in log order. blobs, when set, gives the eligibility core
// the stored outputs, as the pipeline's worker does (span references
// compare their lines).
func runProduction(p policy.Policy, facts []events.Event, blobs *fixtures.Blobs) (marks, apps []events.Event) {
	tenant, session := facts[0].Tenant, facts[0].Session
	ec := eligibility.New(p, tenant, session)
	if blobs != nil {
		ec.SetContent(func(h string) ([]byte, error) { return blobs.GetBlob(context.Background(), h) })
	}
	sc := scheduler.New(p, tenant, session)
	for i, ev := range facts {
		if r, ok := ev.Data.(*events.ModelRequest); ok {
			if app := sc.Decide(ev.Time, r.Request, i); app != nil {
				apps = append(apps, *app)
			}
		}
		out := ec.Observe(ev)
		sc.Observe(ev)
		for _, m := range out {
			sc.Observe(m)
		}
		marks = append(marks, out...)
	}
	return marks, apps
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
