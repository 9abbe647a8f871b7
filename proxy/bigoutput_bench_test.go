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
	f := &fakeUpstream{}
	bn := setup(b, policy.Default(), anthropicFake(f, func(map[string]any) turn { return turn{text: "ok"} }), nil)
	const n, size = 12, 200 << 10
	msgs := []any{map[string]any{"role": "user", "content": "Read every file and summarise."}}
	var bodies []string
	var sb strings.Builder
	for i := range n {
		call := fmt.Sprintf("toolu_%04d", i)
		msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": call, "name": "Read", "input": map[string]any{"file_path": fmt.Sprintf("/src/f%d.go", i)}}}})
		sb.Reset()
		for j := 0; sb.Len() < size; j++ {
			fmt.Fprintf(&sb, "line %d of file %d: value_%x = compute(%d) // %x\n", j, i, i*7919+j*104729, j, j*2654435761)
		}
		msgs = append(msgs, map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": call, "content": sb.String()}}})
		body, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": msgs, "tools": []any{map[string]any{"name": "Read", "description": "read", "input_schema": map[string]any{"type": "object"}}}})
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
