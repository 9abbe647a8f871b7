package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prunesched/prunesched/policy"
)

// BenchmarkProxyOverhead measures the latency the proxy adds per request
// (each proxied request minus a direct request with the same body, against
// an upstream that answers instantly) for sessions of 200 and 2,000 items.
// The goal is p99 <= 5 ms at 2,000 items.
func BenchmarkProxyOverhead(b *testing.B) {
	for _, items := range []int{200, 2000} {
		b.Run(fmt.Sprintf("items=%d", items), func(b *testing.B) {
			ctx := context.Background()
			rig, err := newOverheadRig(ctx, items, policy.Default())
			if err != nil {
				b.Fatal(err)
			}
			defer rig.close()
			var dir, add []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d, v, err := rig.round(ctx)
				if err != nil {
					b.Fatal(err)
				}
				dir, add = append(dir, d), append(add, max(v-d, 0))
			}
			p50, p99 := percentiles(add)
			d50, _ := percentiles(dir)
			b.ReportMetric(float64(p50.Microseconds())/1000, "added-p50-ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, "added-p99-ms")
			b.ReportMetric(float64(d50.Microseconds())/1000, "direct-p50-ms")
		})
	}
}

func TestMeasureOverhead(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	t.Parallel()
	o, err := MeasureOverheadDetail(context.Background(), 200, 20)
	if err != nil {
		t.Fatal(err)
	}
	// Only the shape: how much the proxy adds depends on the machine.
	if !(o.Requests == 20 && o.ProxyP50 > 0 && o.DirectP50 > 0 &&
		o.AddedP50 >= 0 && o.AddedP99 >= o.AddedP50 && o.ProxyP99 >= o.ProxyP50) {
		t.Errorf("overhead %+v", o)
	}
	t.Logf("200 items: added p50 %s p99 %s (direct p50 %s)", o.AddedP50, o.AddedP99, o.DirectP50)
}
