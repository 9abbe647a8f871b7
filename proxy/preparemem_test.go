package proxy

import (
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/prunesched/prunesched/events"
)

// TestPrepareMemKeepsLargeOutputInPlace: a large tool output queued for the
// log is the string it was decoded to, hashed and kept without a copy (a
// 200 MB output was held a third time here, as bytes, which took the
// proxy past 2 × its body budget). Measured as allocated bytes
// (MemStats.TotalAlloc), not time.
func TestPrepareMemKeepsLargeOutputInPlace(t *testing.T) {
	const size = 32 << 20
	out := strings.Repeat("a long line of tool output\n", size/27)
	ev := events.New("e1", "", "s1", time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC),
		&events.ToolResult{Item: "c1", CallID: "c1", Tool: "Bash", Output: &out})
	q := &writeQueue{}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	stored, _, est, inexact, err := prepareMem(ev, counts{}, q)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	h := events.HashString(out)
	if est != h || !inexact || stored.Data.(*events.ToolResult).OutputRef.Hash != h {
		t.Fatalf("estimated %q, stored %+v: want the output's content address %s", est, stored.Data, h)
	}
	kept, ok := q.blob(h)
	if !ok || len(kept) != len(out) || unsafe.StringData(kept) != unsafe.StringData(out) {
		t.Fatalf("queued output: held %v, %d bytes, same string %v", ok, len(kept), ok && unsafe.StringData(kept) == unsafe.StringData(out))
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("preparing a %d MiB output allocated %.2f MiB", size>>20, float64(alloc)/(1<<20))
	if alloc > 1<<20 {
		t.Errorf("preparing a %d MiB output allocated %.1f MiB: it was copied", size>>20, float64(alloc)/(1<<20))
	}
}
