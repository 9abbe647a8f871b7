package events

import (
	"reflect"
	"testing"
)

// checkDecoder requires that d.Decode(b) gives what Decode(b) gives: the
// same Event, or an error with the same text.
func checkDecoder(t *testing.T, d *Decoder, b []byte) {
	t.Helper()
	want, werr := Decode(b)
	got, gerr := d.Decode(b)
	if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
		t.Fatalf("Decoder.Decode error %v, Decode %v, on\n%s", gerr, werr, b)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decoder.Decode and Decode differ on\n%s\ndecoder: %#v\ndecode:  %#v", b, got, want)
	}
	if d.p.b != nil {
		t.Fatal("Decoder keeps a reference to the input")
	}
}

// TestDecoderAgreesWithDecode runs one Decoder over every sample line and
// canonical encoding, in turn, and compares each result with Decode's.
func TestDecoderAgreesWithDecode(t *testing.T) {
	var d Decoder
	for _, l := range sampleLines(t) {
		checkDecoder(t, &d, l)
	}
	for _, e := range fullEvents() {
		b, err := Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		checkDecoder(t, &d, b)
		checkDecoder(t, &d, b[:len(b)-1]) // truncated: an error
	}
}

// FuzzDecoder compares a Decoder that has decoded the previous inputs
// with Decode on the same bytes.
func FuzzDecoder(f *testing.F) {
	for _, l := range sampleLines(f) {
		f.Add(l)
	}
	for _, e := range fullEvents() {
		b, err := Encode(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	var d Decoder
	f.Fuzz(func(t *testing.T, b []byte) { checkDecoder(t, &d, b) })
}
