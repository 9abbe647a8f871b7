package analyze

import (
	"fmt"

	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// Savings adds up what pruning saved over sessions: prompt cost (USD) and
// tokens sent under no pruning, immediate application and the scheduler,
// from the economics ledgers (scheduler.SimulateAll) the report and the
// API's economics endpoint carry. It is the one definition of "saved" the
// CLI prints (analyze's headline, stats, sessions).
type Savings struct {
	// Sessions counts the sessions added; Unpriced those whose model is in
	// no price table (their tokens count, their cost does not).
	Sessions int `json:"sessions"`
	Unpriced int `json:"unpriced"`
	// Cost is USD per strategy ("none", "immediate", "scheduled") over the
	// priced sessions; Tokens the tokens sent per strategy over all.
	Cost   map[string]float64 `json:"cost"`
	Tokens map[string]int     `json:"tokens"`
	// Recoveries counts the items the model recovered with context_recover
	// (from the observed economics: the scheduled ledger), RecoveryTokens
	// their tokens summed over the requests that sent them and
	// RecoveryCost their share of the prompt cost (USD, priced sessions).
	Recoveries     int     `json:"recoveries,omitempty"`
	RecoveryTokens int     `json:"recovery_tokens,omitempty"`
	RecoveryCost   float64 `json:"recovery_cost,omitempty"`
}

// Strategies whose savings are reported, against StrategyNone.
var savingStrategies = []string{scheduler.StrategyNone, scheduler.StrategyImmediate, scheduler.StrategyScheduled}

// NewSavings returns empty savings.
func NewSavings() Savings {
	return Savings{Cost: map[string]float64{}, Tokens: map[string]int{}}
}

// AddLedgers adds one session's ledgers (strategy -> ledger).
func (s *Savings) AddLedgers(ls map[string]*scheduler.Ledger) {
	s.Sessions++
	unpriced := false
	for _, st := range savingStrategies {
		if l := ls[st]; l != nil {
			unpriced = unpriced || l.Unpriced
		}
	}
	if unpriced {
		s.Unpriced++
	}
	for _, st := range savingStrategies {
		l := ls[st]
		if l == nil {
			continue
		}
		s.Tokens[st] += l.Total.Tokens
		if !unpriced {
			s.Cost[st] += l.Total.Cost
		}
	}
	if l := ls[scheduler.StrategyScheduled]; l != nil {
		s.Recoveries += l.Total.Recoveries
		s.RecoveryTokens += l.Total.RecoveryTokens
		if !unpriced {
			s.RecoveryCost += l.Total.RecoveryCost
		}
	}
}

// AddEconomics adds one session of an analyze report.
func (s *Savings) AddEconomics(e *Economics) {
	if e == nil {
		return
	}
	ls := map[string]*scheduler.Ledger{}
	for _, st := range savingStrategies {
		ls[st] = &scheduler.Ledger{Unpriced: e.Unpriced, Total: scheduler.RequestCost{Tokens: e.TokensSent[st]}}
	}
	ls[scheduler.StrategyNone].Total.Cost = e.None
	ls[scheduler.StrategyImmediate].Total.Cost = e.Immediate
	ls[scheduler.StrategyScheduled].Total.Cost = e.Scheduled
	s.AddLedgers(ls)
}

// Merge adds o into s.
func (s *Savings) Merge(o Savings) {
	s.Sessions += o.Sessions
	s.Unpriced += o.Unpriced
	addCounts(s.Cost, o.Cost)
	addCounts(s.Tokens, o.Tokens)
	s.Recoveries += o.Recoveries
	s.RecoveryTokens += o.RecoveryTokens
	s.RecoveryCost += o.RecoveryCost
}

// SavedUSD is the cost strategy st saved against no pruning (negative: it
// cost more); SavedTokens the tokens it did not send.
func (s Savings) SavedUSD(st string) float64 { return s.Cost[scheduler.StrategyNone] - s.Cost[st] }

// SavedTokens is the tokens strategy st did not send against no pruning.
func (s Savings) SavedTokens(st string) int { return s.Tokens[scheduler.StrategyNone] - s.Tokens[st] }

// PctUSD and PctTokens are the savings as percentages of no pruning.
func (s Savings) PctUSD(st string) float64 {
	return pctOf(s.SavedUSD(st), s.Cost[scheduler.StrategyNone])
}

// PctTokens is SavedTokens as a percentage of the tokens sent unpruned.
func (s Savings) PctTokens(st string) float64 {
	return pctOf(float64(s.SavedTokens(st)), float64(s.Tokens[scheduler.StrategyNone]))
}

func pctOf(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * a / b
}

// Headline is the one-line summary analyze and stats lead with, naming
// its units, e.g. "Saved $1.23 (4.5%) of prompt cost (USD) and 12,345
// (6.7%) of tokens sent (summed over requests) over 3 sessions,
// scheduled; immediate would cost $0.32 (0.6%) more while removing 13,000
// (7.1%)".
func (s Savings) Headline() string {
	sched, imm := scheduler.StrategyScheduled, scheduler.StrategyImmediate
	out := fmt.Sprintf("%s over %d session%s, scheduled; immediate would %s",
		s.phrase(sched, "Saved", "Cost", true), s.Sessions, plural(s.Sessions), s.phrase(imm, "save", "cost", false))
	if s.Unpriced > 0 {
		out += fmt.Sprintf(" (%d unpriced session%s: tokens only)", s.Unpriced, plural(s.Unpriced))
	}
	if s.Recoveries > 0 {
		out += fmt.Sprintf("; the model recovered %d removed item%s (%s %s, %s of the %s, counted in it)",
			s.Recoveries, plural(s.Recoveries), thousands(s.RecoveryTokens), projections.UnitTokensSent, usd(s.RecoveryCost), projections.UnitPromptCost)
	}
	return out
}

// phrase is "Saved $1.23 (4.5%) of prompt cost (USD) and 1,000 (6.7%) of
// tokens sent (summed over requests)" or, when the strategy cost more
// than no pruning, "Cost $0.32 (0.6%) more while removing 1,000 (6.7%)"
// (with the verbs given; units named when units is true).
func (s Savings) phrase(st, save, cost string, units bool) string {
	usdUnit, tokUnit := "", ""
	if units {
		usdUnit, tokUnit = " of "+projections.UnitPromptCost, " of "+projections.UnitTokensSent
	}
	tok := fmt.Sprintf("%s (%.1f%%)%s", thousands(s.SavedTokens(st)), s.PctTokens(st), tokUnit)
	if v := s.SavedUSD(st); v < 0 {
		return fmt.Sprintf("%s %s (%.1f%%)%s more while removing %s", cost, usd(-v), -s.PctUSD(st), usdUnit, tok)
	}
	return fmt.Sprintf("%s %s (%.1f%%)%s and %s", save, usd(s.SavedUSD(st)), s.PctUSD(st), usdUnit, tok)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// usd formats dollars with a sign for losses: $1.23, -$0.04; amounts under
// a cent keep four decimals.
func usd(v float64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	if v != 0 && v < 0.01 {
		return fmt.Sprintf("%s$%.4f", sign, v)
	}
	return fmt.Sprintf("%s$%.2f", sign, v)
}

// USD formats a dollar amount as the CLI prints it.
func USD(v float64) string { return usd(v) }

// Thousands formats n with thousands separators.
func Thousands(n int) string { return thousands(n) }

func thousands(n int) string {
	s := fmt.Sprint(n)
	neg := ""
	if n < 0 {
		neg, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return neg + s
}
