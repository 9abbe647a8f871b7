package events

import (
	"encoding/json"
	"fmt"
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
func BenchmarkDecode(b *testing.B) { benchDecode(b, Decode) }

// benchDecode decodes the benchmark event with decode.
func benchDecode(b *testing.B, decode func([]byte) (Event, error)) {
	raw, err := Encode(benchEvent())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// benchStream is a mix of events in stored form in about the proportions
// of the bench's pipeline stream: per 57 events, 11 messages, 10 each of
// tool calls, tool results and model requests, 14 marks (with evidence)
// and 2 applications of 90 marks.
func benchStream() []Event {
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	var out []Event
	add := func(n int, id string, p Payload) {
		for i := range n {
			out = append(out, New(fmt.Sprintf("%s-e%06d", id, i), "", "pipe01", at, p))
		}
	}
	hash := HashBytes([]byte("x"))
	add(11, "msg", &Message{Item: "a12", Role: RoleAssistant, Text: "Reading the next file to check how Load handles it.", Tokens: 12})
	add(10, "call", &ToolCall{Item: "toolu_000012/input", CallID: "toolu_000012", Tool: "Read", Input: json.RawMessage(`{"file_path":"/repo/f12.go"}`), InputTokens: 20})
	add(10, "res", &ToolResult{Item: "toolu_000012", CallID: "toolu_000012", Tool: "Read", OutputRef: &ContentRef{Hash: hash, Bytes: 1882, Tokens: 470}})
	add(10, "req", &ModelRequest{Request: "r000012", Provider: "anthropic", Model: "claude-sonnet-4-5"})
	for i := range 14 {
		out = append(out, Event{V: 1, ID: DerivedID("mark", "pipe01", fmt.Sprint(i)), Type: TypeMark, Tenant: DefaultTenant, Session: "pipe01", Time: at, Data: &Mark{
			Item: "toolu_000004", Decision: Abstain, Reason: ReasonDifferentOutput, Part: "output",
			Evidence: []Evidence{
				{Kind: "canonical_args", Item: "toolu_000010", Hash: hash, Value: `{"command":"go test ./..."}`},
				{Kind: "content_hash", Item: "toolu_000010", Hash: hash, Detail: "newer output of the same call differs from " + hash},
			},
			Cause: "pipe00-e000047", CauseIndex: 46, PolicyVersion: "default@73d2761f8dcb", By: "eligibility",
		}})
	}
	for i := range 2 {
		a := &Application{Request: "r000254", Trigger: TriggerPressure, FirstDivergence: 54, MutationRadius: 129706, TokensRemoved: 39790,
			PlaceholderTokens: 2670, CacheCost: 0.4474857, ExpectedSaving: 0.2088975, AfterIndex: 1047, PolicyVersion: "default@73d2761f8dcb"}
		for j := range 90 {
			a.Marks = append(a.Marks, DerivedID("mark", fmt.Sprint(j)))
			a.Items = append(a.Items, fmt.Sprintf("toolu_%06d", j))
		}
		out = append(out, Event{V: 1, ID: DerivedID("apply", fmt.Sprint(i)), Type: TypeApplication, Tenant: DefaultTenant, Session: "pipe01", Time: at, Data: a})
	}
	return out
}

// BenchmarkDecodeStream decodes the mix of benchStream; ns/op is per
// event.
func BenchmarkDecodeStream(b *testing.B) { benchDecodeStream(b, Decode) }

// benchDecodeStream decodes the mix of benchStream with decode.
func benchDecodeStream(b *testing.B, decode func([]byte) (Event, error)) {
	var raws [][]byte
	size := 0
	for _, e := range benchStream() {
		raw, err := Encode(e)
		if err != nil {
			b.Fatal(err)
		}
		raws = append(raws, raw)
		size += len(raw)
	}
	b.SetBytes(int64(size / len(raws)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := decode(raws[i%len(raws)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkDecodeStrict is BenchmarkDecode on the strict decoder alone
// (what input that is not in canonical form costs).
func BenchmarkDecodeStrict(b *testing.B) { benchDecode(b, decodeSlow) }
