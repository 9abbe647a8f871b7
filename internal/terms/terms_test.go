package terms

import (
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	cases := []struct {
		text string
		want string // terms joined by " "
	}{
		{"see internal/store/append.go:42 now", "internal/store/append.go append.go"}, // the chunk stops at ':'
		{"the quick brown fox jumps over", ""},
		{"call ReadSession with max_tokens and base64", "ReadSession max_tokens base64"},
		{"port 8788 and 123 and 20251001", "8788 20251001"},
		{"error E0425 and TS2345 and ENOENT, not ERROR or EOF", "E0425 TS2345 ENOENT"},
		{"commit 9e252a2 and deadbeef and abcdefa", "9e252a2"},
		{"open package.json and strings.Split() e.g. fine", "package.json strings.Split"},
		{"/tmp/x/a.txt.", "/tmp/x/a.txt"}, // "a": a name needs 2 characters
		{"ZQ-K7F3A is the tag", "K7F3A"},
		{"my-file-name.go", "my-file-name.go"},
	}
	for _, tc := range cases {
		got := strings.Join(Of(tc.text), " ")
		if got != tc.want {
			t.Errorf("Of(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func FuzzOf(f *testing.F) {
	for _, s := range []string{"internal/a.go:1", "E0425 ENOENT 9e252a2", "x.y.z/..//-", "ReadSession 12345"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		seen := map[string]bool{}
		for _, term := range Of(text) {
			if term == "" || !strings.Contains(text, term) || seen[term] {
				t.Fatalf("Of(%q): bad or repeated term %q", text, term)
			}
			seen[term] = true
		}
	})
}
