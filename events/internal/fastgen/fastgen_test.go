package fastgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenerateRefusesUnknownTypes: a field type the fast decoder cannot
// read is an error naming the field, never a guessed entry.
func TestGenerateRefusesUnknownTypes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("decisions.go", "package events\n")
	write("payloads.go", "package events\n\ntype Odd struct {\n\tOK string `json:\"ok\"`\n\tM map[string]int `json:\"m\"`\n}\n")
	_, err := Generate(dir)
	if err == nil || !strings.Contains(err.Error(), "Odd.M") {
		t.Fatalf("error %v, want one naming Odd.M", err)
	}
	write("payloads.go", "package events\n\ntype Odd struct {\n\tOK string `json:\"ok\"`\n\tM map[string]int `json:\"m\" fastdecode:\"fM\"`\n}\n")
	out, err := Generate(dir)
	if err != nil || !strings.Contains(string(out), `fStr("ok", func(v *Odd) *string { return &v.OK })`) || !strings.Contains(string(out), "fM()") {
		t.Fatalf("generated %s, %v", out, err)
	}
}
