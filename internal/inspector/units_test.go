package inspector

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/projections"
)

// TestSpanEvidenceAsRanges: a span reference's evidence reads as line
// ranges of the item it points to, the hash one click away (a details
// element), not inline; other evidence keeps its value, its hash folded
// the same way.
func TestSpanEvidenceAsRanges(t *testing.T) {
	h := New(Config{})
	hash := "sha256:" + strings.Repeat("ab", 32)
	d := &projections.Decision{
		DecisionSummary: projections.DecisionSummary{Item: "t9", Decision: events.Prune, Reason: events.ReasonSpanReference},
		Evidence: []events.Evidence{
			{Kind: "span", Item: "t3", Hash: hash, Value: "10-57=3-50"},
			{Kind: "span", Item: "t4", Hash: hash, Value: "1-2=130-131@130"},
			{Kind: "content_hash", Item: "t1", Hash: hash, Value: "a.go"},
		},
		Tool: "Read", Source: "pkg/a.go",
	}
	var b bytes.Buffer
	err := h.tmpl.ExecuteTemplate(&b, "item.html", map[string]any{
		"Item": &projections.Item{ID: "t9", Tool: "Read", Kind: projections.ItemToolResult}, "D": d, "Class": ClassPruned,
	})
	if err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`<b>span</b> lines 10–57 are lines 3–50 of item <a href="#" class="itemlink" data-item="t3">t3</a>`,
		`lines 1–2 are lines 130–131 (renumbered from 130) of item`,
		`<details class="hash"><summary>hash</summary><code>` + hash + `</code></details>`,
		`<b>content_hash</b> item <a href="#" class="itemlink" data-item="t1">t1</a> a.go`,
		`· Read · <code class="source">pkg/a.go</code> ·`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("item panel lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "10-57=3-50") {
		t.Error("the span's raw evidence value is shown")
	}
	if n := strings.Count(page, hash); n != strings.Count(page, "<summary>hash</summary>") {
		t.Errorf("%d hashes shown, not all behind a click", n)
	}
}

// TestNotYetSavedShown: a session with prunes and no priced request says
// so on its page and on the sessions page, with the same words as the
// CLI (projections.NotYetSaved).
func TestNotYetSavedShown(t *testing.T) {
	v := View{Stats: projections.Stats{Decisions: map[events.Decision]int{events.Prune: 1}, Applied: 1}}
	s := summarize("s1", v, nil, nil)
	want := projections.NotYetSaved(1, 1, 0)
	if want == "" || s.NotYetSaved != want || !strings.Contains(want, "1 prune decided, not yet applied to any priced request") {
		t.Fatalf("summary says %q, want %q", s.NotYetSaved, want)
	}
	h := New(Config{})
	for _, page := range []string{"sessions.html", "session.html"} {
		var b bytes.Buffer
		data := map[string]any{"Base": base{}, "Rows": []summary{s}, "Total": totals([]summary{s}), "Sum": s, "Stats": v.Stats, "Strip": strip{}}
		if err := h.tmpl.ExecuteTemplate(&b, page, data); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), want) {
			t.Errorf("%s does not say %q", page, want)
		}
	}
	if s := summarize("s2", View{}, nil, nil); s.NotYetSaved != "" {
		t.Errorf("a session without prunes: %q", s.NotYetSaved)
	}
}

// TestPagesUseUnitWords: the rendered pages (the goldens TestGoldenPages
// holds them to) label their figures with the glossary's unit words and
// none of the phrasings they replaced.
func TestPagesUseUnitWords(t *testing.T) {
	want := map[string][]string{
		"session.html":  {projections.UnitContextNow, projections.UnitTokensSent, projections.UnitPromptCost},
		"sessions.html": {projections.UnitContextNow, projections.UnitTokensSent, projections.UnitPromptCost},
		"fleet.html":    {projections.UnitTokensSent, projections.UnitPromptCost},
		"item.html":     {projections.UnitContextNow},
	}
	for page, units := range want {
		b, err := os.ReadFile(filepath.Join("testdata", page))
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range units {
			if !bytes.Contains(b, []byte(u)) {
				t.Errorf("%s does not name %q", page, u)
			}
		}
		for _, old := range []string{"cache cost", "prompt tokens sent", "rendered now", "$ saved"} {
			if bytes.Contains(b, []byte(old)) {
				t.Errorf("%s still says %q", page, old)
			}
		}
	}
}
