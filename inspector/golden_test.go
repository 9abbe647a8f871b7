package inspector_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGoldenPages imports the shipped sample session into a fresh
// prunesched and compares the rendered sessions, session, item and fleet
// pages with the golden files: the same log gives the same bytes (run with
// -update to rewrite them after an intended change).
func TestGoldenPages(t *testing.T) {
	_, base := startService(t)
	body, err := os.ReadFile("../examples/sample-session.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	httpDo(t, "POST", base+"/v1/events", "", body)
	pages := []struct{ name, path string }{
		{"sessions.html", "/"},
		{"session.html", "/ui/sessions/sample"},
		{"item.html", "/ui/sessions/sample/items/t1"},
		{"fleet.html", "/ui/fleet"},
	}
	for _, p := range pages {
		got := httpDo(t, "GET", base+p.path, "", nil)
		// The pipeline catches up before a page renders: a second
		// rendering is byte-identical.
		if again := httpDo(t, "GET", base+p.path, "", nil); !bytes.Equal(got, again) {
			t.Errorf("%s: two renderings of the same log differ", p.path)
		}
		golden := filepath.Join("testdata", p.name)
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test ./inspector -run TestGoldenPages -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s (run with -update after an intended change)\n got %d bytes, want %d", p.path, golden, len(got), len(want))
		}
	}
}
