package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/iotest"
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

// TestLineOverLimit: a line over the bound is a *LineTooLongError naming
// its line, its length and the bound, from memory and from a stream, and
// an array element over it too; a line or element of exactly the bound
// decodes. The rule is checked under a small LineLimit (64 MiB inputs
// cost seconds and a gigabyte under -race); TestLineLimitIs64MiB checks
// that the package's functions apply MaxLineBytes.
func TestLineOverLimit(t *testing.T) {
	t.Parallel()
	const limit = LineLimit(1000)
	// sized is a tool result of id e2, n bytes long.
	sized := func(n int) string {
		s := strings.Replace(string(resultWith(`"output":""`)), `"id":"e1"`, `"id":"e2"`, 1)
		return strings.Replace(s, `"output":""`, `"output":"`+strings.Repeat("x", n-len(s))+`"`, 1)
	}
	good := string(resultWith(`"output":"a"`))
	fits, long := sized(int(limit)), sized(int(limit)+1)
	if len(fits) != int(limit) || len(long) != int(limit)+1 {
		t.Fatalf("lines of %d and %d bytes", len(fits), len(long))
	}
	for _, in := range []string{good + "\n\n" + fits + "\n", good + "\n" + fits} {
		if evs, err := limit.DecodeJSONLBytes([]byte(in), ""); err != nil || len(evs) != 2 {
			t.Fatalf("bytes, a line of the limit: %d events, %v", len(evs), err)
		}
		if evs, err := limit.DecodeJSONL(strings.NewReader(in), "f"); err != nil || len(evs) != 2 {
			t.Fatalf("reader, a line of the limit: %d events, %v", len(evs), err)
		}
	}
	if evs, err := limit.DecodeJSONArray([]byte("[" + good + ",\n" + fits + "]")); err != nil || len(evs) != 2 {
		t.Fatalf("array, an element of the limit: %d events, %v", len(evs), err)
	}
	in := good + "\n\n" + long + "\n"
	_, err := limit.DecodeJSONLBytes([]byte(in), "")
	var tl *LineTooLongError
	if !errors.As(err, &tl) || err.Error() != "line 3: 1001 bytes over the 1000-byte line limit" {
		t.Fatalf("bytes: %v", err)
	}
	_, err = limit.DecodeJSONL(strings.NewReader(in), "f")
	if !errors.As(err, &tl) || err.Error() != "f:3: over the 1000-byte line limit" {
		t.Fatalf("reader: %v", err)
	}
	// A last line without its newline, one byte over, from a reader that
	// returns its last bytes with io.EOF: the scanner's buffer has room
	// for it (the room of a newline), the bound still refuses it.
	_, err = limit.DecodeJSONL(iotest.DataErrReader(strings.NewReader(good+"\n"+long)), "f")
	if !errors.As(err, &tl) || err.Error() != "f:2: 1001 bytes over the 1000-byte line limit" {
		t.Fatalf("reader, last line without a newline: %v", err)
	}
	_, err = limit.DecodeJSONArray([]byte("[" + good + ",\n" + long + "]"))
	if !errors.As(err, &tl) || err.Error() != "event[1]: 1001 bytes over the 1000-byte element limit" {
		t.Fatalf("array: %v", err)
	}
	// A bound of whole MiB is named in MiB, and no bound is MaxLineBytes.
	for l, want := range map[LineLimit]string{2 << 20: "2 MiB", 0: "64 MiB", (1 << 20) + 1: "1048577-byte"} {
		if got := l.String(); got != want {
			t.Errorf("LineLimit(%d) = %q, want %q", int(l), got, want)
		}
	}
	if got := (&LineTooLongError{What: "line"}).Error(); got != "over the 64 MiB line limit" {
		t.Errorf("error without a limit: %q", got)
	}
}

// TestLineLimitIs64MiB: the package's decoders, and a zero LineLimit (a
// server's default), refuse a line over MaxLineBytes, which is 64 MiB.
// One line of that size is built, on the cheapest path (found too long
// before it is decoded); the rule itself is TestLineOverLimit's.
func TestLineLimitIs64MiB(t *testing.T) {
	t.Parallel()
	if MaxLineBytes != 64<<20 {
		t.Fatalf("MaxLineBytes = %d, want 64 MiB", MaxLineBytes)
	}
	long := bytes.Repeat([]byte("x"), MaxLineBytes+1)
	_, err := DecodeJSONLBytes(long, "")
	var tl *LineTooLongError
	if !errors.As(err, &tl) || err.Error() != fmt.Sprintf("line 1: %d bytes over the 64 MiB line limit", MaxLineBytes+1) {
		t.Fatalf("bytes: %v", err)
	}
	_, err = LineLimit(0).DecodeJSONLBytes(long, "")
	if !errors.As(err, &tl) || err.Error() != fmt.Sprintf("line 1: %d bytes over the 64 MiB line limit", MaxLineBytes+1) {
		t.Fatalf("zero limit: %v", err)
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
