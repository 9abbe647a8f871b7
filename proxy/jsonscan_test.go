package proxy

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzUnquote: unquote decodes every JSON string literal with escapes to
// what encoding/json decodes it to, and fails where encoding/json fails
// (its fast path through jsontext must not change a value). A literal
// without escapes is taken as its bytes, as before; the parse refuses
// text that is not valid UTF-8 separately (events.CheckText).
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{
		`""`, `"plain"`, `"a\nb\t\"c\"\\"`, `"\u00e9\u4e2d"`, `"\ud83d\ude00"`,
		`"\ud800"`, `"\udc00x"`, "\"bad \xff utf8\\n\"", `"\x"`, `"ctl ` + "\x01" + `\n"`,
		`"\/"`, `"trailing\n" `, `"a\u0000b\n"`, `"\uD83D\uDE00\n"`, `"\ud83d\u0041"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, gotErr := unquote(raw)
		if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
			if gotErr == nil {
				t.Fatalf("unquote(%q) = %q, want an error for a non-string", raw, got)
			}
			return
		}
		if !bytes.Contains(raw[1:len(raw)-1], []byte{'\\'}) {
			return
		}
		var want string
		wantErr := json.Unmarshal(raw, &want)
		if wantErr != nil {
			if gotErr == nil {
				t.Fatalf("unquote(%q) = %q, encoding/json fails: %v", raw, got, wantErr)
			}
			return
		}
		if gotErr != nil {
			t.Fatalf("unquote(%q): %v; encoding/json gives %q", raw, gotErr, want)
		}
		if got != want {
			t.Fatalf("unquote(%q) = %q, encoding/json gives %q", raw, got, want)
		}
	})
}
