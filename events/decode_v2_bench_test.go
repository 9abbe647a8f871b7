package events

import (
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

// decodeV2 is decodeSlow with github.com/go-json-experiment/json's strict
// decoding (unknown members rejected; duplicate names and invalid UTF-8
// rejected and names matched case-sensitively by default) in place of
// encoding/json, fastdecode, strict.go and utf8.go: the candidate
// replacement of issue 31 item 6, measured by BenchmarkDecodeV2.
func decodeV2(b []byte) (Event, error) {
	var w wireEvent
	if err := jsonv2.Unmarshal(b, &w, jsonv2.RejectUnknownMembers(true)); err != nil {
		return Event{}, err
	}
	p, err := newPayload(w.Type)
	if err != nil {
		return Event{}, err
	}
	if err := jsonv2.Unmarshal(w.Data, p, jsonv2.RejectUnknownMembers(true)); err != nil {
		return Event{}, err
	}
	if err := fromWireForm(p); err != nil {
		return Event{}, err
	}
	if w.V == nil || w.Time == nil {
		return Event{}, fieldErr("v or time", "missing")
	}
	e := Event{V: *w.V, ID: w.ID, Type: w.Type, Tenant: w.Tenant, Session: w.Session, Time: w.Time.UTC(), Data: p}
	return e, e.Validate()
}

// BenchmarkDecodeV2 is BenchmarkDecode with decodeV2.
func BenchmarkDecodeV2(b *testing.B) { benchDecode(b, decodeV2) }

// BenchmarkDecodeStreamV2 is BenchmarkDecodeStream with decodeV2.
func BenchmarkDecodeStreamV2(b *testing.B) { benchDecodeStream(b, decodeV2) }

// TestDecodeV2AgreesOnTheBenchEvents: the candidate decodes the bench's
// events as Decode does (the comparison is of equal work).
func TestDecodeV2AgreesOnTheBenchEvents(t *testing.T) {
	for _, e := range append(benchStream(), benchEvent()) {
		raw, err := Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeV2(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		a, _ := Encode(got)
		bb, _ := Encode(want)
		if string(a) != string(bb) {
			t.Fatalf("decodeV2 %s\nDecode   %s", a, bb)
		}
	}
}
