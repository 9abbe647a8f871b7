package projections_test

import (
	"encoding/json"
	"fmt"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/projections"
)

func ExamplePlaceholder() {
	fmt.Println(projections.Placeholder(projections.PlaceholderSpec{
		Session: "demo", Item: "toolu_01", Part: "output", Tool: "Read",
		Args: json.RawMessage(`{"file_path":"src/a.go"}`),
		Rung: events.L0, Reason: events.ReasonDuplicateOutput, Tokens: 1234,
		Survivor: "toolu_02",
		Original: "sha256:ab12cd34ef567890ab12cd34ef567890ab12cd34ef567890ab12cd34ef567890",
	}))
	// Output:
	// [prunesched: output of Read {"file_path":"src/a.go"} removed (L0 DUPLICATE_OUTPUT, 1234 tokens). Identical copy kept: toolu_02. Original: sha256:ab12cd34ef56 in the session log. Recover: prunesched item demo toolu_01]
}
