package placeholder_test

import (
	"fmt"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/placeholder"
)

// ExampleRender renders the placeholder left where a duplicate read of
// config.go was removed: mechanical, no summary, with the handle that
// recovers the original.
func ExampleRender() {
	p := placeholder.Spec{
		Part: "output", Tool: "Read", Source: "config.go",
		Rung: events.L1, Reason: events.ReasonDuplicateOutput,
		Tokens: 1200, Survivor: placeholder.Handle(3), Item: placeholder.Handle(9),
	}
	fmt.Println(placeholder.Render(p))
	fmt.Println(placeholder.Tokens(p) < 60)
	// Output:
	// [prunesched: output of Read config.go removed: L1 DUPLICATE_OUTPUT, 1200 tokens, copy #3, context_recover #9]
	// true
}
