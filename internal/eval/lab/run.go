package lab

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sort"
	"sync"

	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/eval/lab/fixtures"
	"github.com/prunesched/prunesched/internal/eval/lab/peers"
	"github.com/prunesched/prunesched/scheduler"
)

// Config configures a lab run. The zero value runs the default experiment
// (seed 0, 12 sessions).
type Config struct {
	Seed     uint64
	Sessions int
	// MinCalls and MaxCalls bound each session's filler tool calls (see
	// fixtures.Config); 0 means the default.
	MinCalls, MaxCalls int
	// Progress, when set, receives one line per step.
	Progress io.Writer
	// Workers bounds the sessions evaluated at once; 0 means GOMAXPROCS.
	// Results do not depend on it.
	Workers int
}

// Run generates the fixture and runs every condition on it.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	tc := tokens.New()
	if err := tc.Check(); err != nil {
		return nil, err
	}
	fc := fixtures.Config{Seed: cfg.Seed, Sessions: cfg.Sessions, MinCalls: cfg.MinCalls, MaxCalls: cfg.MaxCalls}
	if err := fc.Validate(); err != nil {
		return nil, err
	}
	progress(cfg.Progress, "lab: generating %d sessions (seed %d)", fc.Sessions, cfg.Seed)
	fx, err := fixtures.Generate(fc, tc)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	conds, err := conditions()
	if err != nil {
		return nil, err
	}
	runs := make([][]*sessionRun, len(fx.Sessions)) // session -> condition
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	done := 0
	for i, s := range fx.Sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out := make([]*sessionRun, len(conds))
			for k, c := range conds {
				if err := ctx.Err(); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				r, err := evaluate(ctx, c, fx, s, tc)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				out[k] = r
			}
			mu.Lock()
			runs[i] = out
			done++
			progress(cfg.Progress, "lab: session %s done (%d/%d): %d tool calls, %d requests, %d probes, %d conditions",
				s.ID, done, len(fx.Sessions), s.ToolCalls, s.Requests, len(s.Probes), len(conds))
			mu.Unlock()
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, fmt.Errorf("lab: %w", firstErr)
	}
	res := &Results{
		Experiment: "prunesched context lab",
		Seed:       cfg.Seed,
		Tokenizer:  tokens.Name,
		Note:       "behaviour is evidence presence (the probe's evidence verbatim in the rendered bundle), not model success",
		Fixture:    summarize(fx),
	}
	for k, c := range conds {
		per := make([]*sessionRun, len(fx.Sessions))
		for i := range fx.Sessions {
			per[i] = runs[i][k]
		}
		res.Conditions = append(res.Conditions, aggregate(c, per))
	}
	finishEconomics(res)
	res.Falsification = clauses(res)
	progress(cfg.Progress, "lab: %d conditions on %d sessions done", len(conds), len(fx.Sessions))
	return res, nil
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

func summarize(fx *fixtures.Fixture) FixtureSummary {
	fs := FixtureSummary{Sessions: len(fx.Sessions), ItemsByClass: map[string]int{}, SafeByRung: map[string]int{}}
	for _, s := range fx.Sessions {
		fs.ToolCalls += s.ToolCalls
		fs.Requests += s.Requests
		fs.IdleGaps += s.IdleGaps
		fs.Probes += len(s.Probes)
		for _, l := range s.Labels {
			fs.Items++
			fs.RawTokens += l.Tokens
			fs.ItemsByClass[string(l.Class)]++
			if l.Class == fixtures.Safe && l.Tokens > peers.PlaceholderTokens {
				fs.SafeByRung[l.Rung]++
				fs.SafeTokens += l.Tokens
			}
		}
	}
	return fs
}

