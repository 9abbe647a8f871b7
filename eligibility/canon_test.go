package eligibility

import (
	"bytes"
	"encoding/json"
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
		got, gv := canonicalJSON([]byte(in))
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
	v, ok := decodeForTest(raw)
	if !ok {
		return strings.TrimSpace(string(raw)), nil
	}
	return canonicalJSONSlow(raw, v)
}

func decodeForTest(raw []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

func FuzzCanonicalJSON(f *testing.F) {
	f.Add(`{"b":[1,2.5,"x\u00e9"],"a":{"c":null,"d":true}}`)
	f.Add("{\"a\":\"\xff\\u2028<>&\"}")
	f.Fuzz(func(t *testing.T, in string) {
		got, _ := canonicalJSON([]byte(in))
		want, _ := canonicalJSONSlowFull([]byte(in))
		if got != want {
			t.Fatalf("%q: got %q, want %q", in, got, want)
		}
	})
}
