package eligibility

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
)

var update = flag.Bool("update", false, "rewrite REASONS.md from events.ReasonTable")

// reasonsDoc renders REASONS.md from events.ReasonTable.
func reasonsDoc() []byte {
	var b bytes.Buffer
	b.WriteString("# Reason codes\n\n")
	b.WriteString("Generated from `events.ReasonTable` by `go test ./eligibility/ -run TestReasonsDoc -update`; do not edit.\n")
	b.WriteString("Every mark carries one reason code; KEEP marks list the protections in force.\n")
	for _, d := range events.Decisions {
		fmt.Fprintf(&b, "\n## %s\n\n| code | description |\n|---|---|\n", d)
		for _, r := range events.ReasonTable {
			if r.Decision == d {
				fmt.Fprintf(&b, "| `%s` | %s |\n", r.Code, strings.ReplaceAll(r.Description, "|", "\\|"))
			}
		}
	}
	return b.Bytes()
}

func TestReasonsDoc(t *testing.T) {
	want := reasonsDoc()
	if *update {
		if err := os.WriteFile("REASONS.md", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("REASONS.md")
	if err != nil {
		t.Fatalf("%v (run go test ./eligibility/ -run TestReasonsDoc -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("REASONS.md is out of date: run go test ./eligibility/ -run TestReasonsDoc -update")
	}
}