// aggregate sums one condition's session runs in session order.
func aggregate(c condition, per []*sessionRun) ConditionResult {
	cr := ConditionResult{Name: c.name, Kind: c.kind, Description: c.desc, Timing: c.primary}
	red := &cr.Reduction
	red.ByClass, red.ByCategory, red.ByReason = map[string]Count{}, map[string]Count{}, map[string]Count{}
	var pres presCounts
	var lu luCounts
	beh := map[string]behCounts{}
	var recovery map[string]scheduler.RecoveryCost
	var agent *AgentRequests
	for _, r := range per {
		if r.agent.asked > 0 {
			if agent == nil {
				agent = &AgentRequests{Refused: map[string]int{}}
			}
			agent.Asked += r.agent.asked
			agent.Accepted += r.agent.accepted
			for k, v := range r.agent.refused {
				agent.Refused[k] += v
			}
		}
		lu.removed += r.lu.removed
		lu.laterUsed += r.lu.laterUsed
		lu.tp += r.lu.tp
		lu.fp += r.lu.fp
		lu.fn += r.lu.fn
		lu.undetermined += r.lu.undetermined
		red.TokensRemoved += r.red.removed
		red.PlaceholderTokens += r.red.placeholder
		red.ItemsRemoved += r.red.items
		red.TokensMarked += r.red.marked
		addCounts(red.ByClass, r.red.byClass)
		addCounts(red.ByCategory, r.red.byCategory)
		addCounts(red.ByReason, r.red.byReason)
		p := r.pres
		pres.prunes += p.prunes
		pres.safe += p.safe
		pres.falsePr += p.falsePr
		pres.unproven += p.unproven
		pres.traps += p.traps
		pres.falseUnrecoverable += p.falseUnrecoverable
		pres.safeWorth += p.safeWorth
		pres.safePruned += p.safePruned
		pres.critical += p.critical
		pres.criticalIntact += p.criticalIntact
		pres.refs += p.refs
		pres.refsOK += p.refsOK
		pres.falseItems = append(pres.falseItems, p.falseItems...)
		for prov, rc := range r.recovery {
			if recovery == nil {
				recovery = map[string]scheduler.RecoveryCost{}
			}
			recovery[prov] = addRecovery(recovery[prov], rc)
		}
		for st, b := range r.beh {
			a := beh[st]
			if a.byKind == nil {
				a.byKind = map[string][3]int{}
			}
			a.probes += b.probes
			a.passed += b.passed
			a.recoverable += b.recoverable
			for k, v := range b.byKind {
				x := a.byKind[k]
				x[0], x[1], x[2] = x[0]+v[0], x[1]+v[1], x[2]+v[2]
				a.byKind[k] = x
			}
			beh[st] = a
		}
	}
	red.NetTokensRemoved = red.TokensRemoved - red.PlaceholderTokens
	cr.Preservation = Preservation{
		Prunes: pres.prunes, SafePrunes: pres.safe, FalsePrunes: pres.falsePr, TrapsPruned: pres.traps,
		UnprovenPrunes: pres.unproven, FalsePruneRate: ratio(pres.falsePr, pres.prunes), FalsePrunesUnrecoverable: pres.falseUnrecoverable,
		Precision: 1, Recall: ratio(pres.safePruned, pres.safeWorth),
		CriticalItems: pres.critical, CriticalIntact: pres.criticalIntact,
		RecoverableRefs: pres.refs, RecoverableOK: pres.refsOK,
	}
	if pres.prunes > 0 {
		cr.Preservation.Precision = ratio(pres.safe, pres.prunes)
	}
	if len(pres.falseItems) > 12 {
		pres.falseItems = pres.falseItems[:12]
	}
	cr.Preservation.FalsePruneExamples = pres.falseItems
	cr.LaterUse = LaterUse{Removed: lu.removed, LaterUsed: lu.laterUsed, TruePositives: lu.tp,
		FalsePositives: lu.fp, FalseNegatives: lu.fn, Undetermined: lu.undetermined, Precision: 1, Recall: 1}
	if lu.tp+lu.fp > 0 {
		cr.LaterUse.Precision = ratio(lu.tp, lu.tp+lu.fp)
	}
	if lu.tp+lu.fn > 0 {
		cr.LaterUse.Recall = ratio(lu.tp, lu.tp+lu.fn)
	}
	b := beh[c.primary]
	cr.Behaviour = Behaviour{
		Probes: b.probes, Passed: b.passed, ProbePassRate: ratio(b.passed, b.probes),
		RecoveredViaPlaceholder: b.recoverable, Lost: b.probes - b.passed - b.recoverable,
		ByKind: map[string]KindCount{}, ByStrategy: map[string]float64{},
		AnsweredWithRecovery: b.passed + b.recoverable, AnswerRateWithRecovery: ratio(b.passed+b.recoverable, b.probes),
	}
	for prov, rc := range recovery {
		rc.PromptCost, rc.OutputCost, rc.Cost = round(rc.PromptCost), round(rc.OutputCost), round(rc.Cost)
		recovery[prov] = rc
	}
	cr.Economics.Recovery = recovery
	cr.AgentRequests = agent
	if rc, ok := recovery["anthropic"]; ok {
		cr.Behaviour.Recoveries, cr.Behaviour.RecoveryRequests = rc.Recoveries, rc.Requests
		cr.Behaviour.RecoveryTokens, cr.Behaviour.RecoveryCost = rc.Tokens, rc.Cost
	}
	for k, v := range b.byKind {
		cr.Behaviour.ByKind[k] = KindCount{Probes: v[0], Passed: v[1], Recoverable: v[2]}
	}
	for st, x := range beh {
		cr.Behaviour.ByStrategy[st] = ratio(x.passed, x.probes)
	}
	for _, prov := range providers {
		for _, st := range strategiesOf(c) {
			e := EconRun{Provider: prov, Strategy: st, ByTrigger: map[string]TriggerStat{}}
			fd, apps := 0, 0
			for _, r := range per {
				l := r.ledgers[prov][st]
				e.Prompt += l.Total.Tokens
				e.CacheRead += l.Total.CacheRead
				e.CacheWrite += l.Total.CacheWrite
				e.Uncached += l.Total.Uncached
				e.Cost += l.Total.Cost
				for _, a := range l.Applications {
					apps++
					fd += a.FirstDivergence
					e.MutationRadius += a.MutationRadius
					e.TokensRemoved += a.TokensRemoved
					ts := e.ByTrigger[string(a.Trigger)]
					ts.Applications++
					ts.MutationRadius += a.MutationRadius
					ts.TokensRemoved += a.TokensRemoved
					ts.CacheCost += a.CacheCost
					ts.ExpectedSaving += a.ExpectedSaving
					e.ByTrigger[string(a.Trigger)] = ts
				}
			}
			e.Applications = apps
			if apps > 0 {
				e.MeanFirstDivergence = round(float64(fd) / float64(apps))
			}
			e.Cost = round(e.Cost)
			for k, ts := range e.ByTrigger {
				ts.CacheCost, ts.ExpectedSaving = round(ts.CacheCost), round(ts.ExpectedSaving)
				e.ByTrigger[k] = ts
			}
			cr.Economics.Runs = append(cr.Economics.Runs, e)
			if prov == "anthropic" && st == c.primary {
				cr.Economics.Cost = e.Cost
				cr.Economics.CostWithRecoveries = round(e.Cost + cr.Behaviour.RecoveryCost)
			}
		}
	}
	return cr
}

