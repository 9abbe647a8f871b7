package toolspec

import (
	"strings"
	"testing"
)

// TestCanonicalJSONMatchesEncodingJSON: the hand-written canonical encoder
// writes exactly what encoding/json's Encoder wrote for the same value.
func TestCanonicalJSONMatchesEncodingJSON(t *testing.T) {
	inputs := []string{
		``, `null`, ` `, `{}`, `[]`, `{"a":1}`, `{"b":2,"a":1}`, `{ "a" : [1, 2.50, -3e10, 0.0] }`,
		`{"a":1}{"b":2}`, `{"a":1} trailing`, `123abc`, `123 `, `"str"`, `true`, `false`, `[null,true,false]`,
		`{"file_path":"/repo/a.go","offset":1,"limit":50}`, `{"a":"x\"y"}`, `{"a":"tab\there"}`, `{"a":"<b>&amp;</b>"}`,
		`{"a":"caf\u00e9","b":"café"}`, `{"a":"\u2028\u2029"}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\xfe\"}", `{"a":"\\back"}`,
		`{"a":"\u0000\u001f\b\f\n\r"}`, `{"dup":1,"dup":2}`, `{"z":{"y":{"x":[{"w":"v"}]}}}`, `{"é":1,"e":2,"E":3}`,
		`[1,[2,[3,[4]]]]`, `{"a":1e400}`, `{"a":-0}`, `{"a":1E+2}`, `{"cmd":["bash","-lc","ls -la"]}`, `{bad json`, `  {"a":1}  `,
		"{\"k\x7f\":\"\x7f\"}", `{"a":"/"}`, strings.Repeat(`[`, 20) + strings.Repeat(`]`, 20),
	}
	for _, in := range inputs {
		got, gv, _ := CanonicalJSON([]byte(in))
		want, wv := canonicalJSONSlowFull([]byte(in))
		if got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
		if (gv == nil) != (wv == nil) {
			t.Errorf("%q: parsed differs", in)
		}
	}
}

// canonicalJSONSlowFull is the previous canonicalJSON, all encoding/json.
func canonicalJSONSlowFull(raw []byte) (string, any) {
	v, ok := decodeForTestOK(raw)
	if !ok {
		return strings.TrimSpace(string(raw)), nil
	}
	s, v, _ := canonicalJSONSlow(raw, v)
	return s, v
}

func decodeForTestOK(raw []byte) (any, bool) {
	v, err := DecodeJSON(raw)
	return v, err == nil
}

func FuzzCanonicalJSON(f *testing.F) {
	f.Add(`{"b":[1,2.5,"x\u00e9"],"a":{"c":null,"d":true}}`)
	f.Add("{\"a\":\"\xff\\u2028<>&\"}")
	f.Fuzz(func(t *testing.T, in string) {
		got, _, _ := CanonicalJSON([]byte(in))
		want, _ := canonicalJSONSlowFull([]byte(in))
		if got != want {
			t.Fatalf("%q: got %q, want %q", in, got, want)
		}
	})
}

func TestCanonicalJSON(t *testing.T) {
	a, _, _ := CanonicalJSON([]byte(`{"b": 1, "a": {"y": [1, 2], "x": "<&>"}}`))
	b, _, _ := CanonicalJSON([]byte("{\"a\":{\"x\":\"<&>\",\"y\":[1,2]},\n \"b\":1}"))
	if a != b || a != `{"a":{"x":"<&>","y":[1,2]},"b":1}` {
		t.Fatalf("%s != %s", a, b)
	}
	if c, _, _ := CanonicalJSON([]byte(`{"n": 1.50}`)); c != `{"n":1.50}` {
		t.Fatalf("numbers must keep their literal: %s", c)
	}
	for in, want := range map[string]bool{`{"a":1}`: true, ` null `: true, `{bad`: false, ``: false, `  x`: false} {
		if _, _, ok := CanonicalJSON([]byte(in)); ok != want {
			t.Errorf("%q: ok %v, want %v", in, ok, want)
		}
	}
}
