package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestSmokeShape runs every section of the bench in smoke mode (the same
// code paths as a full run, on sessions a tenth of the size) and checks the
// JSON shape: every rate is positive and every by-size map has the sizes
// the run used. It asserts no timing: latencies only have to be present.
func TestSmokeShape(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers and runs every bench section")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	traces, err := FindTraces("testdata/traces")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(ctx, Config{Smoke: true, TempDir: t.TempDir(), Progress: &progress, Traces: traces})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Sections {
		if !strings.Contains(progress.String(), "bench: "+s+" done") {
			t.Errorf("section %s did not run:\n%s", s, progress.String())
		}
	}
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	// proxy-replay: each tiny trace in each of its shapes, streamed and
	// not, every request sent three ways, and the synthetic sessions (8,
	// 50 and 200 KiB outputs within a 200k-token window, 200 KiB beyond).
	if got := len(res.ProxyReplay); got != 6+len(syntheticRows()) {
		t.Errorf("proxy_replay has %d rows, want %d (claude-code: anthropic x2; opencode: chat x2, responses x2; the synthetic rows)", got, 6+len(syntheticRows()))
	} else {
		for i, sr := range syntheticRows() {
			row := res.ProxyReplay[6+i]
			if row.Trace != sr.label() || row.NewOutputKiB != float64(sr.outputBytes)/1024 || (row.WindowTokens != 0) != sr.windowed {
				t.Errorf("proxy_replay row %d: %s, new output %g KiB, window %d; want %s", 6+i, row.Trace, row.NewOutputKiB, row.WindowTokens, sr.label())
			}
			// The 200 KiB row within the window goes through a
			// compaction (a new conversation under the same session).
			if sr.windowed && sr.outputBytes == 200<<10 && row.Compactions == 0 {
				t.Errorf("proxy_replay row %s: no compaction, want the client to have compacted", row.Trace)
			}
		}
	}
	// proxy-load: two levels in smoke mode, every request of every
	// session sent, none failing open on the tiny traces.
	if len(res.ProxyLoad) != 2 || res.ProxyLoad[0].Sessions != 1 || res.ProxyLoad[1].Sessions != 2 {
		t.Errorf("proxy_load rows %+v, want sessions 1 and 2", res.ProxyLoad)
	}
	for _, row := range res.ProxyLoad {
		if row.Requests == 0 || row.Requests%row.Sessions != 0 || row.RatePerS <= 0 || row.FailedOpen != 0 {
			t.Errorf("proxy_load row %+v", row)
		}
		// Every request appends facts (its messages at least), and the
		// process spent CPU on them.
		if row.Facts < row.Requests || row.CPUSeconds <= 0 || row.FactsPerCPUSecond != float64(row.Facts)/row.CPUSeconds {
			t.Errorf("proxy_load row %+v: facts %d, cpu %g s, facts per cpu s %g", row, row.Facts, row.CPUSeconds, row.FactsPerCPUSecond)
		}
		if _, ok := m["proxy_load"].([]any)[0].(map[string]any)["facts_per_cpu_s"]; !ok {
			t.Errorf("proxy_load rows have no facts_per_cpu_s")
		}
	}
	realReqs := 0
	for _, row := range res.ProxyReplay {
		if row.Requests == 0 || row.Rendered+row.FailedOpen != row.Requests {
			t.Errorf("proxy_replay %s %s stream=%v: %d requests, %d rendered + %d failed open", row.Trace, row.API, row.Stream, row.Requests, row.Rendered, row.FailedOpen)
		}
		if row.NewOutputKiB == 0 {
			realReqs += row.Requests
		}
	}
	// The pooled percentiles cover every request of the real sequences,
	// and only those.
	if p := res.ProxyReplayPooled; p == nil || p.Sequences != 6 || p.Requests != realReqs || p.ProxyP99 < p.ProxyP50 || p.BareP99 < p.BareP50 {
		t.Errorf("proxy_replay_pooled %+v, want 6 sequences and %d requests", p, realReqs)
	}
	if m["smoke"] != true || m["quick"] != true {
		t.Errorf("smoke %v quick %v, want both true", m["smoke"], m["quick"])
	}
	for _, k := range []string{"raw_publish_per_s", "pipeline_per_s", "pipeline_ratio", "pipeline_per_s_per_core", "raw_replay_per_s", "rebuild_per_s", "rebuild_ratio", "core_events_per_s"} {
		if v, ok := m[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive number", k, m[k])
		}
	}
	// The spread around the medians: the run's pairs and rounds, the
	// lowest at most the median at most the highest.
	for _, k := range [][3]string{{"rebuild_ratio_min", "rebuild_ratio", "rebuild_ratio_max"}, {"core_events_per_s_min", "core_events_per_s", "core_events_per_s_max"}} {
		lo, _ := m[k[0]].(float64)
		med, _ := m[k[1]].(float64)
		hi, _ := m[k[2]].(float64)
		if lo <= 0 || lo > med || med > hi {
			t.Errorf("%s %v, %s %v, %s %v: want 0 < lowest <= median <= highest", k[0], m[k[0]], k[1], m[k[1]], k[2], m[k[2]])
		}
	}
	if pairs, _ := m["rebuild_pairs"].([]any); len(pairs) != len(res.RebuildPairs) || len(pairs) == 0 {
		t.Errorf("rebuild_pairs = %v, want the run's %d pairs", m["rebuild_pairs"], len(res.RebuildPairs))
	} else if p, _ := pairs[0].(map[string]any); p["raw_replay_per_s"] == nil || p["rebuild_per_s"] == nil || p["ratio"] == nil {
		t.Errorf("rebuild_pairs[0] = %v, want raw_replay_per_s, rebuild_per_s and ratio", pairs[0])
	}
	if v, ok := m["core_cpu_ns_per_event"].(float64); !ok || v < 0 {
		t.Errorf("core_cpu_ns_per_event = %v, want a number", m["core_cpu_ns_per_event"])
	}
	if rounds, _ := m["core_rounds_per_s"].([]any); len(rounds) == 0 {
		t.Errorf("core_rounds_per_s = %v, want the run's rounds", m["core_rounds_per_s"])
	}
	// sizes checks that a by-size map has the sizes the run used, with a
	// number each (>= 0 when signed is false). Memory is a difference of
	// heap sizes over one session in smoke mode: other goroutines freeing
	// memory meanwhile can make it negative, so only its presence counts.
	sizes := func(k string, signed bool, want ...string) {
		t.Helper()
		got, _ := m[k].(map[string]any)
		if len(got) != len(want) {
			t.Errorf("%s has sizes %v, want %v", k, got, want)
		}
		for _, n := range want {
			if v, ok := got[n].(float64); !ok || (!signed && v < 0) {
				t.Errorf("%s[%s] = %v, want a number", k, n, got[n])
			}
		}
	}
	sizes("render_p50_ms", false, "20", "200", "2000")
	sizes("render_p99_ms", false, "20", "200", "2000")
	sizes("proxy_p50_ms", false, "20", "200")
	sizes("proxy_p99_ms", false, "20", "200")
	sizes("memory_per_session_bytes", true, "20", "200")
	if len(res.SyncAlways) != 2 || res.SyncAlways[0].SyncAlwaysPerS <= 0 || res.SyncAlways[1].DefaultPerS <= 0 {
		t.Errorf("sync_always = %+v", res.SyncAlways)
	}
	var buf bytes.Buffer
	WriteTable(&buf, res)
	for _, want := range []string{"render at request, 20 items", "render at request, 2000 items", "proxy added latency, 200 items", "machine:", "smoke run"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table misses %q:\n%s", want, buf.String())
		}
	}
}

