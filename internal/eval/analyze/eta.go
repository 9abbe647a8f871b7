package analyze

import (
	"fmt"
	"os"
	"time"
)

// eta estimates the time left to read a batch of files from the bytes read
// so far (files differ in size by orders of magnitude, so bytes predict
// better than file counts). It is progress only: nothing decided depends
// on it.
type eta struct {
	now         func() time.Time
	start       time.Time
	sizes       map[string]int64
	total, read int64
}

func newETA(files []string, now func() time.Time) *eta {
	e := &eta{now: now, start: now(), sizes: map[string]int64{}}
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			e.sizes[f] = st.Size()
			e.total += st.Size()
		}
	}
	return e
}

func (e *eta) done(file string) { e.read += e.sizes[file] }

// String is ", ETA 12s" once something was read and something is left.
func (e *eta) String() string {
	el := e.now().Sub(e.start)
	if e.read == 0 || e.read >= e.total || el <= 0 {
		return ""
	}
	left := time.Duration(float64(el) * float64(e.total-e.read) / float64(e.read))
	return fmt.Sprintf(" (%.0f%% of %s, ETA %s)", 100*float64(e.read)/float64(e.total), byteSize(e.total), left.Round(time.Second))
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
