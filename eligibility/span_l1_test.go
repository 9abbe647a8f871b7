package eligibility

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
)

// spanOn turns span references on.
const spanOn = "eligibility:\n  span_refs: true\n"

// numbered renders lines from..to of a.go as Claude Code's Read does
// (line number, arrow, text).
func numbered(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%6d→\tfunc handler%d(w http.ResponseWriter, r *http.Request) { serve(w, r, %d) }\n", i, i, i)
	}
	return b.String()
}

// shifted renders lines from..to of a.go's earlier text, now numbered
// from+by..to+by, as after an edit that added by lines above them.
func shifted(from, to, by int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%6d→\tfunc handler%d(w http.ResponseWriter, r *http.Request) { serve(w, r, %d) }\n", i+by, i, i)
	}
	return b.String()
}

// testLog is a test run's output: n identical failure lines around a
// summary line that varies.
func testLog(summary string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "--- FAIL: TestHandler%d (0.00s)\n    handler_test.go:%d: got 500, want 200\n", i, 10+i)
	}
	b.WriteString(summary + "\n")
	return b.String()
}

func readLines(p string, off, lim int) map[string]any {
	return map[string]any{"file_path": p, "offset": off, "limit": lim}
}

// TestSpanReference is the L1 span rule: a read that repeats a run of an
// earlier in-context read of the same version is a partial prune naming
// that read, its runs and their hashes; otherwise nothing.
func TestSpanReference(t *testing.T) {
	cases := []struct {
		name   string
		policy string
		run    func(s *sess) string // returns the item to check
		want   events.Decision      // "" no decision
		reason events.Reason
		// ranges is the span evidence wanted ("from-to=from-to", ...).
		ranges []string
	}{
		{"off when span_refs is false", "eligibility:\n  span_refs: false\n", func(s *sess) string {
			s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr(numbered(1, 60))})
			s.req()
			return s.toolR("Read", readLines("a.go", 20, 30), &events.ToolResult{Output: strPtr(numbered(20, 49))})
		}, "", "", nil},
		{"a partial re-read of the same version", spanOn, func(s *sess) string {
			s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr(numbered(1, 60))})
			s.req()
			return s.toolR("Read", readLines("a.go", 20, 30), &events.ToolResult{Output: strPtr(numbered(20, 49))})
		}, events.Prune, events.ReasonSpanReference, []string{"1-30=20-49"}},
		{"new lines stay verbatim around the run", spanOn, func(s *sess) string {
			s.toolR("Read", readLines("a.go", 1, 30), &events.ToolResult{Output: strPtr(numbered(1, 30))})
			s.req()
			return s.toolR("Read", readLines("a.go", 21, 30), &events.ToolResult{Output: strPtr(numbered(21, 50))})
		}, events.Prune, events.ReasonSpanReference, []string{"1-10=21-30"}},
		{"on by default", "", func(s *sess) string {
			s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr(numbered(1, 60))})
			s.req()
			return s.toolR("Read", readLines("a.go", 20, 30), &events.ToolResult{Output: strPtr(numbered(20, 49))})
		}, events.Prune, events.ReasonSpanReference, []string{"1-30=20-49"}},
		{"a write between: the lines it left alone still repeat", spanOn, func(s *sess) string {
			s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr(numbered(1, 60))})
			s.tool("Edit", edit("a.go"), "ok")
			return s.toolR("Read", readLines("a.go", 20, 30), &events.ToolResult{Output: strPtr(numbered(20, 49))})
		}, events.Prune, events.ReasonSpanReference, []string{"1-30=20-49"}},
		{"an edit above moved the lines: renumbered", spanOn, func(s *sess) string {
			s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr(numbered(1, 60))})
			s.tool("Edit", edit("a.go"), "ok")
			return s.toolR("Read", readLines("a.go", 25, 30), &events.ToolResult{Output: strPtr(shifted(20, 49, 5))})
		}, events.Prune, events.ReasonSpanReference, []string{"1-30=20-49@25"}},
		{"numbers that do not count up by one do not match", spanOn, func(s *sess) string {
			s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr(numbered(1, 60))})
			var b strings.Builder
			for i := 20; i <= 49; i++ {
				fmt.Fprintf(&b, "%6d→\tfunc handler%d(w http.ResponseWriter, r *http.Request) { serve(w, r, %d) }\n", 2*i, i, i)
			}
			return s.toolR("Read", readLines("a.go", 40, 60), &events.ToolResult{Output: strPtr(b.String())})
		}, "", "", nil},
		{"the same lines in another output", spanOn, func(s *sess) string {
			s.toolR("Read", read("b.go"), &events.ToolResult{Output: strPtr(numbered(1, 60))})
			return s.toolR("Read", readLines("a.go", 20, 30), &events.ToolResult{Output: strPtr(numbered(20, 49))})
		}, events.Prune, events.ReasonSpanReference, []string{"1-30=20-49"}},
		{"a re-run repeats its failures: the new summary stays", spanOn, func(s *sess) string {
			s.tool("Bash", map[string]any{"command": "go test ./..."}, testLog("FAIL ok 3.1s", 12))
			s.tool("Edit", edit("a.go"), "ok")
			return s.tool("Bash", map[string]any{"command": "go test ./..."}, testLog("FAIL ok 2.9s", 12))
		}, events.Prune, events.ReasonSpanReference, []string{"1-24=1-24"}},
		{"no repeated lines", spanOn, func(s *sess) string {
			s.toolR("Read", read("b.go"), &events.ToolResult{Output: strPtr(testLog("x", 30))})
			return s.toolR("Read", readLines("a.go", 20, 30), &events.ToolResult{Output: strPtr(numbered(20, 49))})
		}, "", "", nil},
		{"runs shorter than span_min_lines", spanOn + "  span_min_lines: 40\n", func(s *sess) string {
			s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr(numbered(1, 60))})
			return s.toolR("Read", readLines("a.go", 20, 30), &events.ToolResult{Output: strPtr(numbered(20, 49))})
		}, "", "", nil},
		{"the earlier read is pruned later: whole again", spanOn, func(s *sess) string {
			s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr(numbered(1, 60))})
			id := s.toolR("Read", readLines("a.go", 20, 30), &events.ToolResult{Output: strPtr(numbered(20, 49))})
			s.feed(&events.PruneRequest{Item: "c1", By: "ann"})
			return id
		}, events.Keep, events.ReasonUniqueEvidence, []string{"1-30=20-49"}}, // the refused proposal's evidence
		{"a whole re-read supersedes the earlier range: L2 wins, the read stays whole", spanOn, func(s *sess) string {
			s.toolR("Read", readLines("a.go", 20, 30), &events.ToolResult{Output: strPtr(numbered(20, 49))})
			s.req()
			id := s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr(numbered(1, 60))})
			s.reqs(3)
			s.want("c1", events.Prune, events.ReasonSuperseded)
			return id
		}, events.Keep, events.ReasonSurvivingCopy, nil}, // never a reference to what it supersedes
		{"the earlier read was pruned before", spanOn, func(s *sess) string {
			s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr(numbered(1, 60))})
			s.feed(&events.PruneRequest{Item: "c1", By: "ann"})
			return s.toolR("Read", readLines("a.go", 20, 30), &events.ToolResult{Output: strPtr(numbered(20, 49))})
		}, "", "", nil},
		{"the earlier read left the context", spanOn, func(s *sess) string {
			s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr(numbered(1, 60)), HostPruned: true})
			return s.toolR("Read", readLines("a.go", 20, 30), &events.ToolResult{Output: strPtr(numbered(20, 49))})
		}, "", "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSess(t, tc.policy)
			id := tc.run(s)
			if tc.want == "" {
				s.wantNone(id)
				return
			}
			m := s.want(id, tc.want, tc.reason)
			var got []string
			for _, e := range m.Evidence {
				if e.Kind == "span" {
					got = append(got, e.Value)
					if e.Item != "c1" || !strings.HasPrefix(e.Hash, "sha256:") {
						t.Errorf("span evidence %+v: want item c1 and a sha256", e)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.ranges) {
				t.Errorf("span ranges %v, want %v", got, tc.ranges)
			}
			if m.Decision == events.Prune {
				if m.Rung != events.L1 || m.TokensEstimated <= 0 || m.Recoverability == nil || m.Recoverability.Survivor != "c1" {
					t.Errorf("mark %+v: want rung L1, a saving, survivor c1", m)
				}
			}
		})
	}
}

