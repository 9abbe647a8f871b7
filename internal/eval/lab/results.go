package lab

import (
	"math"

	"github.com/prunesched/prunesched/scheduler"
)

// Results is the whole experiment, as written to results.json.
type Results struct {
	Experiment string         `json:"experiment"`
	Seed       uint64         `json:"seed"`
	Tokenizer  string         `json:"tokenizer"`
	Note       string         `json:"note"`
	Fixture    FixtureSummary `json:"fixture"`
	// Conditions are A-F, D+L3 (the opt-in L3 rung) and the peers.
	Conditions []ConditionResult `json:"conditions"`
	// Falsification states the spec's falsification clauses against the
	// numbers above.
	Falsification []Clause `json:"falsification"`
}

// FixtureSummary describes the generated sessions.
type FixtureSummary struct {
	Sessions  int `json:"sessions"`
	ToolCalls int `json:"tool_calls"`
	Requests  int `json:"requests"`
	IdleGaps  int `json:"idle_gaps"`
	Items     int `json:"items"`
	Probes    int `json:"probes"`
	// RawTokens is the sum over sessions of every item's stored tokens.
	RawTokens    int            `json:"raw_tokens"`
	ItemsByClass map[string]int `json:"items_by_class"`
	// SafeByRung counts safe items worth removing (more tokens than a
	// placeholder) by the lowest rung that proves them; SafeTokens their
	// tokens.
	SafeByRung map[string]int `json:"safe_by_rung"`
	SafeTokens int            `json:"safe_tokens"`
}

// ConditionResult is one row, in four metric groups.
type ConditionResult struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	Description string `json:"description"`
	// Timing is the strategy the row's own timing uses (none, scheduled,
	// immediate); reduction, preservation and behaviour are measured under
	// it, economics under both.
	Timing       string       `json:"timing"`
	Reduction    Reduction    `json:"reduction"`
	Preservation Preservation `json:"preservation"`
	Behaviour    Behaviour    `json:"behaviour"`
	Economics    Economics    `json:"economics"`
	// AgentRequests are the agent's removal requests and their verdicts
	// (condition G); absent when the agent asked nothing.
	AgentRequests *AgentRequests `json:"agent_requests,omitempty"`
	// LaterUse validates the later-use signal (a proxy for a false prune on
	// real sessions, package lateruse) against this row's labels.
	LaterUse LaterUse `json:"later_use"`
}

// LaterUse scores the later-use signal against the fixture labels, over
// the items removed under the row's own timing: a positive is a removed
// item labelled needed or trap (a false prune), a negative one labelled
// safe; the signal predicts a positive when the item is later-used.
// Later-used items labelled keep (no label proves them needed or safe)
// are Undetermined and left out of precision. Precision is 1 and Recall 1
// when there is nothing to find or nothing flagged.
type LaterUse struct {
	Removed        int     `json:"removed"`
	LaterUsed      int     `json:"later_used"`
	TruePositives  int     `json:"true_positives"`
	FalsePositives int     `json:"false_positives"`
	FalseNegatives int     `json:"false_negatives"`
	Undetermined   int     `json:"undetermined"`
	Precision      float64 `json:"precision"`
	Recall         float64 `json:"recall"`
}

// AgentRequests are the removal requests the agent made
// (events.PruneRequest by events.ByAgent: the context_prune tool) and what
// eligibility answered, judging each with every protection: Accepted are
// PRUNE AGENT_REQUEST (applied by the scheduler at a cache-safe point),
// Refused a KEEP or other verdict, counted by its reason (the protection
// in force, e.g. RECENT_TURN).
type AgentRequests struct {
	Asked    int            `json:"asked"`
	Accepted int            `json:"accepted"`
	Refused  map[string]int `json:"refused"`
}

// Count is items and their stored tokens.
type Count struct {
	Items  int `json:"items"`
	Tokens int `json:"tokens"`
}

