package scheduler

import (
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

// ViewStrategies are the strategies the economics view prices unless told
// otherwise: no pruning, immediate application and the scheduler's.
// Hindsight is left to callers that ask for it: it replays the session up
// to hundreds of times.
var ViewStrategies = []string{StrategyNone, StrategyImmediate, StrategyScheduled}

// View is the economics view of one session: what the API's economics
// endpoint, the inspector and analyze's report show. It is built here,
// once, so that every reader prices a session the same way.
type View struct {
	// Ledgers prices the session under each strategy asked for (see
	// SimulateAll).
	Ledgers map[string]Ledger
	// Applications are the applications the log holds (the ones the
	// pipeline published), in log order; each Request is the position of
	// its request among the session's requests (-1 if it matches none).
	Applications []AppSummary
	// Calibration compares the cache model with the provider's reported
	// cache tokens (see Calibrate); nil when no request carries a usage
	// report.
	Calibration *Calibration
}

// NewView builds the economics view of one session's events (facts, marks
// and applications, in log order) under the policy p and strategies. The
// unpruned replay is made once, for the ledgers and the calibration.
func NewView(p policy.Policy, evs []events.Event, strategies ...string) View {
	none := replay(p, evs, StrategyNone)
	v := View{Ledgers: simulateFrom(p, evs, none, strategies), Applications: loggedApplications(evs)}
	l, ok := v.Ledgers[StrategyNone]
	if !ok {
		l = none.Economics()
	}
	if c := calibrate(none, l, evs); c.Reported > 0 {
		v.Calibration = &c
	}
	return v
}

// loggedApplications lists the applications in evs, in log order, with
// their request's position among the requests of evs.
func loggedApplications(evs []events.Event) []AppSummary {
	reqIndex := map[string]int{}
	for _, e := range evs {
		if r, ok := e.Data.(*events.ModelRequest); ok {
			if _, dup := reqIndex[r.Request]; !dup {
				reqIndex[r.Request] = len(reqIndex)
			}
		}
	}
	apps := []AppSummary{}
	for _, e := range evs {
		a, ok := e.Data.(*events.Application)
		if !ok {
			continue
		}
		idx, ok := reqIndex[a.Request]
		if !ok {
			idx = -1
		}
		apps = append(apps, appSummary(idx, a))
	}
	return apps
}
