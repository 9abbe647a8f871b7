package projections_test

import (
	"fmt"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/projections"
)

func ExamplePlaceholder() {
	fmt.Println(projections.Placeholder(projections.PlaceholderSpec{
		Item: "#41", Part: "output", Tool: "Read", Source: "src/a.go",
		Rung: events.L0, Reason: events.ReasonDuplicateOutput, Tokens: 1234,
		Survivor: "#17",
	}))
	// Output:
	// [prunesched: output of Read src/a.go removed: L0 DUPLICATE_OUTPUT, 1234 tokens, copy #17, recover #41]
}
