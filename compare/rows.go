package compare

import (
	"fmt"

	"github.com/prunesched/prunesched/lab"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/scheduler"
)

// RowRecoverable names the row of the opt-in recoverable policy.
const RowRecoverable = "R"

// RecoverablePolicy is row R's policy: the shipped default with
// eligibility.recoverable enabled at its documented defaults (the
// policy of examples/recoverable.yaml).
func RecoverablePolicy() policy.Policy {
	var p policy.Policy
	p.Name = "recoverable"
	p.Eligibility.Recoverable = &policy.Recoverable{Enabled: true}
	p.SetDefaults()
	return p
}

// Rows returns the rows analyze --compare runs, in report order: the
// lab's label-free rows (lab.Rows) with R, the opt-in recoverable policy,
// after the production rows (after D-span) and before the peers.
func Rows(maskWindow int) ([]lab.Row, error) {
	p := RecoverablePolicy()
	r, _ := p.Eligibility.RecoverableOn()
	row := lab.PolicyRow(RowRecoverable, "opt-in", fmt.Sprintf(
		"D + the recoverable policy (eligibility.recoverable: horizon %d, quiet %d, min %d tokens): cold tool outputs removed, recoverable by handle, not proven redundant",
		r.HorizonRequests, r.QuietRequests, r.MinTokens), scheduler.StrategyScheduled, p)
	rows, err := lab.Rows(maskWindow)
	if err != nil {
		return nil, err
	}
	at := len(rows)
	for i, x := range rows {
		if x.Name == lab.CondNoSpan {
			at = i + 1
		}
	}
	out := make([]lab.Row, 0, len(rows)+1)
	out = append(out, rows[:at]...)
	out = append(out, row)
	return append(out, rows[at:]...), nil
}
