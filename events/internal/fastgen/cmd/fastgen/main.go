// Command fastgen writes events/fastdecode_fields.go (see package fastgen);
// run it through go generate in the events package.
package main

import (
	"fmt"
	"os"

	"github.com/prunesched/prunesched/events/internal/fastgen"
)

func main() {
	out, err := fastgen.Generate(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(fastgen.Output, out, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
