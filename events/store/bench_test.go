package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

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

// BenchmarkConsumeBatchTrickle is the pipeline at low load: facts arrive
// a few at a time (one request's 5), and two batch consumers (as the
// eligibility and scheduler workers) each handle them as they come. It
// compares acknowledgements sent plain (ConsumeBatch without an ack
// hook, the pipeline's way) with the batch's last one confirmed (with a
// hook), in one process: cpu-µs/fact is the process's CPU time (client,
// embedded server and consumers) per fact.
func BenchmarkConsumeBatchTrickle(b *testing.B) {
	for _, confirm := range []bool{false, true} {
		b.Run(fmt.Sprintf("confirmed=%v", confirm), func(b *testing.B) {
			srv := startEmbedded(b, "", false)
			s := openStore(b, connectAdmin(b, srv), Config{Tokens: tokens.New(), SoleWriter: true})
			ctx, cancel := context.WithCancel(testCtx(b))
			const consumers, perAppend = 2, 5
			seen := make(chan uint64, 1024)
			var batches atomic.Int64
			var opts []ConsumeOption
			if confirm {
				opts = append(opts, WithAckHook(func(uint64) {}))
			}
			var wg sync.WaitGroup
			for c := range consumers {
				wg.Go(func() {
					_ = s.ConsumeBatch(ctx, fmt.Sprint("trickle", c), events.KindFilter(events.KindFact),
						func(_ context.Context, evs []events.Event) error {
							batches.Add(1)
							seen <- evs[len(evs)-1].Seq
							return nil
						}, opts...)
				})
			}
			b.Cleanup(func() { cancel(); wg.Wait() })
			wait := func(last uint64) {
				for done := 0; done < consumers; {
					if <-seen == last {
						done++
					}
				}
			}
			i := 0
			step := func() {
				i++
				stored, err := s.Append(ctx, benchBatch("trickle", fmt.Sprint(i), perAppend))
				if err != nil {
					b.Fatal(err)
				}
				wait(stored[len(stored)-1].Seq)
			}
			step() // the consumers are up
			cpu0, batches0 := processCPU(), batches.Load()
			for b.Loop() {
				step()
			}
			b.ReportMetric(float64(batches.Load()-batches0)/float64(b.N*perAppend*consumers), "batches/fact")
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N*perAppend), "cpu-µs/fact")
		})
	}
}

// processCPU is the process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPutBlobNew measures storing a new tool output (a distinct one
// each time, so each put is a look-up and a store): one chunk, and
// several.
func BenchmarkPutBlobNew(b *testing.B) {
	for _, size := range []int{4 << 10, 300 << 10} {
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			s := openStore(b, connectAdmin(b, startEmbedded(b, "", false)), Config{Tokens: tokens.New(), BlobCacheBytes: -1})
			ctx := testCtx(b)
			data := make([]byte, size)
			i := 0
			for b.Loop() {
				i++
				copy(data, fmt.Sprintf("output %d ", i))
				if err := s.PutBlob(ctx, events.HashBytes(data), data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
