package projections

import (
	"strings"
	"testing"
)

func TestNotYetSaved(t *testing.T) {
	for _, c := range []struct {
		name                      string
		prunes, applied, requests int
		want                      string
	}{
		{"no prunes", 0, 0, 0, ""},
		{"no prunes, requests", 0, 0, 5, ""},
		{"prunes, no request", 1, 1, 0, "1 prune decided, not yet applied to any priced request"},
		{"prunes, none applied", 3, 0, 4, "3 prunes decided, not yet applied to any request (the scheduler waits"},
		{"applied and priced", 3, 2, 4, ""},
	} {
		got := NotYetSaved(c.prunes, c.applied, c.requests)
		if (c.want == "") != (got == "") || !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: NotYetSaved(%d, %d, %d) = %q, want %q...", c.name, c.prunes, c.applied, c.requests, got, c.want)
		}
	}
}

func TestTitleLine(t *testing.T) {
	long := strings.Repeat("é", 100)
	for in, want := range map[string]string{
		"":                            "",
		"\n  \n  Fix the bug  \nmore": "Fix the bug",
		long:                          strings.Repeat("é", 79) + "…",
	} {
		if got := TitleLine(in); got != want {
			t.Errorf("TitleLine(%q) = %q, want %q", in, got, want)
		}
	}
}