// addRecovery sums two sessions' recovery costs.
func addRecovery(a, b scheduler.RecoveryCost) scheduler.RecoveryCost {
	a.Recoveries += b.Recoveries
	a.Requests += b.Requests
	a.Tokens += b.Tokens
	a.Output += b.Output
	a.PromptCost += b.PromptCost
	a.OutputCost += b.OutputCost
	a.Cost += b.Cost
	return a
}

func addCounts(dst map[string]Count, src map[string]count) {
	keys := make([]string, 0, len(src))
	for k := range src {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d := dst[k]
		d.Items += src[k].Items
		d.Tokens += src[k].Tokens
		dst[k] = d
	}
}

// finishEconomics fills the changes against A: cost per provider and
// occupancy (prompt tokens summed over requests).
func finishEconomics(res *Results) {
	var a *ConditionResult
	for i := range res.Conditions {
		if res.Conditions[i].Name == CondA {
			a = &res.Conditions[i]
		}
	}
	if a == nil {
		return
	}
	base := map[string]EconRun{}
	for _, e := range a.Economics.Runs {
		base[e.Provider] = e
	}
	raw := res.Fixture.RawTokens
	for i := range res.Conditions {
		c := &res.Conditions[i]
		for k := range c.Economics.Runs {
			e := &c.Economics.Runs[k]
			e.CostChange = pctChange(e.Cost, base[e.Provider].Cost)
			if e.Provider == "anthropic" && e.Strategy == c.Timing {
				c.Economics.CostChange = e.CostChange
				c.Economics.CostWithRecoveriesChange = pctChange(c.Economics.CostWithRecoveries, base[e.Provider].Cost)
				c.Reduction.OccupancyReduction = 0 - pctChange(float64(e.Prompt), float64(base[e.Provider].Prompt))
				if c.Reduction.OccupancyReduction == 0 {
					c.Reduction.OccupancyReduction = 0 // no "-0"
				}
			}
		}
		c.Reduction.NetPercentOfRaw = round(100 * float64(c.Reduction.NetTokensRemoved) / float64(max(1, raw)))
	}
}
