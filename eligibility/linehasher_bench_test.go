package eligibility

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkLineHasher hashes the lines of a 200 KiB output held in memory,
// as the proxy does for a new output before it forwards the request that
// brought it: a numbered read (Claude Code's Read) and the plain lines of
// the bench's synthetic 200 KiB rows.
func BenchmarkLineHasher(b *testing.B) {
	var numbered, plain strings.Builder
	for i := 1; numbered.Len() < 200<<10; i++ {
		fmt.Fprintf(&numbered, "%6d→\tfunc line%d() { return strings.Repeat(\"x\", %d) }\n", i, i, i%80)
	}
	for j := 0; plain.Len() < 200<<10; j++ {
		fmt.Fprintf(&plain, "line %d of file %d: value_%x = compute(%d) // %x\n", j, 3, 3*7919+j*104729, j, j*2654435761)
	}
	for _, c := range []struct{ name, text string }{{"numbered", numbered.String()}, {"plain", plain.String()}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			b.ReportAllocs()
			for b.Loop() {
				lh := lineHasher{size: len(c.text)}
				if err := lh.readFrom(strings.NewReader(c.text)); err != nil {
					b.Fatal(err)
				}
				_, _ = lh.result()
			}
		})
	}
}
