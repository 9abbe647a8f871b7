package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckText(t *testing.T) {
	cases := []struct {
		name, in, path string
		surrogate      bool
	}{
		{"ascii", `{"a":"b"}`, "", false},
		{"utf8", `{"a":"héllo ✓"}`, "", false},
		{"escaped pair", `{"a":"\ud83d\ude00"}`, "", false},
		{"escaped backslash u", `{"a":"\\ud800"}`, "", false},
		{"bmp escape", `{"a":"\u00e9\uFFFD"}`, "", false},
		{"raw invalid", "{\"a\":\"x\xffy\"}", "a", false},
		{"nested", "{\"data\":{\"output\":\"\xfe\"}}", "data.output", false},
		{"array", "{\"m\":[\"ok\",{\"c\":\"\xc3\"}]}", "m[1].c", false},
		{"lone high", `{"a":{"b":"x\ud800y"}}`, "a.b", true},
		{"lone low", `{"a":"\udc00"}`, "a", true},
		{"high then non-low", `{"a":"\ud800\u0041"}`, "a", true},
		{"key", "{\"k\xff\":1}", "a key in (top level)", false},
		{"top level", "\"\xff\"", "(top level)", false},
		{"after numbers", "{\"n\":[1,2,true,null],\"s\":\"\xff\"}", "s", false},
		{"not json", "{\"a\":\xff", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckText([]byte(tc.in))
			if tc.path == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var te *TextError
			if !errors.As(err, &te) {
				t.Fatalf("got %v, want a TextError at %s", err, tc.path)
			}
			if te.Path != tc.path || te.Surrogate != tc.surrogate {
				t.Fatalf("got path %q surrogate %v, want %q %v", te.Path, te.Surrogate, tc.path, tc.surrogate)
			}
			if te.Offset < 0 || te.Offset >= len(tc.in) {
				t.Fatalf("offset %d outside the input", te.Offset)
			}
		})
	}
}

const resultLine = `{"v":1,"id":"e1","type":"tool_result","session":"s","time":"2026-11-30T10:00:00Z","data":{"item":"c1","call_id":"c1","tool":"Bash",%s}}`

func resultWith(field string) []byte {
	return []byte(strings.Replace(resultLine, "%s", field, 1))
}

