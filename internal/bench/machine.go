package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// cpuAndMemory reads the CPU model and total memory from /proc (Linux);
// elsewhere both are empty.
func cpuAndMemory() (cpu, mem string) {
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) >= 2 && fields[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(fields[1], 64); err == nil {
					mem = fmt.Sprintf("%.1f GiB", kb/(1<<20))
				}
				break
			}
		}
		f.Close()
	}
	return cpu, mem
}
