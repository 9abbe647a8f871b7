package analyze

import (
	"context"
	"fmt"

	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/scheduler"
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

// economics reads the session's whole log (facts, marks and
// applications) and shapes its economics view (scheduler.NewView: the
// strategies priced by the scheduler's own cache model, the applications
// the pipeline published, in log order, and the calibration of the cache
// model against the provider's reports) for the report.
func economics(ctx context.Context, svc *service.Service, pol policy.Policy, tenant, session string) (*Economics, []scheduler.AppSummary, *scheduler.Calibration, error) {
	evs, err := svc.Store.ReadSession(ctx, tenant, session)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read session %s: %w", session, err)
	}
	v := scheduler.NewView(pol, evs, scheduler.StrategyNone, scheduler.StrategyImmediate, scheduler.StrategyScheduled, scheduler.StrategyHindsight)
	ledgers := v.Ledgers
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
	return eco, v.Applications, v.Calibration, nil
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