// TestToolOutputBytesKept: tool output that is not valid UTF-8 goes in as
// output_base64, is kept byte-exact in Output, encodes back to the same
// wire form, and is hashed on its original bytes: two outputs differing
// only in those bytes get different content addresses.
func TestToolOutputBytesKept(t *testing.T) {
	raw := []byte("ok \xff\xfe end")
	b64, _ := json.Marshal(raw)
	e, err := DecodeInput(resultWith(`"output_base64":` + string(b64)))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	tr := e.Data.(*ToolResult)
	if tr.Output == nil || *tr.Output != string(raw) || tr.OutputBase64 != nil {
		t.Fatalf("output %q, want the original bytes %q", derefOr(tr.Output), raw)
	}
	enc, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(enc, []byte(`"output_base64":`+string(b64))) || bytes.Contains(enc, []byte(`"output":`)) {
		t.Fatalf("encoded form does not carry the bytes as output_base64: %s", enc)
	}
	again, err := DecodeInput(enc)
	if err != nil {
		t.Fatal(err)
	}
	if *again.Data.(*ToolResult).Output != string(raw) {
		t.Fatal("round trip changed the output")
	}
	// Valid UTF-8 keeps the plain form.
	plain, _ := Decode(resultWith(`"output":"héllo"`))
	if enc, _ := Encode(plain); !bytes.Contains(enc, []byte(`"output":"héllo"`)) {
		t.Fatalf("valid output not written as output: %s", enc)
	}
	// Hashes on the original bytes.
	blobs := memBlobs{}
	other := []byte("ok \xfe\xff end")
	h := func(out []byte) string {
		s := string(out)
		ev := New("e1", "", "s", e.Time, &ToolResult{Item: "c1", CallID: "c1", Output: &s})
		p, err := Prepare(context.Background(), ev, blobs, countLen{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Data.(*ToolResult).OutputRef.Hash
	}
	if h(raw) == h(other) {
		t.Fatal("outputs differing only in invalid bytes got the same content address")
	}
	if h(raw) != HashBytes(raw) || !bytes.Equal(blobs[h(raw)], raw) {
		t.Fatal("the blob is not the original bytes")
	}
	if _, err := DecodeInput(resultWith(`"output":"a","output_base64":"YQ=="`)); err == nil || !strings.Contains(err.Error(), "output_base64") {
		t.Fatalf("output and output_base64 together: %v", err)
	}
}

// TestDecodeInputRefusesAlteredText: outside input whose strings
// encoding/json would change is refused naming the field, never stored
// with U+FFFD in place of the bytes.
func TestDecodeInputRefusesAlteredText(t *testing.T) {
	cases := []struct{ name, in, field, hint string }{
		{"raw output", string(resultWith("\"output\":\"a\xffb\"")), "data.output", "output_base64"},
		{"surrogate output", string(resultWith(`"output":"a\udfffb"`)), "data.output", "surrogate"},
		{"message text", "{\"v\":1,\"id\":\"e1\",\"type\":\"message\",\"session\":\"s\",\"time\":\"2026-11-30T10:00:00Z\",\"data\":{\"item\":\"m\",\"role\":\"user\",\"text\":\"\xc3(\"}}", "data.text", "UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeInput([]byte(tc.in))
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.hint) {
				t.Fatalf("got %v, want a field error on %s mentioning %q", err, tc.field, tc.hint)
			}
			_, err = DecodeJSONL(strings.NewReader(tc.in+"\n"), "in.jsonl")
			if err == nil || !strings.Contains(err.Error(), "in.jsonl:1") || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("JSONL: got %v, want file, line and field", err)
			}
		})
	}
	// Go callers: text that is not UTF-8 fails validation (it could not be
	// encoded unchanged); tool output may be any bytes.
	bad := "\xff"
	if err := New("e1", "", "s", testTime, &Message{Item: "m", Role: RoleUser, Text: bad}).Validate(); err == nil {
		t.Error("message text that is not UTF-8 validated")
	}
	if err := New("e1", "", "s", testTime, &ToolResult{Item: "c", CallID: "c", Output: &bad}).Validate(); err != nil {
		t.Errorf("tool output that is not UTF-8: %v", err)
	}
}

// FuzzDecodeInput: whatever DecodeInput accepts encodes and decodes back
// to the same bytes, tool output included, and CheckText never panics.
func FuzzDecodeInput(f *testing.F) {
	f.Add(resultWith(`"output_base64":"/w=="`))
	f.Add(resultWith(`"output":"plain"`))
	f.Add(resultWith("\"output\":\"\xff\""))
	f.Add(resultWith(`"output":"\ud800"`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = CheckText(b)
		e, err := DecodeInput(b)
		if err != nil {
			return
		}
		enc, err := Encode(e)
		if err != nil {
			t.Fatalf("decoded event does not encode: %v", err)
		}
		e2, err := DecodeInput(enc)
		if err != nil {
			t.Fatalf("re-decode %s: %v", enc, err)
		}
		enc2, err := Encode(e2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the event:\n%s\n%s", enc, enc2)
		}
		if tr, ok := e.Data.(*ToolResult); ok && tr.Output != nil && *tr.Output != *e2.Data.(*ToolResult).Output {
			t.Fatal("round trip changed the tool output")
		}
	})
}

var testTime = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func derefOr(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

type memBlobs map[string][]byte

func (m memBlobs) PutBlob(_ context.Context, h string, b []byte) error {
	m[h] = append([]byte(nil), b...)
	return nil
}

type countLen struct{}

func (countLen) Count(s string) int { return len(s) }
