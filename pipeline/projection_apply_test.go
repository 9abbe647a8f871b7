package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"

	"github.com/prunesched/prunesched/events"
)

// nilReader is a SessionReader with nothing in the log.
type nilReader struct{}

func (nilReader) ReadSession(context.Context, string, string) ([]events.Event, error) {
	return nil, nil
}

// projMsgs wraps evs as decoded stream messages from sequence from on.
func projMsgs(evs []events.Event, from uint64) []projMsg {
	out := make([]projMsg, len(evs))
	for i, ev := range evs {
		out[i] = projMsg{seq: from + uint64(i), ev: ev, size: 100}
	}
	return out
}

// TestProjectionApplyAfterEviction: the session the previous event was
// applied to is remembered for the next one (applyOne), and forgotten
// when it is evicted, so an event of an evicted session is left to the
// log, not observed into the dropped projection or counted again.
func TestProjectionApplyAfterEviction(t *testing.T) {
	t.Parallel()
	sample := loadSample(t)
	half := len(sample) / 2
	w := NewProjectionWorker(nil, slog.New(slog.DiscardHandler), nil)
	w.SetEviction(nilReader{}, 1<<30)
	w.apply(projMsgs(renamed(sample[:half], "a"), 1))
	if bytes, held, _, _ := w.Memory(); held != 1 || bytes == 0 || w.last == nil {
		t.Fatalf("after a's first half: %d bytes, %d held, last %v", bytes, held, w.last)
	}
	// Two sweeps: the first marks a idle, the second evicts it.
	if n := w.EvictIdle() + w.EvictIdle(); n != 1 {
		t.Fatalf("sweeps evicted %d sessions, want 1", n)
	}
	if w.last != nil {
		t.Fatal("the evicted session is still remembered as the last one applied")
	}
	w.apply(projMsgs(renamed(sample[half:], "a"), uint64(half+1)))
	if bytes, held, evicted, _ := w.Memory(); bytes != 0 || held != 0 || evicted != 1 {
		t.Fatalf("after a's second half while evicted: %d bytes, %d held, %d evicted; want 0, 0, 1", bytes, held, evicted)
	}
	// Another session is held and remembered as before.
	w.apply(projMsgs(renamed(sample[:half], "b"), uint64(len(sample)+1)))
	if _, held, _, _ := w.Memory(); held != 1 || w.last == nil || w.last.key.session != "b" {
		t.Fatalf("after b: %d held, last %+v", held, w.last)
	}
}

// BenchmarkProjectionApply applies 16 sessions (the sample session under
// 16 names) to a fresh projection worker, in runs of 8 events per
// session and batches of 4 as the decoder hands them over: the worker's
// own path per event (finding the session, its memory estimate, its
// place in the LRU order) beside Session.Observe. ns/op is per event.
func BenchmarkProjectionApply(b *testing.B) {
	f, err := os.Open("../examples/sample-session.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	sample, err := events.DecodeJSONL(f, "sample-session.jsonl")
	_ = f.Close()
	if err != nil {
		b.Fatal(err)
	}
	var evs []events.Event
	const run = 8
	for from := 0; from < len(sample); from += run {
		for s := range 16 {
			evs = append(evs, renamed(sample[from:min(from+run, len(sample))], fmt.Sprintf("s%02d", s))...)
		}
	}
	msgs := projMsgs(evs, 1)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		w := NewProjectionWorker(nil, slog.New(slog.DiscardHandler), nil)
		for i := 0; i < len(msgs); i += 4 {
			w.apply(msgs[i:min(i+4, len(msgs))])
		}
		n++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*len(msgs)), "ns/event")
}
