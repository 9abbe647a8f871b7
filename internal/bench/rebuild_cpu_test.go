//go:build benchprof

package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/prunesched/prunesched/policy"
)

// TestRebuildCPU measures what `bench --only log` compares, the raw
// ordered replay and the projection rebuild of the same log, by the
// resources they take rather than by their rate alone: process CPU,
// bytes allocated and GC cycles per message, over rounds that alternate
// the two (so a busy machine weighs on both alike). It asserts nothing.
// With PRUNESCHED_REBUILD_PROF=DIR it writes one CPU profile per phase
// and round there (merge them with `go tool pprof -proto DIR/rebuild-*`).
//
//	go test -tags benchprof -run TestRebuildCPU -v ./internal/bench/
func TestRebuildCPU(t *testing.T) {
	ctx := context.Background()
	b := &runner{cfg: Config{TempDir: t.TempDir()}, pol: policy.Default(), res: &Result{}, w: newWorkload(), log: slog.New(slog.DiscardHandler)}
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
		t.Logf("%-7s per message: wall %.2f µs, CPU %.2f µs, %.0f bytes allocated; %.1f GC cycles per run",
			phase, u.wall.Seconds()*1e6/n, u.cpu.Seconds()*1e6/n, float64(u.alloc)/n, float64(u.gcs)/(rounds-1))
	}
	t.Logf("ratio as the bench reports it (replay time / rebuild time): wall %.2f, CPU %.2f", float64(use[0].wall)/float64(use[1].wall), float64(use[0].cpu)/float64(use[1].cpu))
}

// usage is what a phase took.
type usage struct {
	wall, cpu  time.Duration
	alloc, gcs uint64
}

func (u *usage) add(v usage) {
	u.wall += v.wall
	u.cpu += v.cpu
	u.alloc += v.alloc
	u.gcs += v.gcs
}

func (u usage) sub(v usage) usage {
	return usage{wall: u.wall - v.wall, cpu: u.cpu - v.cpu, alloc: u.alloc - v.alloc, gcs: u.gcs - v.gcs}
}

// readUsage reads the wall clock, the process's CPU time, the bytes allocated
// and the GC cycles so far.
func readUsage() usage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return usage{
		wall:  time.Duration(time.Now().UnixNano()),
		cpu:   time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		alloc: s[0].Value.Uint64(),
		gcs:   s[1].Value.Uint64(),
	}
}
