package events

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// sampleEvents returns every event of the repository's sample sessions.
func sampleEvents(t testing.TB) []Event {
	t.Helper()
	var out []Event
	for _, p := range []string{"../examples/sample-session.jsonl", "../projections/testdata/session.jsonl"} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := DecodeJSONL(f, filepath.Base(p))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, evs...)
	}
	return out
}

func TestEncodeValidatedMatchesEncode(t *testing.T) {
	evs := sampleEvents(t)
	// Envelope strings that must be escaped, and a tenant, take the
	// fallback and the tenant field.
	odd := evs[0]
	odd.ID = "a<b&c>"
	odd.Tenant = "acme"
	evs = append(evs, odd)
	types := map[Type]bool{}
	for _, e := range evs {
		want, werr := json.Marshal(e)
		got, gerr := EncodeValidated(e)
		if werr != nil || gerr != nil {
			t.Fatalf("%s: json.Marshal: %v, EncodeValidated: %v", e.ID, werr, gerr)
		}
		if !bytes.Equal(want, got) {
			t.Errorf("%s: bytes differ:\njson.Marshal    %s\nEncodeValidated %s", e.ID, want, got)
		}
		if enc, err := Encode(e); err == nil && !bytes.Equal(enc, want) {
			t.Errorf("%s: Encode differs from json.Marshal:\n%s\n%s", e.ID, enc, want)
		}
		types[e.Type] = true
	}
	if len(types) < 9 {
		t.Errorf("samples cover %d event types, want at least 9", len(types))
	}
	if _, err := EncodeValidated(Event{ID: "x"}); err == nil {
		t.Error("no payload: want an error")
	}
	bad := evs[0]
	bad.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := EncodeValidated(bad); err == nil {
		t.Error("year 10000: want an error")
	}
}

// FuzzEncodeValidated: for any input that decodes, EncodeValidated (and so
// Encode) writes exactly json.Marshal's bytes.
func FuzzEncodeValidated(f *testing.F) {
	for _, e := range sampleEvents(f) {
		b, err := Encode(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			return
		}
		want, werr := json.Marshal(e)
		got, gerr := EncodeValidated(e)
		if werr != nil {
			return
		}
		if gerr != nil || !bytes.Equal(want, got) {
			t.Fatalf("differ (err %v):\njson.Marshal    %s\nEncodeValidated %s", gerr, want, got)
		}
	})
}

func BenchmarkEncodeValidated(b *testing.B) {
	e := benchEvent()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeValidated(e); err != nil {
			b.Fatal(err)
		}
	}
}
