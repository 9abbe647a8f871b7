package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/policy"
)

// BenchmarkBigOutputs sends one session of 12 requests, each adding a new
// 200 KiB tool output (the bench's synthetic-200KiB-outputs-beyond-window row, shorter),
// through the proxy: profile it (-cpuprofile, focus appendNew) to see what
// costs per byte of a new output before forwarding.
func BenchmarkBigOutputs(b *testing.B) {
	benchBigOutputs(b, 0)
}

// BenchmarkBigOutputsWindow is BenchmarkBigOutputs kept within a
// 200k-token window, as the bench's synthetic-200KiB-outputs-200k-window
// row is: when the next body would pass 800,000 bytes the conversation
// starts over from a summary and the tool call just answered. Its bodies
// stay under 800 KB, so what grows with a new output is not hidden by
// what grows with a multi-megabyte body (-memprofile for the garbage).
func BenchmarkBigOutputsWindow(b *testing.B) {
	benchBigOutputs(b, 800_000)
}

// benchBigOutputs is the two benchmarks above; window (0: none) is the
// body's bound in bytes.
func benchBigOutputs(b *testing.B, window int) {
	f := &fakeUpstream{}
	bn := setup(b, policy.Default(), anthropicFake(f, func(map[string]any) turn { return turn{text: "ok"} }), nil)
	const n, size = 12, 200 << 10
	first := []any{map[string]any{"role": "user", "content": "Read every file and summarise."}}
	msgs := first
	var bodies []string
	var sb strings.Builder
	tools := []any{map[string]any{"name": "Read", "description": "read", "input_schema": map[string]any{"type": "object"}}}
	size0 := 0
	for i := range n {
		call := fmt.Sprintf("toolu_%04d", i)
		use := map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": call, "name": "Read", "input": map[string]any{"file_path": fmt.Sprintf("/src/f%d.go", i)}}}}
		sb.Reset()
		for j := 0; sb.Len() < size; j++ {
			fmt.Fprintf(&sb, "line %d of file %d: value_%x = compute(%d) // %x\n", j, i, i*7919+j*104729, j, j*2654435761)
		}
		res := map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": call, "content": sb.String()}}}
		if window > 0 && size0+sb.Len()*11/10 > window {
			msgs = []any{map[string]any{"role": "user", "content": fmt.Sprintf("This session is being continued (compaction %d). %s", i, strings.Repeat("Summary line. ", 300))}}
		}
		msgs = append(msgs, use, res)
		body, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": msgs, "tools": tools})
		size0 = len(body)
		bodies = append(bodies, string(body))
	}

	b.ResetTimer()
	for k := 0; k < b.N; k++ {
		s := fmt.Sprintf("s%d", k)
		for _, body := range bodies {
			if code, out := bn.post(b, s, body); code != 200 {
				b.Fatalf("%d %s", code, out)
			}
		}
	}
}