// TestSpanContentFailureReported: an output stored by reference that the
// getter cannot return is judged without its lines (no span), and
// ContentErr reports it, so a worker can discard the judgement and judge
// again once the blob store answers: the same facts then give the span.
func TestSpanContentFailureReported(t *testing.T) {
	text := numbered(20, 49)
	hash := events.HashBytes([]byte(text))
	run := func(get func(string) ([]byte, error)) (*sess, string) {
		s := newSess(t, spanOn)
		s.ref = nil // the reference core has no getter
		s.core.SetContent(get)
		s.toolR("Read", read("a.go"), &events.ToolResult{Output: strPtr(numbered(1, 60))})
		s.req()
		return s, s.toolR("Read", readLines("a.go", 20, 30), &events.ToolResult{
			OutputRef: &events.ContentRef{Hash: hash, Bytes: len(text), Tokens: 100}})
	}
	failing, item := run(func(string) ([]byte, error) { return nil, errors.New("read pipe: i/o timeout") })
	if err := failing.core.ContentErr(); err == nil || !strings.Contains(err.Error(), "i/o timeout") {
		t.Fatalf("ContentErr after a failed get: %v", err)
	}
	if err := failing.core.ContentErr(); err != nil {
		t.Fatalf("ContentErr not cleared: %v", err)
	}
	failing.wantNone(item)
	ok, item := run(func(string) ([]byte, error) { return []byte(text), nil })
	if err := ok.core.ContentErr(); err != nil {
		t.Fatal(err)
	}
	ok.want(item, events.Prune, events.ReasonSpanReference)
}
