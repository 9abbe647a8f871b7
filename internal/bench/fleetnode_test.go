package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNodeCommands: a node starts its CPU profile into the file a
// cpuprofile line names and stops it at cpuprofile-end, starts another
// at the next line, and stops the last when its stdin closes; other
// lines are ignored.
func TestNodeCommands(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.pprof"), filepath.Join(dir, "b.pprof")
	nodeCommands(strings.NewReader(nodeProfileCmd + a + "\n" + nodeProfileEnd + "\nsomething else\n" + nodeProfileCmd + b + "\n"))
	for _, f := range []string{a, b} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("profile %s: %v", filepath.Base(f), err)
		}
	}
	// A profile that cannot be written is skipped.
	nodeCommands(strings.NewReader(nodeProfileCmd + filepath.Join(dir, "missing", "c.pprof") + "\n"))
}

// TestProcCPU: this process's CPU time read from /proc grows as it works,
// and a process that does not exist reads 0.
func TestProcCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	x := 0
	for procCPU(os.Getpid()) == 0 {
		for i := range 1 << 20 {
			x += i
		}
	}
	_ = x
	if got := procCPU(-1); got != 0 {
		t.Errorf("no such process: %v", got)
	}
}