// stallingPublisher refuses the first stalls publishes with
// ErrTooManyStalledMsgs, as a server that cannot keep up does, and counts
// how often the caller waited for pending acknowledgements.
type stallingPublisher struct {
	stalls, published, waits int
}

func (s *stallingPublisher) PublishMsgAsync(*nats.Msg, ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	if s.stalls > 0 {
		s.stalls--
		return nil, fmt.Errorf("publish: %w", jetstream.ErrTooManyStalledMsgs)
	}
	s.published++
	return nil, nil
}

func (s *stallingPublisher) PublishAsyncComplete() <-chan struct{} {
	s.waits++
	c := make(chan struct{})
	close(c)
	return c
}

// TestPublishAsyncRidesOutStalls: a stalled publish waits for the pending
// acknowledgements and goes again instead of failing the bench; other
// errors and a cancelled run still end it.
func TestPublishAsyncRidesOutStalls(t *testing.T) {
	p := &stallingPublisher{stalls: 3}
	if _, err := publishAsync(context.Background(), p, &nats.Msg{Subject: "x"}); err != nil {
		t.Fatal(err)
	}
	if p.published != 1 || p.waits != 3 {
		t.Fatalf("published %d after %d waits, want 1 after 3", p.published, p.waits)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	blocked := &blockingPublisher{}
	if _, err := publishAsync(ctx, blocked, &nats.Msg{Subject: "x"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: got %v", err)
	}
}

// blockingPublisher is always stalled and its acknowledgements never come.
type blockingPublisher struct{}

func (blockingPublisher) PublishMsgAsync(*nats.Msg, ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	return nil, jetstream.ErrTooManyStalledMsgs
}

func (blockingPublisher) PublishAsyncComplete() <-chan struct{} { return make(chan struct{}) }

func TestBackPressure(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("append: %w", jetstream.ErrTooManyStalledMsgs), true},
		{fmt.Errorf("append: %w", jetstream.ErrAsyncPublishTimeout), true},
		{fmt.Errorf("append: %w", jetstream.ErrNoStreamResponse), true},
		{fmt.Errorf("append: %w", nats.ErrTimeout), true},
		{fmt.Errorf("append: %w", context.Canceled), false},
		{errors.New("event 3: field tool_call: missing"), false},
	} {
		if got := backPressure(tc.err); got != tc.want {
			t.Errorf("backPressure(%v) = %v, want %v", tc.err, got, tc.want)
		}
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

// TestSessionMemoryRows: the idle row shows the compact form measured over
// many sessions when there is one, judges the goal on it, and never prints
// a negative heap delta as a size.
func TestSessionMemoryRows(t *testing.T) {
	for _, tc := range []struct {
		name  string
		idle  float64
		rss   *IdleRSS
		want  string
		wantN string
	}{
		{"noise only", -486_000, nil, "below the heap noise + 319 KiB", "-"},
		{"small positive", 2048, nil, "2.0 KiB + 319 KiB", "-"},
		{"many sessions", -486_000, &IdleRSS{Sessions: 10000, Items: 20, CompactBytes: 493}, "493 B + 319 KiB", "goal idle <= 64 KiB + index ✓"},
		{"many sessions, noise", 0, &IdleRSS{Sessions: 10000, Items: 20, CompactBytes: -262}, "below the heap noise (-262 B measured) + 319 KiB", "goal idle <= 64 KiB + index ✓"},
		{"too big", 1 << 20, &IdleRSS{Sessions: 10000, Items: 20, CompactBytes: 100 << 10}, "102400 B + 319 KiB", "goal idle <= 64 KiB + index ✗"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &Result{SessionMemory: []SessionMemory{{Items: 2000, IdleBytes: tc.idle, IDIndexBytes: 319 << 10}}, IdleRSS: tc.rss}
			var buf bytes.Buffer
			WriteTable(&buf, res)
			var line string
			for _, l := range strings.Split(buf.String(), "\n") {
				if strings.Contains(l, "idle: compact form + fact-id index") {
					line = l
				}
			}
			if !strings.Contains(line, tc.want) {
				t.Errorf("row %q does not contain %q", line, tc.want)
			}
			if tc.wantN != "-" && !strings.Contains(line, tc.wantN) {
				t.Errorf("row %q does not contain %q", line, tc.wantN)
			}
			if tc.rss == nil && strings.Contains(line, "✓") {
				t.Errorf("row %q judges the goal on a noisy delta", line)
			}
		})
	}
}
