//go:build benchprof

package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
)

// TestRebuildCPU measures what `bench --only log` compares, the raw
// ordered replay and the projection rebuild of the same log, by the
// resources they take rather than by their rate alone: process CPU,
// bytes allocated and GC cycles per message, over rounds that alternate
// the two (so a busy machine weighs on both alike), with the runtime's own
// accounts of the CPU spent on GC and of the time its Ps sat idle (near
// zero: both phases are CPU-bound on two cores, and the wall ratio follows
// the CPU ratio). It asserts nothing.
// With PRUNESCHED_REBUILD_PROF=DIR it writes one CPU profile per phase
// and round there (merge them with `go tool pprof -proto DIR/rebuild-*`).
//
//	go test -tags benchprof -run TestRebuildCPU -v ./internal/bench/
func TestRebuildCPU(t *testing.T) {
	ctx := context.Background()
	b := newRunner(Config{TempDir: t.TempDir()}, policy.Default(), &Result{})
	r, err := b.startLog(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	p, stop, err := b.startPipeline(r)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 16 {
		evs := b.w.session("", fmt.Sprintf("pipe%02d", i), 2000)
		for len(evs) > 0 {
			n := min(100, len(evs))
			if err := appendEvents(ctx, r.st, evs[:n]); err != nil {
				t.Fatal(err)
			}
			evs = evs[n:]
		}
	}
	if err := p.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	stop()
	last, err := r.st.StreamLastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("PRUNESCHED_REBUILD_PROF")
	stream, err := readStream(ctx, r, last)
	if err != nil {
		t.Fatal(err)
	}
	if dump := os.Getenv("PRUNESCHED_REBUILD_DUMP"); dump != "" {
		if err := writeStream(dump, stream); err != nil {
			t.Fatal(err)
		}
	}
	measureOffline(t, stream, dir)
	phases := []string{"replay", "rebuild"}
	const rounds = 12 // the first is a warm-up, not counted
	var use [2]usage
	var best [2]float64
	for round := range rounds {
		for i, phase := range phases {
			var prof *os.File
			if dir != "" && round > 0 {
				if prof, err = os.Create(filepath.Join(dir, fmt.Sprintf("%s-%02d.prof", phase, round))); err != nil {
					t.Fatal(err)
				}
				if err := pprof.StartCPUProfile(prof); err != nil {
					t.Fatal(err)
				}
			}
			u0 := readUsage()
			var rate float64
			if i == 0 {
				rate, err = rawReplay(ctx, r, last)
			} else {
				rate, err = b.rebuild(ctx, r, last)
			}
			if err != nil {
				t.Fatal(err)
			}
			if prof != nil {
				pprof.StopCPUProfile()
				_ = prof.Close()
			}
			if round > 0 {
				use[i].add(readUsage().sub(u0))
				best[i] = max(best[i], rate)
			}
		}
	}
	n := float64(last) * (rounds - 1)
	t.Logf("%d messages, %d rounds; best rates: replay %.0f, rebuild %.0f msgs/s (ratio %.2f)", last, rounds-1, best[0], best[1], best[1]/best[0])
	for i, phase := range phases {
		u := use[i]
		t.Logf("%-7s per message: wall %.2f µs, CPU %.2f µs (GC %.2f µs, Ps idle %.2f µs), %.0f bytes allocated; %.1f GC cycles per run",
			phase, u.wall.Seconds()*1e6/n, u.cpu.Seconds()*1e6/n, u.gcCPU.Seconds()*1e6/n, u.idle.Seconds()*1e6/n, float64(u.alloc)/n, float64(u.gcs)/(rounds-1))
	}
	t.Logf("ratio as the bench reports it (replay time / rebuild time): wall %.2f, CPU %.2f", float64(use[0].wall)/float64(use[1].wall), float64(use[0].cpu)/float64(use[1].cpu))
}

// measureOffline logs the CPU per message of the rebuild's own work apart
// from NATS: decoding every message as the projection worker does (one
// events.Decoder), and
// observing the decoded events into fresh sessions (best of 5 rounds,
// the first a warm-up).
func measureOffline(t *testing.T, stream [][]byte, dir string) {
	var best [2]usage
	for round := range 6 {
		var prof *os.File
		if dir != "" && round > 0 {
			var err error
			if prof, err = os.Create(filepath.Join(dir, fmt.Sprintf("offline-%02d.prof", round))); err != nil {
				t.Fatal(err)
			}
			if err := pprof.StartCPUProfile(prof); err != nil {
				t.Fatal(err)
			}
		}
		u0 := readUsage()
		evs := make([]events.Event, len(stream))
		var d events.Decoder
		for i, b := range stream {
			ev, err := d.Decode(b)
			if err != nil {
				t.Fatalf("message %d: %v", i+1, err)
			}
			ev.Seq = uint64(i + 1)
			evs[i] = ev
		}
		u1 := readUsage()
		observeAll(evs)
		u2 := readUsage()
		if prof != nil {
			pprof.StopCPUProfile()
			_ = prof.Close()
		}
		for i, u := range [2]usage{u1.sub(u0), u2.sub(u1)} {
			if round == 1 || round > 1 && u.cpu < best[i].cpu {
				best[i] = u
			}
		}
	}
	n := float64(len(stream))
	for i, what := range []string{"decode", "observe"} {
		t.Logf("offline %-7s per message (best of 5): CPU %.3f µs, %.0f bytes allocated", what, best[i].cpu.Seconds()*1e6/n, float64(best[i].alloc)/n)
	}
}

// observeAll observes evs into one fresh session each, as the projection
// worker applies them.
func observeAll(evs []events.Event) map[[2]string]*projections.Session {
	sessions := map[[2]string]*projections.Session{}
	for _, ev := range evs {
		k := [2]string{ev.TenantOrDefault(), ev.Session}
		s := sessions[k]
		if s == nil {
			s = projections.NewSession(k[0], k[1])
			sessions[k] = s
		}
		s.Observe(ev)
	}
	return sessions
}

// readStream returns the data of the event stream's messages 1..last.
func readStream(ctx context.Context, r *logRig, last uint64) ([][]byte, error) {
	st, err := r.st.JS().Stream(ctx, events.StreamName)
	if err != nil {
		return nil, fmt.Errorf("read stream: %w", err)
	}
	out := make([][]byte, 0, last)
	for seq := uint64(1); seq <= last; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			return nil, fmt.Errorf("read message %d: %w", seq, err)
		}
		out = append(out, m.Data)
	}
	return out, nil
}

