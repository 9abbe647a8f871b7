package api

import (
	"strings"
	"testing"
)

func TestParseAuth(t *testing.T) {
	const tok = "0123456789abcdef"
	cases := []struct {
		name, in, wantErr string
	}{
		{"ok with comments", "# header\n\n" + tok + " acme # trailing\n" + tok + "X\tglobex\n", ""},
		{"one field", tok + "\n", "auth:1: want \"TOKEN TENANT\", got 1 fields"},
		{"three fields", "\n" + tok + " a b\n", "auth:2: want"},
		{"short token", "short acme\n", "auth:1: token shorter than 16"},
		{"bad tenant", tok + " a.b\n", `auth:1: tenant "a.b"`},
		{"duplicate token", tok + " a\n" + tok + " b\n", "auth:2: token already given on line 1"},
		{"empty", "# nothing\n", "auth: no tokens"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseAuth(strings.NewReader(tc.in), "auth")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), tok) {
					t.Fatalf("error prints the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := a.Tenant(tok); !ok || got != "acme" {
				t.Errorf("Tenant(tok) = %q %v", got, ok)
			}
			if got, ok := a.Tenant(tok + "X"); !ok || got != "globex" {
				t.Errorf("Tenant(tokX) = %q %v", got, ok)
			}
			if _, ok := a.Tenant(tok[:15]); ok {
				t.Error("a prefix of a token was accepted")
			}
		})
	}
}

// FuzzParseAuth: no input panics, and an accepted file maps each of its
// tokens to a valid tenant.
func FuzzParseAuth(f *testing.F) {
	f.Add("0123456789abcdef acme\n# c\n\n")
	f.Add("x")
	f.Fuzz(func(t *testing.T, in string) {
		a, err := ParseAuth(strings.NewReader(in), "f")
		if err != nil {
			return
		}
		if a.Tenants() == 0 {
			t.Fatal("accepted a file with no tokens")
		}
	})
}
