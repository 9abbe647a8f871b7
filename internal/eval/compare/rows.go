package compare

import (
	"github.com/prunesched/prunesched/internal/eval/lab"
)

// RowRecoverable names the row of the opt-in recoverable policy: the lab's
// row run from lab/policies/recoverable.yaml (the policy of
// examples/recoverable.yaml).
const RowRecoverable = "R"

// Rows returns the rows analyze --compare runs, in report order: the
// lab's label-free rows (lab.Rows), R, the opt-in recoverable policy,
// among them after the production rows and before the peers.
func Rows(maskWindow int) ([]lab.Row, error) {
	return lab.Rows(maskWindow)
}
