package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// liftInputs are tool results whose output the lift must decode exactly
// as the whole decode does, and inputs it must leave to the whole decode.
var liftInputs = [][]byte{
	resultWith(`"output":"plain"`),
	resultWith(`"output":"esc\"aped\\n\u00e9\ud83d\ude00 \/ tab\t"`),
	resultWith(`"output":""`),
	resultWith(`"output":"a", "is_error":true`),
	resultWith(`"output_base64":"/w=="`),
	resultWith(`"output":"a","output":"b"`), // a second output: not lifted
	resultWith(`"output":"a","Output":"b"`), // another spelling: not lifted
	resultWith(`"outp\u0075t":"a"`),         // an escaped key: not lifted
	resultWith(`"output":"a","output_base64":"/w=="`),
	resultWith(`"output":17`),
	[]byte(`{"v":1,"id":"e1","session":"s","time":"2026-01-01T00:00:00Z","type":"message","data":{"item":"m","role":"user","text":"hi"}}`),
	[]byte(`{"v":1,"id":"e1","session":"s","time":"2026-01-01T00:00:00Z","type":"tool_result","data":{"item":"c1","call_id":"c1","tool":"Bash","output":"x"},"data":{}}`),
	[]byte(`{"data":{"output":"x"} , "v":1,"id":"e1","session":"s","time":"2026-01-01T00:00:00Z","type":"tool_result"}`),
	[]byte(`{"v":1,"id":"e1","session":"s","time":"2026-01-01T00:00:00Z","type":"tool_result","data":{"item":"c1","call_id":"c1","tool":"Bash","output":"x"}} trailing`),
}

// liftedOrWhole is DecodeInput with the lift forced on, whatever the size.
func liftedOrWhole(b []byte) (Event, error) {
	if rest, raw, ok := liftOutput(b); ok {
		if e, ok := decodeLifted(rest, raw); ok {
			return e, nil
		}
	}
	return Decode(b)
}

// TestLiftedDecodeSame: decoding with the output lifted out gives the
// event (or the error) the whole decode gives.
func TestLiftedDecodeSame(t *testing.T) {
	for _, b := range liftInputs {
		checkLifted(t, b)
	}
}

func checkLifted(t *testing.T, b []byte) {
	t.Helper()
	got, gerr := liftedOrWhole(b)
	want, werr := Decode(b)
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("%s: lifted error %v, whole %v", b, gerr, werr)
	}
	if werr != nil {
		return
	}
	ge, err1 := Encode(got)
	we, err2 := Encode(want)
	if err1 != nil || err2 != nil || !bytes.Equal(ge, we) {
		t.Fatalf("%s:\nlifted %s (%v)\nwhole  %s (%v)", b, ge, err1, we, err2)
	}
}

// TestDecodeInputLiftsLargeOutput: an input over liftBytes is decoded by
// the lift, to the same event.
func TestDecodeInputLiftsLargeOutput(t *testing.T) {
	out := strings.Repeat("line \\\"quoted\\\" \\u00e9\\n", liftBytes/20)
	b := resultWith(`"output":"` + out + `"`)
	if _, _, ok := liftOutput(b); !ok {
		t.Fatal("not lifted")
	}
	e, err := DecodeInput(b)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if *e.Data.(*ToolResult).Output != *want.Data.(*ToolResult).Output {
		t.Fatal("lifted output differs")
	}
}

func FuzzLiftOutput(f *testing.F) {
	for _, b := range liftInputs {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkLifted(t, b)
	})
}

// TestDecodeJSONLBytesSame: the in-memory JSONL decoder gives what the
// stream decoder gives, events and errors.
func TestDecodeJSONLBytesSame(t *testing.T) {
	good := string(resultWith(`"output":"a"`))
	msg := `{"v":1,"id":"e2","session":"s","time":"2026-01-01T00:00:00Z","type":"message","data":{"item":"m","role":"user","text":"hi"}}`
	for _, in := range []string{
		"", "\n\n", "# comment\n" + good + "\n" + msg, good + "\r\n" + msg + "\r\n", good + "\n" + good, good + "\n{bad}\n" + msg,
	} {
		want, werr := DecodeJSONL(strings.NewReader(in), "f")
		got, gerr := DecodeJSONLBytes([]byte(in), "f")
		if fmt.Sprint(werr) != fmt.Sprint(gerr) || len(want) != len(got) {
			t.Fatalf("%q: bytes %d events, %v; reader %d events, %v", in, len(got), gerr, len(want), werr)
		}
	}
}

// TestLineOverLimit: a line over MaxLineBytes is a *LineTooLongError
// naming its line, its length and the limit, from memory and from a
// stream, and an array element over it too.
func TestLineOverLimit(t *testing.T) {
	t.Parallel()
	good := string(resultWith(`"output":"a"`))
	long := `{"v":1,"output":"` + strings.Repeat("x", MaxLineBytes) + `"}`
	in := good + "\n\n" + long + "\n"
	_, err := DecodeJSONLBytes([]byte(in), "")
	var tl *LineTooLongError
	if !errors.As(err, &tl) || err.Error() != fmt.Sprintf("line 3: %d bytes over the 64 MiB line limit", len(long)) {
		t.Fatalf("bytes: %v", err)
	}
	_, err = DecodeJSONL(strings.NewReader(in), "f")
	if !errors.As(err, &tl) || err.Error() != "f:3: over the 64 MiB line limit" {
		t.Fatalf("reader: %v", err)
	}
	_, err = DecodeJSONArray([]byte("[" + good + ",\n" + long + "]"))
	if !errors.As(err, &tl) || err.Error() != fmt.Sprintf("event[1]: %d bytes over the 64 MiB element limit", len(long)) {
		t.Fatalf("array: %v", err)
	}
}

// TestDecodeJSONArray: arrays decode as json.Unmarshal into raw messages
// then DecodeInput did, and malformed arrays are refused.
func TestDecodeJSONArray(t *testing.T) {
	good := string(resultWith(`"output":"a]},["`))
	msg := `{"v":1,"id":"e2","session":"s","time":"2026-01-01T00:00:00Z","type":"message","data":{"item":"m","role":"user","text":"hi"}}`
	for _, in := range []string{"[]", " [ ] ", "[" + good + "]", "[ " + good + " ,\n" + msg + " ]\n"} {
		got, err := DecodeJSONArray([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		var raws []json.RawMessage
		if err := json.Unmarshal([]byte(in), &raws); err != nil || len(raws) != len(got) {
			t.Fatalf("%s: %d events, json %d (%v)", in, len(got), len(raws), err)
		}
		for i, raw := range raws {
			want, err := DecodeInput(raw)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := Encode(want)
			b, _ := Encode(got[i])
			if !bytes.Equal(a, b) {
				t.Fatalf("%s: event[%d] %s, want %s", in, i, b, a)
			}
		}
	}
	for _, in := range []string{"[", "[" + good, "[" + good + ",", "[" + good + "] x", "[" + good + " " + msg + "]", "[1]", `["x"]`, "[" + good + ",]"} {
		if _, err := DecodeJSONArray([]byte(in)); err == nil {
			t.Fatalf("%s: no error", in)
		}
	}
}
