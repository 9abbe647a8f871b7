package scheduler

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

// benchCore builds a core over a session of n items (500-token tool
// results, a request every 10 items, 20 s apart) with a PRUNE mark on every
// tenth item, no applications yet.
func benchCore(n int, mode string) (*Core, int, time.Time) {
	b := newSession()
	at := time.Duration(0)
	for i := 0; i < n; i++ {
		f := b.fact(&events.ToolResult{Item: fmt.Sprintf("i%d", i), CallID: fmt.Sprintf("c%d", i), OutputRef: &events.ContentRef{Hash: "sha256:00", Tokens: 500}})
		if i%10 == 3 {
			b.mark(fmt.Sprintf("i%d", i-1), events.Prune, f)
		}
		if i%10 == 9 {
			at += 20 * time.Second
			b.at(at).req(fmt.Sprintf("r%d", i))
		}
	}
	p := pol(mode)
	p.Scheduler.PressureTokens = 1 << 40 // measure the full break-even path
	c := New(p, "", "s1")
	for _, ev := range b.evs {
		c.Observe(ev)
	}
	return c, b.facts, t0.Add(at + 10*time.Second)
}

func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{200, 2000, 20000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			c, f, at := benchCore(n, policy.ModeScheduled)
			c.Decide(at, "warmup", f) // applies the marks that pay
			if len(c.Pending()) == 0 {
				b.Fatal("nothing pending: the benchmark would measure the empty path")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c.Decide(at, "q"+strconv.Itoa(i), f)
			}
		})
	}
}

func BenchmarkSimulateScheduled(b *testing.B) {
	for _, n := range []int{200, 2000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			bs := newSession()
			at := time.Duration(0)
			for i := 0; i < n; i++ {
				f := bs.result(fmt.Sprintf("i%d", i), 500)
				if i%10 == 3 {
					bs.mark(fmt.Sprintf("i%d", i-1), events.Prune, f)
				}
				if i%10 == 9 {
					at += 20 * time.Second
					bs.at(at).req(fmt.Sprintf("r%d", i))
				}
			}
			p := policy.Default()
			p.Scheduler.PressureTokens = 1 << 40
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				Simulate(p, bs.evs, StrategyScheduled)
			}
		})
	}
}
