package inspector_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// startSample starts prunesched with the shipped sample session appended
// (default tenant) and returns the API's base URL.
func startSample(t *testing.T) string {
	t.Helper()
	_, base := startService(t)
	body, err := os.ReadFile("../../examples/sample-session.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	httpDo(t, "POST", base+"/v1/events", "", body)
	return base
}

// TestGoldenPages imports the shipped sample session into a fresh
// prunesched and compares the rendered sessions, session, item and fleet
// pages with the golden files: the same log gives the same bytes (run with
// -update to rewrite them after an intended change).
func TestGoldenPages(t *testing.T) {
	base := startSample(t)
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

// TestTenantScope checks that the inspector shows a tenant only its own
// sessions: another tenant's sessions page lists none and its session
// page answers 404, and a malformed tenant is refused as the API refuses it.
func TestTenantScope(t *testing.T) {
	base := startSample(t)
	if page := httpDo(t, "GET", base+"/", "", nil); !bytes.Contains(page, []byte(`data-session="sample"`)) {
		t.Fatal("the default tenant's sessions page does not list its session")
	}
	page := httpDo(t, "GET", base+"/?tenant=acme", "", nil)
	if bytes.Contains(page, []byte(`data-session="sample"`)) || !bytes.Contains(page, []byte("No sessions for this tenant")) {
		t.Error("tenant acme sees the default tenant's session")
	}
	if bytes.Contains(httpDo(t, "GET", base+"/ui/fleet?tenant=acme", "", nil), []byte("/ui/sessions/sample")) {
		t.Error("tenant acme's fleet page links the default tenant's session")
	}
	for path, want := range map[string]int{
		"/ui/sessions/sample?tenant=acme":          http.StatusNotFound,
		"/ui/sessions/sample/items/t1?tenant=acme": http.StatusNotFound,
		"/?tenant=a.b":                     http.StatusBadRequest,
		"/ui/sessions/sample/strip?from=x": http.StatusBadRequest,
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}