// writeStream writes the messages one per line (the encoded events hold
// no newline).
func writeStream(file string, stream [][]byte) error {
	return os.WriteFile(file, bytes.Join(append(stream, nil), []byte("\n")), 0o644)
}

// usage is what a phase took.
type usage struct {
	wall, cpu  time.Duration
	alloc, gcs uint64
	// gcCPU and idle are the runtime's estimates (runtime/metrics) of
	// the CPU time spent on GC (background marking, assists, pauses)
	// and of the time Ps were idle, over all GOMAXPROCS.
	gcCPU, idle time.Duration
}

func (u *usage) add(v usage) {
	u.wall += v.wall
	u.cpu += v.cpu
	u.alloc += v.alloc
	u.gcs += v.gcs
	u.gcCPU += v.gcCPU
	u.idle += v.idle
}

func (u usage) sub(v usage) usage {
	return usage{wall: u.wall - v.wall, cpu: u.cpu - v.cpu, alloc: u.alloc - v.alloc, gcs: u.gcs - v.gcs,
		gcCPU: u.gcCPU - v.gcCPU, idle: u.idle - v.idle}
}

// readUsage reads the wall clock, the process's CPU time, the bytes allocated
// and the GC cycles so far.
func readUsage() usage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/idle:cpu-seconds"}}
	metrics.Read(s)
	return usage{
		wall:  time.Duration(time.Now().UnixNano()),
		cpu:   time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		alloc: s[0].Value.Uint64(),
		gcs:   s[1].Value.Uint64(),
		gcCPU: time.Duration(s[2].Value.Float64() * 1e9),
		idle:  time.Duration(s[3].Value.Float64() * 1e9),
	}
}

// BenchmarkRebuildOffline decodes and observes a stream written by
// TestRebuildCPU with PRUNESCHED_REBUILD_DUMP=FILE (skipped without it);
// ns/op and allocations are per message.
//
//	PRUNESCHED_REBUILD_DUMP=FILE go test -tags benchprof -run '^$' -bench RebuildOffline -benchmem ./internal/bench/
func BenchmarkRebuildOffline(b *testing.B) {
	file := os.Getenv("PRUNESCHED_REBUILD_DUMP")
	if file == "" {
		b.Skip("PRUNESCHED_REBUILD_DUMP not set")
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	stream := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	decodeAll := func() []events.Event {
		evs := make([]events.Event, len(stream))
		var d events.Decoder
		for i, m := range stream {
			ev, err := d.Decode(m)
			if err != nil {
				b.Fatalf("message %d: %v", i+1, err)
			}
			ev.Seq = uint64(i + 1)
			evs[i] = ev
		}
		return evs
	}
	// perMsg reports the wall and CPU time (all threads: GC included)
	// per message of b.N runs of f.
	perMsg := func(b *testing.B, f func()) {
		b.ReportAllocs()
		u0 := readUsage()
		for b.Loop() {
			f()
		}
		u := readUsage().sub(u0)
		n := float64(b.N * len(stream))
		b.ReportMetric(float64(u.wall.Nanoseconds())/n, "ns/msg")
		b.ReportMetric(float64(u.cpu.Nanoseconds())/n, "cpu-ns/msg")
	}
	b.Run("decode", func(b *testing.B) { perMsg(b, func() { decodeAll() }) })
	evs := decodeAll()
	b.Run("observe", func(b *testing.B) { perMsg(b, func() { observeAll(evs) }) })
}
