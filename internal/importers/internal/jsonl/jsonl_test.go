package jsonl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{`{"a":1}`, []string{`{"a":1}`}},
		{`{"a":1}{"b":2}`, []string{`{"a":1}`, `{"b":2}`}},
		{`{"a":"}{"}  {"b":[1,2]} [3]`, []string{`{"a":"}{"}`, `{"b":[1,2]}`, `[3]`}},
		{`{"a":1}{"b":`, []string{`{"a":1}{"b":`}}, // truncated: whole, so the decoder names the error
		{`{"a":1} 2`, []string{`{"a":1} 2`}},       // a scalar is no object: whole
		{`not json`, []string{`not json`}},
		{`{"a":1}}`, []string{`{"a":1}}`}},
	}
	for _, c := range cases {
		got := Split([]byte(c.in))
		var gs []string
		for _, g := range got {
			gs = append(gs, string(g))
		}
		if strings.Join(gs, "|") != strings.Join(c.want, "|") {
			t.Errorf("Split(%q) = %q, want %q", c.in, gs, c.want)
		}
	}
}

func TestEachSplitsAndNumbersLines(t *testing.T) {
	in := "\xef\xbb\xbf{\"n\":1}\n\n  {\"n\":2}{\"n\":3}\n{\"n\":4}\n"
	var got []string
	err := Each(strings.NewReader(in), "t.jsonl", func(line int, v []byte) error {
		var x struct{ N int }
		if err := json.Unmarshal(v, &x); err != nil {
			return fmt.Errorf("t.jsonl:%d: %w", line, err)
		}
		got = append(got, fmt.Sprintf("%d@%d", x.N, line))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(got, " "); s != "1@1 2@3 3@3 4@4" {
		t.Errorf("values %s", s)
	}
}

// FuzzSplit: Split never panics, returns at least one part, and when it
// splits, every part is valid JSON and the parts are the line's bytes in
// order, with only whitespace between them.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{`{"a":1}{"b":2}`, `{"a":"}{"}[1]`, `{"a":1}{"b":`, `[]{}`, `{} 1`, `x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		parts := Split(line)
		if len(parts) == 0 {
			t.Fatal("no parts")
		}
		if len(parts) == 1 {
			return
		}
		rest := bytes.TrimSpace(line)
		for _, p := range parts {
			if !json.Valid(p) {
				t.Fatalf("part %q is not valid JSON", p)
			}
			if !bytes.HasPrefix(rest, p) {
				t.Fatalf("part %q is not the next bytes of %q", p, rest)
			}
			rest = bytes.TrimSpace(rest[len(p):])
		}
		if len(rest) != 0 {
			t.Fatalf("bytes left over: %q", rest)
		}
	})
}
