package analyze

import (
	"context"
	"fmt"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/scheduler"
	"github.com/prunesched/prunesched/service"
)

// Economics compares, on one session, the prompt cost and tokens sent
// under four strategies: no pruning, applying every eligible mark at the
// next request (as DCP does), the timing scheduler's decisions, and the
// same marks at the best requests known only afterwards (hindsight). Costs
// are USD, prompt side only (cache reads, cache writes and uncached input);
// output is the same under every strategy.
type Economics struct {
	Provider string `json:"provider"`
	Model    string `json:"model,omitempty"`
	// Unpriced is true when the session's model is in no price table: the
	// costs are then 0 and the summary shows "unpriced", never another
	// provider's rates. Tokens are still counted.
	Unpriced  bool    `json:"unpriced,omitempty"`
	None      float64 `json:"none"`
	Immediate float64 `json:"immediate"`
	Scheduled float64 `json:"scheduled"`
	// Hindsight is the cost of the same marks applied at the best requests
	// known only afterwards (scheduler.StrategyHindsight): how far the
	// scheduler is from the best it could have done.
	Hindsight  float64        `json:"hindsight"`
	TokensSent map[string]int `json:"tokens_sent"`
	// CacheRead, CacheWrite and Uncached are the token totals per strategy.
	CacheRead  map[string]int `json:"cache_read"`
	CacheWrite map[string]int `json:"cache_write"`
	Uncached   map[string]int `json:"uncached"`
	// Ratio is, per pruning strategy, the cost reduction over the token
	// reduction against "none" (0 when nothing was removed): 1 means every
	// token removed saved its full share of cost; below 1 the cache breaks
	// ate part of the saving; above 1 pruning also kept the cache warmer.
	Ratio map[string]float64 `json:"ratio"`
	// Head is the context the log does not hold (system prompt, tool
	// definitions), estimated from usage reports and assumed unchanged
	// before every bundle under every strategy.
	Head int `json:"head"`
	// Requests is the per-request ledger under each strategy: tokens sent,
	// cache read, cache write, uncached, and their costs.
	Requests map[string][]scheduler.RequestCost `json:"requests"`
}

// Application is one application as the report lists it.
type Application struct {
	Request         int            `json:"request"`
	RequestID       string         `json:"request_id"`
	Trigger         events.Trigger `json:"trigger"`
	Marks           int            `json:"marks"`
	FirstDivergence int            `json:"first_divergence"`
	MutationRadius  int            `json:"mutation_radius"`
	TokensRemoved   int            `json:"tokens_removed"`
	CacheCost       float64        `json:"cache_cost"`
	ExpectedSaving  float64        `json:"expected_saving"`
}

// economics reads the session's whole log (facts and marks) and prices it
// under the three strategies with the scheduler's own cache model. It also
// returns the applications the pipeline actually published, in log order,
// and the calibration of the cache model against the provider's reports.
func economics(ctx context.Context, svc *service.Service, pol policy.Policy, tenant, session string) (*Economics, []Application, *scheduler.Calibration, error) {
	evs, err := svc.Store.ReadSession(ctx, tenant, session)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read session %s: %w", session, err)
	}
	ledgers := scheduler.SimulateAll(pol, evs, scheduler.StrategyNone, scheduler.StrategyImmediate, scheduler.StrategyScheduled, scheduler.StrategyHindsight)
	none := ledgers[scheduler.StrategyNone]
	eco := &Economics{
		Provider: none.Provider, Model: none.Model, Unpriced: none.Unpriced, Head: none.Head,
		None: none.Total.Cost, Immediate: ledgers[scheduler.StrategyImmediate].Total.Cost, Scheduled: ledgers[scheduler.StrategyScheduled].Total.Cost,
		Hindsight:  ledgers[scheduler.StrategyHindsight].Total.Cost,
		TokensSent: map[string]int{}, CacheRead: map[string]int{}, CacheWrite: map[string]int{}, Uncached: map[string]int{}, Ratio: map[string]float64{},
		Requests: map[string][]scheduler.RequestCost{},
	}
	for s, l := range ledgers {
		eco.TokensSent[s] = l.Total.Tokens
		eco.CacheRead[s] = l.Total.CacheRead
		eco.CacheWrite[s] = l.Total.CacheWrite
		eco.Uncached[s] = l.Total.Uncached
		eco.Requests[s] = l.Requests
	}
	for _, s := range []string{scheduler.StrategyImmediate, scheduler.StrategyScheduled, scheduler.StrategyHindsight} {
		eco.Ratio[s] = ratio(none.Total, ledgers[s].Total)
	}
	// The applications in the log, with their request's position.
	reqIndex := map[string]int{}
	for _, e := range evs {
		if r, ok := e.Data.(*events.ModelRequest); ok {
			if _, dup := reqIndex[r.Request]; !dup {
				reqIndex[r.Request] = len(reqIndex)
			}
		}
	}
	apps := []Application{}
	for _, e := range evs {
		a, ok := e.Data.(*events.Application)
		if !ok {
			continue
		}
		idx, ok := reqIndex[a.Request]
		if !ok {
			idx = -1
		}
		apps = append(apps, Application{Request: idx, RequestID: a.Request, Trigger: a.Trigger, Marks: len(a.Marks),
			FirstDivergence: a.FirstDivergence, MutationRadius: a.MutationRadius, TokensRemoved: a.TokensRemoved,
			CacheCost: a.CacheCost, ExpectedSaving: a.ExpectedSaving})
	}
	var cal *scheduler.Calibration
	if c := scheduler.Calibrate(pol, evs); c.Reported > 0 {
		cal = &c
	}
	return eco, apps, cal, nil
}

// ratio is (cost reduction) / (token reduction) of x against base.
func ratio(base, x scheduler.RequestCost) float64 {
	if base.Tokens == 0 || base.Cost == 0 || x.Tokens >= base.Tokens {
		return 0
	}
	tokRed := float64(base.Tokens-x.Tokens) / float64(base.Tokens)
	costRed := (base.Cost - x.Cost) / base.Cost
	return costRed / tokRed
}
