package events

import (
	"testing"
	"time"
)

// benchEvent is a tool result in stored form, the most frequent fact.
func benchEvent() Event {
	return New("e-000123", "", "bench", time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), &ToolResult{
		Item: "toolu_000123", CallID: "toolu_000123", Tool: "Read",
		OutputRef: &ContentRef{Hash: HashBytes([]byte("x")), Bytes: 2048, Tokens: 512},
	})
}

// BenchmarkEncode measures the codec's write side (validation included).
func BenchmarkEncode(b *testing.B) {
	e := benchEvent()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode measures strict decoding, what every worker and the
// projection rebuild pay per event.
func BenchmarkDecode(b *testing.B) {
	raw, err := Encode(benchEvent())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}
