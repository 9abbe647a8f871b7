package agenttools

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMatch(t *testing.T) {
	cases := []struct {
		tool string
		want Kind
		ok   bool
	}{
		{"context_list", List, true},
		{"mcp__prunesched__context_prune", Prune, true},
		{"prunesched__context_recover", Recover, true},
		{"prunesched_context_list", List, true},
		{"mcp__PruneSched__context_list", List, true},
		{"mcp__other__context_list", "", false},
		{"my_context_list", "", false},
		{"context_listing", "", false},
		{"Read", "", false},
		{"", "", false},
	}
	for _, tc := range cases {
		got, ok := Match(tc.tool)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Match(%q) = %q %v, want %q %v", tc.tool, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseHandle(t *testing.T) {
	cases := []struct {
		in   string
		want int
		err  string
	}{
		{"#12", 12, ""},
		{"12", 12, ""},
		{" # 7 ", 7, ""},
		{`#12">`, 0, `"#12\">" is not a handle`},
		{"#x", 0, "is not a handle"},
		{"", 0, "is not a handle"},
		{"#-3", 0, "is not a handle"},
		{"#1234567890", 0, "is not a handle"},
	}
	for _, tc := range cases {
		got, err := ParseHandle(tc.in)
		if tc.err == "" {
			if err != nil || got != tc.want {
				t.Errorf("ParseHandle(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseHandle(%q) error %v, want it to contain %q", tc.in, err, tc.err)
		}
	}
}

func TestDecodePruneArgs(t *testing.T) {
	cases := []struct {
		raw  string
		want []string
		err  string
	}{
		{`{"handles":["#1","#2"],"reason":"done"}`, []string{"#1", "#2"}, ""},
		{`{"handles":"#3"}`, []string{"#3"}, ""},
		{`{"handles":[4, "#5"]}`, []string{"4", "#5"}, ""},
		{`"{\"handles\":[\"#6\"]}"`, []string{"#6"}, ""},
		{`{}`, nil, `field "handles" missing`},
		{``, nil, `field "handles" missing`},
		{`{"handles":{"a":1}}`, nil, "want a list of handles"},
		{`[1,2`, nil, "context_prune arguments"},
	}
	for _, tc := range cases {
		var a PruneArgs
		err := DecodeArgs(Prune, []byte(tc.raw), &a)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.raw, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(a.Handles, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: %v %v, want %v", tc.raw, a.Handles, err, tc.want)
		}
	}
}

// TestDescriptionsStable: the tool list is part of the prompt the provider
// caches, so a description changes only on purpose.
func TestDescriptionsStable(t *testing.T) {
	for _, k := range Kinds {
		if d := Description(k); d == "" || len(d) > 300 {
			t.Errorf("%s: description of %d bytes", k, len(d))
		}
		var v any
		if err := json.Unmarshal(Schema(k), &v); err != nil {
			t.Errorf("%s: schema: %v", k, err)
		}
		if !strings.Contains(Stub(k), string(k)) {
			t.Errorf("%s: stub does not name the tool", k)
		}
	}
}

// FuzzDecodeArgs: whatever a model sends as a context tool's arguments,
// decoding never panics and a handle that parses is a number.
func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{`{"handles":["#1"]}`, `{"handle":"#2"}`, `{"limit":5}`, `"x"`, `[]`, `{"handles":"#3"}`, `{"handles":[null,true,{}]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var p PruneArgs
		if DecodeArgs(Prune, []byte(raw), &p) == nil {
			for _, h := range p.Handles {
				if n, err := ParseHandle(h); err == nil && n < 0 {
					t.Fatalf("handle %q parsed to %d", h, n)
				}
			}
		}
		var r RecoverArgs
		_ = DecodeArgs(Recover, []byte(raw), &r)
		var l ListArgs
		_ = DecodeArgs(List, []byte(raw), &l)
		if _, err := ParseHandle(raw); err != nil && !utf8.ValidString(err.Error()) && utf8.ValidString(raw) {
			t.Fatalf("error not UTF-8: %q", err)
		}
	})
}