// Reduction: what left the rendered context.
type Reduction struct {
	// TokensRemoved is the stored tokens of the payloads replaced in the
	// final bundle; PlaceholderTokens the placeholders that replaced them;
	// NetTokensRemoved the difference.
	TokensRemoved     int     `json:"tokens_removed"`
	PlaceholderTokens int     `json:"placeholder_tokens"`
	NetTokensRemoved  int     `json:"net_tokens_removed"`
	NetPercentOfRaw   float64 `json:"net_percent_of_raw"`
	ItemsRemoved      int     `json:"items_removed"`
	// OccupancyReduction is the request-weighted saving: 1 - (prompt
	// tokens summed over every request) / (the same under A), in percent.
	OccupancyReduction float64 `json:"occupancy_reduction_percent"`
	// TokensMarked is the stored tokens of every item decided PRUNE
	// (applied or still pending at the end).
	TokensMarked int              `json:"tokens_marked"`
	ByClass      map[string]Count `json:"by_class"`
	ByCategory   map[string]Count `json:"by_category"`
	ByReason     map[string]Count `json:"by_reason"`
	// ModelTokens is the model tokens the policy itself consumed to decide
	// (0: every condition here is rule-based); its other overhead is the
	// placeholder tokens.
	ModelTokens int `json:"model_tokens"`
}

// Preservation: what should have stayed, did.
type Preservation struct {
	// Prunes are the items decided PRUNE (applied at some point, or the
	// latest mark at the end); SafePrunes those the fixture labels safe,
	// FalsePrunes those it labels needed or trap (TrapsPruned the traps),
	// UnprovenPrunes those it labels keep (nothing proves them removable,
	// no probe needs them).
	Prunes         int     `json:"prunes"`
	SafePrunes     int     `json:"safe_prunes"`
	FalsePrunes    int     `json:"false_prunes"`
	FalsePruneRate float64 `json:"false_prune_rate"`
	TrapsPruned    int     `json:"traps_pruned"`
	UnprovenPrunes int     `json:"unproven_prunes"`
	// Precision is safe prunes over prunes (1 when nothing is pruned);
	// Recall safe prunes worth a placeholder over the oracle's (F's) set.
	Precision float64 `json:"precision"`
	Recall    float64 `json:"recall"`
	// CriticalIntact of CriticalItems (needed and trap items) were never
	// decided PRUNE.
	CriticalItems  int `json:"critical_items"`
	CriticalIntact int `json:"critical_intact"`
	// RecoverableOK of RecoverableRefs placeholders in the final bundle name
	// an original that the log holds.
	RecoverableRefs int `json:"recoverable_refs"`
	RecoverableOK   int `json:"recoverable_ok"`
	// FalsePrunesUnrecoverable are the false prunes one recovery cannot
	// undo (context_recover #N gets every other one back byte for byte):
	// all of a peer's, whose own placeholder names no original, and those
	// rendered as a placeholder that does not name their handle. The false
	// prunes with recovery; FalsePrunes are those without.
	FalsePrunesUnrecoverable int `json:"false_prunes_unrecoverable"`
	// FalsePruneExamples lists up to 12 false prunes (session, item,
	// fixture category).
	FalsePruneExamples []string `json:"false_prune_examples,omitempty"`
}

