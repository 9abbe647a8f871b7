package store

import (
	"fmt"
	"testing"

	"github.com/prunesched/prunesched/events"

	"github.com/prunesched/prunesched/events/tokens"
)

// benchBatch builds n message events of a realistic small size for one
// session; ids are unique per call through prefix.
func benchBatch(session, prefix string, n int) []events.Event {
	evs := make([]events.Event, n)
	for i := range evs {
		evs[i] = events.New(fmt.Sprintf("%s-%d", prefix, i), "", session, t0, &events.Message{
			Item: fmt.Sprintf("%s-m%d", prefix, i), Role: events.RoleAssistant,
			Text: "I will read the config loader and check why Load fails on an empty file.",
			// Pre-counted, so the benchmark measures the log, not the tokenizer.
			Tokens: 17,
		})
	}
	return evs
}

func benchAppend(b *testing.B, sync bool, batch int) {
	srv := startEmbedded(b, "", sync)
	// As serve runs it: the embedded server without a listener, one writer.
	s := openStore(b, connectAdmin(b, srv), Config{Tokens: tokens.New(), SoleWriter: true})
	ctx := testCtx(b)
	i := 0
	for b.Loop() {
		i++
		if _, err := s.Append(ctx, benchBatch("bench", fmt.Sprint(i), batch)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppend measures batched asynchronous appends (default fsync
// interval).
func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) { benchAppend(b, false, n) })
	}
}

// BenchmarkAppendSyncAlways compares SyncAlways off and on, for single
// events and batches: the durability setting's cost.
func BenchmarkAppendSyncAlways(b *testing.B) {
	for _, sync := range []bool{false, true} {
		for _, n := range []int{1, 100} {
			b.Run(fmt.Sprintf("sync_always=%v/batch=%d", sync, n), func(b *testing.B) { benchAppend(b, sync, n) })
		}
	}
}

// BenchmarkReadSessionNew reads a session of two events on a stream of
// 2,000: what a worker or a proxy pays for a session's first fact (it
// reads the log before it knows the session is new).
func BenchmarkReadSessionNew(b *testing.B) {
	srv := startEmbedded(b, "", false)
	s := openStore(b, connectAdmin(b, srv), Config{})
	ctx := testCtx(b)
	for i := range 20 {
		if _, err := s.Append(ctx, benchBatch("noise", fmt.Sprint(i), 100)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.Append(ctx, benchBatch("new", "0", 2)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		evs, err := s.ReadSession(ctx, "", "new")
		if err != nil {
			b.Fatal(err)
		}
		if len(evs) != 2 {
			b.Fatalf("read %d events, want 2", len(evs))
		}
	}
}

// BenchmarkReadSession replays one 1000-event session while another session
// interleaves on the stream.
func BenchmarkReadSession(b *testing.B) {
	srv := startEmbedded(b, "", false)
	s := openStore(b, connectAdmin(b, srv), Config{})
	ctx := testCtx(b)
	for i := range 10 {
		if _, err := s.Append(ctx, benchBatch("read", fmt.Sprint(i), 100)); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Append(ctx, benchBatch("noise", fmt.Sprint(i), 100)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		evs, err := s.ReadSession(ctx, "", "read")
		if err != nil {
			b.Fatal(err)
		}
		if len(evs) != 1000 {
			b.Fatalf("read %d events, want 1000", len(evs))
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppendCounted appends batches in input form (texts without
// counts, inline outputs, some repeated): the tokenizer's share of the
// append path, prepared in parallel.
func BenchmarkAppendCounted(b *testing.B) {
	srv := startEmbedded(b, "", false)
	s := openStore(b, connectAdmin(b, srv), Config{Tokens: tokens.New(), SoleWriter: true})
	ctx := testCtx(b)
	i, n := 0, 0
	for b.Loop() {
		i++
		evs := countedBatch(fmt.Sprintf("counted%d", i))
		n += len(evs)
		if _, err := s.Append(ctx, evs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}
