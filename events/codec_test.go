package events

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestDecodeSample(t *testing.T) {
	f, err := os.Open("testdata/sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := DecodeJSONL(f, "sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 6 {
		t.Fatalf("got %d events, want 6", len(evs))
	}
	tr, ok := evs[5].Data.(*ToolResult)
	if !ok || tr.Output == nil || !strings.Contains(*tr.Output, "package config") {
		t.Fatalf("tool result not decoded: %#v", evs[5].Data)
	}
	// Round trip is byte-stable.
	var buf bytes.Buffer
	if err := EncodeJSONL(&buf, evs); err != nil {
		t.Fatal(err)
	}
	again, err := DecodeJSONL(bytes.NewReader(buf.Bytes()), "rt")
	if err != nil {
		t.Fatal(err)
	}
	var buf2 bytes.Buffer
	if err := EncodeJSONL(&buf2, again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
		t.Fatal("round trip changed bytes")
	}
}

func TestDecodeErrorsNameLineAndField(t *testing.T) {
	good := `{"v":1,"id":"e1","type":"message","session":"s","time":"2026-11-30T10:00:00Z","data":{"item":"m","role":"user","text":"hi"}}`
	cases := []struct {
		name, line, want string
	}{
		{"unknown type", `{"v":1,"id":"e2","type":"nope","session":"s","time":"2026-11-30T10:00:00Z","data":{}}`, `"type": unknown event type "nope"`},
		{"missing field", `{"v":1,"id":"e2","type":"message","session":"s","time":"2026-11-30T10:00:00Z","data":{"item":"m2","text":"x"}}`, `"data.role": missing`},
		{"bad value", `{"v":1,"id":"e2","type":"message","session":"s","time":"2026-11-30T10:00:00Z","data":{"item":"m2","role":"robot","text":"x"}}`, `"data.role": bad value "robot"`},
		{"unknown field", `{"v":1,"id":"e2","type":"message","session":"s","time":"2026-11-30T10:00:00Z","data":{"item":"m2","role":"user","text":"x","colour":1}}`, `"data.colour": unknown field`},
		{"wrong json type", `{"v":1,"id":"e2","type":"tool_result","session":"s","time":"2026-11-30T10:00:00Z","data":{"item":"c","call_id":"c","output":5}}`, `bad value: number`},
		{"missing time", `{"v":1,"id":"e2","type":"message","session":"s","data":{"item":"m2","role":"user","text":"x"}}`, `"time": missing`},
		{"missing version", `{"id":"e2","type":"message","session":"s","time":"2026-11-30T10:00:00Z","data":{"item":"m2","role":"user","text":"x"}}`, `"v": missing`},
		{"bad session", `{"v":1,"id":"e2","type":"message","session":"a.b","time":"2026-11-30T10:00:00Z","data":{"item":"m2","role":"user","text":"x"}}`, `"session": invalid`},
		{"duplicate id", `{"v":1,"id":"e1","type":"message","session":"s","time":"2026-11-30T10:00:00Z","data":{"item":"m2","role":"user","text":"x"}}`, `duplicate id`},
		{"bad mark reason", `{"v":1,"id":"e2","type":"mark","session":"s","time":"2026-11-30T10:00:00Z","data":{"item":"m","decision":"PRUNE","rung":"L0","reason":"BORED","tokens_estimated":1,"cause":"e1","cause_index":0,"policy_version":"p"}}`, `unknown reason code "BORED"`},
		{"exact count without the estimate", `{"v":1,"id":"e2","type":"message","session":"s","time":"2026-11-30T10:00:00Z","data":{"item":"m2","role":"user","text":"x","tokens_exact":3}}`, `"data.tokens_exact": set without tokens`},
		{"negative exact count", `{"v":1,"id":"e2","type":"tool_call","session":"s","time":"2026-11-30T10:00:00Z","data":{"item":"c/input","call_id":"c","tool":"Read","input":{},"input_tokens":4,"input_tokens_exact":-1}}`, `"data.input_tokens_exact": negative`},
		{"output exact count without the estimate", `{"v":1,"id":"e2","type":"tool_result","session":"s","time":"2026-11-30T10:00:00Z","data":{"item":"c","call_id":"c","output_ref":{"hash":"sha256:` + strings.Repeat("ab", 32) + `","bytes":9,"tokens":0,"tokens_exact":2}}}`, `"data.output_ref.tokens_exact": set without output_ref.tokens`},
		{"not json", `{"v":1,`, `invalid JSON`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := "# header\n" + good + "\n" + tc.line + "\n"
			_, err := DecodeJSONL(strings.NewReader(in), "f.jsonl")
			if err == nil {
				t.Fatal("no error")
			}
			var le *LineError
			if !errors.As(err, &le) || le.Line != 3 || le.File != "f.jsonl" {
				t.Fatalf("error %v does not name f.jsonl line 3", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	b, _ := os.ReadFile("testdata/sample.jsonl")
	for _, l := range bytes.Split(b, []byte("\n")) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := Decode(line)
		if err != nil {
			return
		}
		out, err := Encode(e)
		if err != nil {
			t.Fatalf("decoded event does not encode: %v", err)
		}
		if _, err := Decode(out); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
	})
}

// TestPricedTokens: the economics price the exact count where a fact has
// one, else the decision count.
func TestPricedTokens(t *testing.T) {
	for _, tc := range []struct{ decision, exact, want int }{
		{0, 0, 0}, {120, 0, 120}, {120, 97, 97}, {120, 150, 150},
	} {
		if got := PricedTokens(tc.decision, tc.exact); got != tc.want {
			t.Errorf("PricedTokens(%d, %d) = %d, want %d", tc.decision, tc.exact, got, tc.want)
		}
	}
}
