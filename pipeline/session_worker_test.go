package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/policy"
)

// memLog is an in-memory log for driving a worker's batch handler by hand:
// one partition, stream sequences in append order, and reads of one
// session that fail as often as failReads says.
type memLog struct {
	evs       []events.Event
	failReads map[string]int
}

func (l *memLog) Append(_ context.Context, evs []events.Event) ([]events.Event, error) {
	out := make([]events.Event, len(evs))
	for i, e := range evs {
		e.Seq = uint64(len(l.evs) + 1)
		l.evs = append(l.evs, e)
		out[i] = e
	}
	return out, nil
}

func (l *memLog) ReadSession(_ context.Context, tenant, session string) ([]events.Event, error) {
	if l.failReads[session] > 0 {
		l.failReads[session]--
		return nil, fmt.Errorf("read %s: injected failure", session)
	}
	var out []events.Event
	for _, e := range l.evs {
		if keyOf(e) == (sessionKey{tenant, session}) {
			out = append(out, e)
		}
	}
	return out, nil
}

func (l *memLog) ConsumeBatch(context.Context, string, string, store.BatchHandler, ...store.ConsumeOption) error {
	return errors.New("memLog: no consumer")
}
func (l *memLog) PartitionOf(string, string) int                    { return 0 }
func (l *memLog) AckFloor(context.Context, string) (uint64, error)  { return 0, nil }
func (l *memLog) HasConsumer(context.Context, string) (bool, error) { return false, nil }
func (l *memLog) ClaimPartitionShape(ctx context.Context, _ int, propose func(context.Context) (string, error)) (string, error) {
	return propose(ctx)
}

// markIDs returns the sorted ids of session's marks in the log.
func (l *memLog) markIDs(session string) []string {
	var ids []string
	for _, e := range l.evs {
		if e.Type == events.TypeMark && e.Session == session {
			ids = append(ids, e.ID)
		}
	}
	sort.Strings(ids)
	return slices.Compact(ids)
}

// TestFailedBatchLosesNoMarks: a batch that fails after some sessions fed
// facts (here: another session's rebuild cannot read the log) must not
// leave those sessions ahead of the log. When the batch comes back, every
// mark of every fact is stored, as in an undisturbed run.
func TestFailedBatchLosesNoMarks(t *testing.T) {
	ctx := context.Background()
	var a, b []events.Event
	for _, e := range loadSample(t) {
		e.Session = "a"
		a = append(a, e)
		e.Session = "b"
		b = append(b, e)
	}
	log := &memLog{failReads: map[string]int{"b": 1}}
	facts, _ := log.Append(ctx, append(slices.Clone(a), b[0]))
	aFacts, b0 := facts[:len(a)], facts[len(a)]

	want := map[string]bool{}
	ec := eligibility.New(policy.Default(), "default", "a")
	for _, e := range aFacts {
		for _, m := range ec.Observe(e) {
			want[m.ID] = true
		}
	}
	if len(want) == 0 {
		t.Fatal("the sample session makes no marks: the test checks nothing")
	}

	w := NewEligibilityWorker(log, policy.Default(), slog.New(slog.DiscardHandler), nil).withPartitions(partitioning{owned: []int{0}})
	h := w.handler()
	st := w.partition(0)
	first := batch[eligSession]{part: 0, st: st, evs: aFacts[:1]}
	if err := h(ctx, first); err != nil {
		t.Fatal(err)
	}
	// Session a is held; b's first read fails, after a fed the rest of
	// its facts.
	rest := batch[eligSession]{part: 0, st: st, evs: append(slices.Clone(aFacts[1:]), b0)}
	if err := h(ctx, rest); err == nil {
		t.Fatal("the batch did not fail")
	}
	if err := h(ctx, rest); err != nil { // redelivered
		t.Fatal(err)
	}
	got := log.markIDs("a")
	var wantIDs []string
	for id := range want {
		wantIDs = append(wantIDs, id)
	}
	sort.Strings(wantIDs)
	if !slices.Equal(got, wantIDs) {
		t.Fatalf("marks of a stored: %d, want %d\ngot  %v\nwant %v", len(got), len(wantIDs), got, wantIDs)
	}
}

// The worker's middleware: a failed batch forgets the partition's sessions
// and counts a validation error only when an event failed validation.
func TestBatchMiddleware(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		cleared   bool
		validated float64
	}{
		{"success", nil, false, 0},
		{"log failure", errors.New("append: timeout"), true, 0},
		{"invalid event", fmt.Errorf("publish 1 marks: %w", &events.FieldError{Field: "id", Msg: "empty"}), true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			met := NewMetrics(prometheus.NewRegistry())
			st := &sessionTable[int]{sessions: map[sessionKey]*int{}}
			k := sessionKey{"t", "s"}
			st.sessions[k] = new(int)
			st.touchLocked(k, 3)
			var order []string
			tag := func(name string) batchMiddleware[int] {
				return func(h batchHandler[int]) batchHandler[int] {
					return func(ctx context.Context, b batch[int]) error {
						order = append(order, name)
						return h(ctx, b)
					}
				}
			}
			h := chain(func(context.Context, batch[int]) error { return tc.err },
				tag("outer"), withLatency[int](met, "eligibility"), withLock[int](), tag("locked"),
				withResetOnFailure[int](), withValidationErrors[int](met, "eligibility"))
			if err := h(context.Background(), batch[int]{st: st}); !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if !slices.Equal(order, []string{"outer", "locked"}) {
				t.Fatalf("order %v", order)
			}
			if cleared := len(st.sessions) == 0 && st.total() == 0; cleared != tc.cleared {
				t.Fatalf("sessions forgotten: %v, want %v", cleared, tc.cleared)
			}
			var m dto.Metric
			if err := met.validationErrors.WithLabelValues("eligibility").Write(&m); err != nil {
				t.Fatal(err)
			}
			if got := m.GetCounter().GetValue(); got != tc.validated {
				t.Fatalf("validation errors %v, want %v", got, tc.validated)
			}
			m.Reset()
			if err := met.latency.WithLabelValues("eligibility").(prometheus.Histogram).Write(&m); err != nil {
				t.Fatal(err)
			}
			if n := m.GetHistogram().GetSampleCount(); n != 1 {
				t.Fatalf("latency observations %d, want 1", n)
			}
		})
	}
}