// Behaviour: probe outcomes. Evidence presence, not model success.
type Behaviour struct {
	Probes        int     `json:"probes"`
	Passed        int     `json:"passed"`
	ProbePassRate float64 `json:"probe_pass_rate"`
	// RecoveredViaPlaceholder counts probes whose evidence was absent but
	// whose holder is a placeholder naming how to recover it; Lost those
	// with neither.
	RecoveredViaPlaceholder int                  `json:"recovered_via_placeholder"`
	Lost                    int                  `json:"lost"`
	ByKind                  map[string]KindCount `json:"by_kind"`
	// AnsweredWithRecovery counts the probes answered when the model may
	// recover a removed item once (context_recover): the passed ones and
	// those recovered via a placeholder; AnswerRateWithRecovery is their
	// share. Recoveries is the items fetched back (one per item: a
	// recovered item stays in context to the end of the session), at the
	// first probe that needs each; RecoveryRequests the extra model
	// requests that fetched them.
	AnsweredWithRecovery   int     `json:"answered_with_recovery"`
	AnswerRateWithRecovery float64 `json:"answer_rate_with_recovery"`
	Recoveries             int     `json:"recoveries"`
	RecoveryRequests       int     `json:"recovery_requests"`
	// RecoveryTokens and RecoveryCost are what the recoveries add under
	// the row's own timing and Anthropic prices, priced by the scheduler's
	// cache model as analyze --compare prices them
	// (scheduler.PriceRecoveries, scheduler.RecoveryAnswerTokens output
	// tokens per recovery call): the extra requests' prompts and the item
	// carried by every later request; the cost includes the calls' output.
	RecoveryTokens int     `json:"recovery_tokens"`
	RecoveryCost   float64 `json:"recovery_cost"`
	// ByStrategy gives the pass rate under each strategy the row ran.
	ByStrategy map[string]float64 `json:"by_strategy"`
}

// KindCount is the outcome of the probes of one kind.
type KindCount struct {
	Probes      int `json:"probes"`
	Passed      int `json:"passed"`
	Recoverable int `json:"recoverable"`
}

// Economics: prompt-cache cost of every request, priced by the production
// cache model.
type Economics struct {
	// Cost is the prompt cost (USD) under Anthropic prices and the row's own
	// timing; CostChange its change against A in percent.
	Cost       float64 `json:"cost"`
	CostChange float64 `json:"cost_change_percent"`
	// CostWithRecoveries is Cost plus the recoveries' cost
	// (Behaviour.RecoveryCost); CostWithRecoveriesChange its change
	// against A in percent.
	CostWithRecoveries       float64   `json:"cost_with_recoveries"`
	CostWithRecoveriesChange float64   `json:"cost_with_recoveries_change_percent"`
	Runs                     []EconRun `json:"runs"`
	// Recovery is what the recoveries add under the row's own timing, per
	// provider; absent when nothing is recovered.
	Recovery map[string]scheduler.RecoveryCost `json:"recovery,omitempty"`
}

// EconRun is one provider and strategy.
type EconRun struct {
	Provider   string  `json:"provider"`
	Strategy   string  `json:"strategy"`
	Prompt     int     `json:"prompt_tokens"`
	CacheRead  int     `json:"cache_read_tokens"`
	CacheWrite int     `json:"cache_write_tokens"`
	Uncached   int     `json:"uncached_tokens"`
	Cost       float64 `json:"cost"`
	CostChange float64 `json:"cost_change_percent"`
	// Applications is how many applications the strategy made;
	// MeanFirstDivergence their mean first-divergence offset (tokens) and
	// MutationRadius the sum of their mutation radii (cached tokens
	// invalidated).
	Applications        int     `json:"applications"`
	MeanFirstDivergence float64 `json:"mean_first_divergence"`
	MutationRadius      int     `json:"mutation_radius"`
	TokensRemoved       int     `json:"tokens_removed_applied"`
	// ByTrigger breaks the applications down by the scheduler trigger
	// that released them.
	ByTrigger map[string]TriggerStat `json:"by_trigger,omitempty"`
}

// TriggerStat is the applications one trigger released.
type TriggerStat struct {
	Applications   int `json:"applications"`
	MutationRadius int `json:"mutation_radius"`
	TokensRemoved  int `json:"tokens_removed"`
	// CacheCost and ExpectedSaving are the scheduler's own estimates at
	// decision time (USD).
	CacheCost      float64 `json:"cache_cost"`
	ExpectedSaving float64 `json:"expected_saving"`
}

// Clause is one falsification clause of the spec, checked.
type Clause struct {
	ID        string `json:"id"`
	Statement string `json:"statement"`
	Holds     bool   `json:"holds"`
	Evidence  string `json:"evidence"`
}

// round keeps six decimals, so the JSON stays readable.
func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return round(float64(a) / float64(b))
}

func pctChange(x, base float64) float64 {
	if base == 0 {
		return 0
	}
	return round(100 * (x - base) / base)
}
