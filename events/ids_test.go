package events

import (
	"strings"
	"testing"

	"github.com/google/uuid"
)

// derivedIDReference is the original DerivedID: the fast one must give the
// same bytes.
func derivedIDReference(kind string, parts ...string) string {
	return kind + "-" + uuid.NewSHA1(idNamespace, []byte(kind+"\x00"+strings.Join(parts, "\x00"))).String()
}

func TestDerivedIDMatchesReference(t *testing.T) {
	long := strings.Repeat("x", 300)
	cases := [][]string{
		{"mark"},
		{"mark", ""},
		{"mark", "", ""},
		{"mark", "t", "s1", "item", "PRUNE", "L0", "DUPLICATE_OUTPUT", "ev-1"},
		{"apply", "", "s1", "r2"},
		{"", "a"},
		{"proxy-fact", "tenant", "sess\x00ion", "ïtem ✓"},
		{"mark", long, long},
		{strings.Repeat("k", 130), "a", "b"},
	}
	for _, c := range cases {
		got, want := DerivedID(c[0], c[1:]...), derivedIDReference(c[0], c[1:]...)
		if got != want {
			t.Errorf("DerivedID(%q) = %q, want %q", c, got, want)
		}
	}
	// Known value, so a change of namespace or layout shows.
	if got, want := DerivedID("apply", "", "s1", "r2"), derivedIDReference("apply", "", "s1", "r2"); got != want {
		t.Fatalf("got %q want %q", got, want)
	}
}

func FuzzDerivedID(f *testing.F) {
	f.Add("mark", "t", "s1", "item-1")
	f.Add("", "", "", "")
	f.Add("apply", "\x00", "s\x001", strings.Repeat("z", 400))
	f.Fuzz(func(t *testing.T, kind, a, b, c string) {
		for _, parts := range [][]string{nil, {a}, {a, b}, {a, b, c}} {
			if got, want := DerivedID(kind, parts...), derivedIDReference(kind, parts...); got != want {
				t.Fatalf("DerivedID(%q, %q) = %q, want %q", kind, parts, got, want)
			}
		}
	})
}

func BenchmarkDerivedID(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = DerivedID("mark", "t", "s1", "a123/input", "PRUNE", "L0", "DUPLICATE_OUTPUT", "b4567")
	}
}

func BenchmarkDerivedIDReference(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = derivedIDReference("mark", "t", "s1", "a123/input", "PRUNE", "L0", "DUPLICATE_OUTPUT", "b4567")
	}
}
