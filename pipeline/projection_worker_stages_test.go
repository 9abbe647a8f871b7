package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/projections"
)

// TestProjectionWorkerStages: the staged worker applies in stream order,
// counts undecodable messages, advances Seq exactly, serves
// read-your-writes through WaitSeq, and Run returns when cancelled
// mid-replay.
func TestProjectionWorkerStages(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, _, _ := startStore(t, ctx, store.Config{Tokens: tokens.New()})
	js := st.JS()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pub := func(i int, garbage bool) uint64 {
		data := []byte("not json")
		if !garbage {
			e := events.New(fmt.Sprintf("e%d", i), "", fmt.Sprintf("s%d", i%3), at.Add(time.Duration(i)*time.Second),
				&events.Message{Item: fmt.Sprintf("m%d", i), Role: events.RoleUser, Text: "hi"})
			var err error
			data, err = events.Encode(e)
			if err != nil {
				t.Fatal(err)
			}
		}
		ack, err := js.Publish(ctx, events.SubjectPrefix+".default.x.fact", data)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	var last uint64
	for i := 0; i < 3000; i++ {
		last = pub(i, i%100 == 7)
	}
	w := NewProjectionWorker(js, slog.New(slog.DiscardHandler), nil)
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(rctx) }()
	if err := w.WaitSeq(ctx, last); err != nil {
		t.Fatal(err)
	}
	if w.Seq() != last {
		t.Fatalf("seq %d, want %d", w.Seq(), last)
	}
	w.mu.RLock()
	errs := w.errs
	w.mu.RUnlock()
	if errs != 30 {
		t.Fatalf("errs %d, want 30", errs)
	}
	for i := 3000; i < 3100; i++ {
		seq := pub(i, false)
		if err := w.WaitSeq(ctx, seq); err != nil {
			t.Fatal(err)
		}
		found := false
		w.View("default", fmt.Sprintf("s%d", i%3), func(s *projections.Session) {
			for _, it := range s.Bundle().Items {
				if it.ID == fmt.Sprintf("m%d", i) {
					found = true
				}
			}
		})
		if !found {
			t.Fatalf("m%d not projected after WaitSeq", i)
		}
	}
	for k := 0; k < 3; k++ {
		w.View("default", fmt.Sprintf("s%d", k), func(s *projections.Session) {
			prev := -1
			for _, it := range s.Bundle().Items {
				var n int
				fmt.Sscanf(it.ID, "m%d", &n)
				if n <= prev {
					t.Fatalf("out of order: %d after %d", n, prev)
				}
				prev = n
			}
		})
	}
	rcancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond} {
		w2 := NewProjectionWorker(js, slog.New(slog.DiscardHandler), nil)
		c2, cancel2 := context.WithCancel(ctx)
		done2 := make(chan error, 1)
		go func() { done2 <- w2.Run(c2) }()
		time.Sleep(d)
		cancel2()
		select {
		case <-done2:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
	}
}
