package bench

import (
	"encoding/json"
	"testing"

	"github.com/prunesched/prunesched/internal/bench/replay"
)

// TestSyntheticRowsWithinWindow checks what the synthetic proxy-replay
// rows claim: within the window every body stays under windowBodyBytes,
// and on every row each request after the first carries exactly one
// tool output it had not carried before, of the row's size, so the size
// of the new output is the only thing the windowed rows vary.
func TestSyntheticRowsWithinWindow(t *testing.T) {
	for _, sr := range syntheticRows() {
		t.Run(sr.label(), func(t *testing.T) {
			n := 24 // as a quick run
			if !sr.windowed {
				n = 6 // enough to pass the window; 24 build 60 MB of bodies
			}
			turns := largeOutputs(n, sr.outputBytes, sr.windowed).Build(replay.Anthropic, false)
			if len(turns) != n+1 {
				t.Fatalf("%d requests, want %d", len(turns), n+1)
			}
			seen := map[string]bool{}
			compactions, largest := 0, 0
			for i, tu := range turns {
				largest = max(largest, len(tu.Body))
				if sr.windowed && len(tu.Body) > windowBodyBytes {
					t.Errorf("request %d: body %d bytes, over the window's %d", i, len(tu.Body), windowBodyBytes)
				}
				if i > 0 && len(tu.Body) < len(turns[i-1].Body) {
					compactions++
				}
				var req struct {
					Messages []struct {
						Content []struct {
							Type    string `json:"type"`
							Content string `json:"content"`
						} `json:"content"`
					} `json:"messages"`
				}
				if err := json.Unmarshal(tu.Body, &req); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				var fresh []string
				for _, m := range req.Messages {
					for _, c := range m.Content {
						if c.Type == "tool_result" && !seen[c.Content] {
							seen[c.Content] = true
							fresh = append(fresh, c.Content)
						}
					}
				}
				want := 1
				if i == 0 {
					want = 0
				}
				if len(fresh) != want {
					t.Fatalf("request %d: %d new outputs, want %d", i, len(fresh), want)
				}
				if want == 1 && (len(fresh[0]) < sr.outputBytes || len(fresh[0]) > sr.outputBytes+128) {
					t.Errorf("request %d: new output of %d bytes, want about %d", i, len(fresh[0]), sr.outputBytes)
				}
			}
			t.Logf("largest body %d bytes, %d compactions", largest, compactions)
			switch {
			case !sr.windowed && largest <= windowBodyBytes:
				t.Errorf("the row beyond the window never passes it (largest body %d)", largest)
			case sr.windowed && sr.outputBytes*n > windowBodyBytes && compactions == 0:
				t.Errorf("no compaction, with %d bytes of outputs", sr.outputBytes*n)
			}
		})
	}
}
