package policy_test

import (
	"fmt"

	"github.com/prunesched/prunesched/policy"
)

// ExampleDefault shows the default policy: provable pruning only, the
// recoverable (opt-in) policy off.
func ExampleDefault() {
	p := policy.Default()
	_, recoverable := p.Eligibility.RecoverableOn()
	fmt.Println(p.Scheduler.Mode, recoverable, p.Validate() == nil)
	// Output:
	// scheduled false true
}
