package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/decide"
	"github.com/prunesched/prunesched/projections"
)

// core measures the eligibility core alone: one goroutine feeding a
// 20,000-item session, best of a few passes (the machine is shared), and
// the scheduler core's Decide at 2,000 items.
func (b *runner) core(ctx context.Context) error {
	evs := b.w.session("", "core", b.size(20000))
	passes := b.pick(5, 2)
	var rates []float64
	for range passes {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := eligibility.New(b.pol, "", "core")
		t := time.Now()
		for _, e := range evs {
			c.Observe(e)
		}
		rates = append(rates, float64(len(evs))/time.Since(t).Seconds())
	}
	b.res.CoreEventsPerS = slices.Max(rates)
	b.progress("core: eligibility %.0f events/s (%d events, best of %d)", b.res.CoreEventsPerS, len(evs), passes)

	// The scheduler core at 2,000 items, with the marks the eligibility
	// core emits on the same session.
	evs = b.w.session("", "sched", b.size(2000))
	s := decide.NewSession(b.pol, "", "sched", nil)
	for _, e := range evs {
		s.Feed(e)
	}
	sc := s.Scheduler()
	at := evs[len(evs)-1].Time.Add(time.Minute)
	var ds []time.Duration
	for i := range b.pick(200, 40) {
		t := time.Now()
		sc.Decide(at, "bench-"+strconv.Itoa(i), sc.Facts())
		ds = append(ds, time.Since(t))
	}
	p50, _ := percentiles(ds)
	b.res.SchedulerDecideUs = float64(p50.Nanoseconds()) / 1e3
	return nil
}

// memory measures the heap a session keeps in the projection and the
// eligibility and scheduler cores: the events are decoded from their wire
// form (as the workers do) and fed to all three; the heap in use after a
// GC, minus the heap before, divided by the sessions.
func (b *runner) memory(ctx context.Context) error {
	for _, size := range []int{b.size(200), b.size(2000)} {
		k := b.pick(50, 10)
		if size == b.size(2000) {
			k = b.pick(10, 3)
		}
		wire := make([][][]byte, k)
		for i := range wire {
			enc, err := encoded(b.w.session("", fmt.Sprintf("mem%d-%d", size, i), size))
			if err != nil {
				return err
			}
			wire[i] = enc
		}
		before := heapInUse()
		type held struct {
			p *projections.Session
			s *decide.Session
		}
		keep := make([]held, k)
		for i := range wire {
			if err := ctx.Err(); err != nil {
				return err
			}
			name := fmt.Sprintf("mem%d-%d", size, i)
			h := held{projections.NewSession("", name), decide.NewSession(b.pol, "", name, nil)}
			for _, raw := range wire[i] {
				e, err := events.Decode(raw)
				if err != nil {
					return fmt.Errorf("memory: decode: %w", err)
				}
				marks, app := h.s.Feed(e)
				h.p.Observe(e)
				for _, m := range marks {
					h.p.Observe(m)
				}
				if app != nil {
					h.p.Observe(*app)
				}
			}
			keep[i] = h
		}
		after := heapInUse()
		runtime.KeepAlive(keep)
		runtime.KeepAlive(wire)
		per := float64(after-before) / float64(k)
		b.res.MemoryPerSessionBytes[strconv.Itoa(size)] = per
		b.progress("memory: %d items: %.0f KiB per session (%d sessions)", size, per/1024, k)
	}
	return nil
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// percentiles returns the 50th and 99th percentiles (nearest rank).
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration {
		i := int(q*float64(len(s))+0.5) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return at(0.50), at(0.99)
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
