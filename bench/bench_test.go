package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestQuickShape runs the quick bench and checks the JSON shape and that
// every measured value is positive. It asserts no timing.
func TestQuickShape(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and runs the whole quick bench")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Quick: true, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"raw_publish_per_s", "pipeline_per_s", "pipeline_ratio", "raw_replay_per_s", "rebuild_per_s", "rebuild_ratio", "core_events_per_s"} {
		if v, ok := m[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive number", k, m[k])
		}
	}
	for _, k := range []string{"render_p99_ms", "render_p50_ms"} {
		sizes, _ := m[k].(map[string]any)
		for _, n := range []string{"200", "2000", "20000"} {
			if v, ok := sizes[n].(float64); !ok || v <= 0 {
				t.Errorf("%s[%s] = %v, want a positive number", k, n, sizes[n])
			}
		}
	}
	for _, k := range []string{"proxy_p99_ms", "memory_per_session_bytes"} {
		sizes, _ := m[k].(map[string]any)
		for _, n := range []string{"200", "2000"} {
			if v, ok := sizes[n].(float64); !ok || v <= 0 {
				t.Errorf("%s[%s] = %v, want a positive number", k, n, sizes[n])
			}
		}
	}
	if len(res.SyncAlways) != 2 || res.SyncAlways[0].SyncAlwaysPerS <= 0 || res.SyncAlways[1].DefaultPerS <= 0 {
		t.Errorf("sync_always = %+v", res.SyncAlways)
	}
	var buf bytes.Buffer
	WriteTable(&buf, res)
	if !strings.Contains(buf.String(), "render at request, 2000 items") || !strings.Contains(buf.String(), "machine:") {
		t.Errorf("table misses rows:\n%s", buf.String())
	}
}

func TestPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i))
	}
	p50, p99 := percentiles(ds)
	if p50 != 50 || p99 != 99 {
		t.Fatalf("p50 %d p99 %d, want 50 and 99", p50, p99)
	}
	if a, b := percentiles(nil); a != 0 || b != 0 {
		t.Fatal("empty percentiles not zero")
	}
}

func TestRate(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567"} {
		if got := rate(v); got != want {
			t.Errorf("rate(%v) = %q, want %q", v, got, want)
		}
	}
}
