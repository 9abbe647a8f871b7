package eligibility

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/placeholder"
)

// wholeLineHashes is the line hashing lineHasher streams, stated on the
// text held whole: split at "\n", a numbered line (placeholder.LineNumber)
// hashed as a zero byte, its separator and the rest, with its number in
// nums.
func wholeLineHashes(text string) (hashes []uint64, nums []int32) {
	lines := strings.Split(text, "\n")
	hashes = make([]uint64, len(lines))
	for i, l := range lines {
		h := fnv.New64a()
		if num, rest, ok := placeholder.LineNumber(l); ok {
			if nums == nil {
				nums = make([]int32, len(lines))
			}
			nums[i] = int32(num)
			h.Write([]byte{0})
			h.Write([]byte(strings.TrimLeft(l[:len(l)-len(rest)], " 0123456789")))
			h.Write([]byte(rest))
		} else {
			h.Write([]byte(l))
		}
		hashes[i] = h.Sum64()
	}
	return hashes, nums
}

// streamLineHashes hashes text through lineHasher in pieces cut at the
// given sizes (cycled).
func streamLineHashes(text string, cuts []int) ([]uint64, []int32) {
	var lh lineHasher
	b := []byte(text)
	for i := 0; len(b) > 0; i++ {
		n := len(b)
		if len(cuts) > 0 {
			n = min(n, max(1, cuts[i%len(cuts)]))
		}
		lh.write(b[:n])
		b = b[n:]
	}
	lh.end()
	return lh.result()
}

func checkLineHashes(t *testing.T, text string, cuts []int) {
	t.Helper()
	wh, wn := wholeLineHashes(text)
	sh, sn := streamLineHashes(text, cuts)
	if fmt.Sprint(wh) != fmt.Sprint(sh) || fmt.Sprint(wn) != fmt.Sprint(sn) {
		t.Fatalf("text %q cut at %v: streamed hashes %v nums %v, whole %v %v", text, cuts, sh, sn, wh, wn)
	}
	// An output held in memory is handed over whole (io.WriterTo), as a
	// string or as bytes.
	for _, r := range []io.Reader{strings.NewReader(text), bytes.NewReader([]byte(text))} {
		var lh lineHasher
		if err := lh.readFrom(r); err != nil {
			t.Fatal(err)
		}
		rh, rn := lh.result()
		if fmt.Sprint(wh) != fmt.Sprint(rh) || fmt.Sprint(wn) != fmt.Sprint(rn) {
			t.Fatalf("text %q read from %T: hashes %v nums %v, whole %v %v", text, r, rh, rn, wh, wn)
		}
	}
}

// TestLineHasherStreamsLikeWhole: hashing an output's lines as it streams
// by, cut anywhere, gives the hashes and numbers of the text held whole,
// on every case of the line-number grammar.
func TestLineHasherStreamsLikeWhole(t *testing.T) {
	cases := []string{
		"", "\n", "a", "a\nb", "a\n", "\n\n\n",
		"     1→\tpackage main\n     2→\t\n", "12\tx", "12: x", "12| x", "12:x", "12|x", "12 x",
		"0→x", "00→x", "0001→x", "12345678→x", "123456789→x", "   12", "   ", "12", "12→", "12\xe2\x86x", "12\xe2x",
		"  7: a\nb\n  8: c", strings.Repeat(" ", 200) + "3→x", strings.Repeat(" ", 200) + "x",
		"1\t\n2\t\n3\t", "\r\n1→a\r\n",
	}
	for _, c := range cases {
		for _, cuts := range [][]int{nil, {1}, {2}, {3, 1}, {5, 7, 1}} {
			checkLineHashes(t, c, cuts)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	atoms := []string{" ", "  ", "1", "0", "9", "→", "\t", ":", "|", " ", "\n", "x", "é", "12345", "\xe2", "\xe2\x86"}
	for i := 0; i < 5000; i++ {
		var b strings.Builder
		for j := r.IntN(30); j > 0; j-- {
			b.WriteString(atoms[r.IntN(len(atoms))])
		}
		checkLineHashes(t, b.String(), []int{1 + r.IntN(4), 1 + r.IntN(9)})
	}
}

// FuzzLineHasher: tool outputs are outside input; streaming their line
// hashes in any pieces must agree with hashing the text held whole.
func FuzzLineHasher(f *testing.F) {
	f.Add("     1→\tpackage main\n     2→\t\n", uint8(3))
	f.Add("12: x\n  0|y\n123456789→z", uint8(1))
	f.Fuzz(func(t *testing.T, text string, cut uint8) {
		checkLineHashes(t, text, []int{int(cut%16) + 1, int(cut/16) + 1})
	})
}

// TestSpanStreamedSameAsWhole: the same reads judged with their outputs
// inline, fetched whole (SetContent) or streamed a byte at a time
// (SetContentReader) give the same marks, byte for byte.
func TestSpanStreamedSameAsWhole(t *testing.T) {
	first, again := numbered(1, 60)+testLog("FAIL 1", 12), shifted(5, 49, 3)+testLog("FAIL 2", 12)
	blobs := map[string]string{events.HashBytes([]byte(first)): first, events.HashBytes([]byte(again)): again}
	judge := func(set func(*Core)) []events.Event {
		s := newSess(t, spanOn)
		s.ref = nil
		set(s.core)
		res := func(text string) *events.ToolResult {
			return &events.ToolResult{OutputRef: &events.ContentRef{Hash: events.HashBytes([]byte(text)), Bytes: len(text), Tokens: 900}}
		}
		s.toolR("Bash", map[string]any{"command": "cat a.go; go test"}, res(first))
		s.req()
		item := s.toolR("Bash", map[string]any{"command": "cat a.go; go test ./..."}, res(again))
		s.req()
		if err := s.core.ContentErr(); err != nil {
			t.Fatal(err)
		}
		s.want(item, events.Prune, events.ReasonSpanReference)
		return s.marks
	}
	whole := judge(func(c *Core) {
		c.SetContent(func(h string) ([]byte, error) { return []byte(blobs[h]), nil })
	})
	streamed := judge(func(c *Core) {
		c.SetContentReader(func(h string) (io.ReadCloser, error) {
			return io.NopCloser(iotest.OneByteReader(strings.NewReader(blobs[h]))), nil
		})
	})
	sameMarks(t, "streamed", streamed, whole)
}

// repeatReader reads n bytes of a repeated pattern without holding them.
type repeatReader struct {
	pat []byte
	n   int
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := 0
	for k < len(p) && r.n > 0 {
		c := copy(p[k:min(len(p), k+r.n)], r.pat[r.off:])
		k += c
		r.n -= c
		r.off = (r.off + c) % len(r.pat)
	}
	return k, nil
}

// TestSpanLargeOutputNotHeldWhole: span references over a large output
// stored by reference read it as a stream: what the judgement allocates
// is a small fraction of the output (its line hashes), not the copies of
// a whole fetch (the bytes, then a string, then its lines: more than
// twice the output, which took the proxy past its memory bound for one
// 200 MB output). Measured as allocated bytes (MemStats.TotalAlloc), not
// time. (Runs that match are read again a line at a time: bounded by the
// longest line, not measured here.)
func TestSpanLargeOutputNotHeldWhole(t *testing.T) {
	// 16 MiB: a whole fetch (over 32 MiB) is still more than four times
	// the bound on every pattern below; 32 MiB only doubled the time
	// under -race.
	const size = 16 << 20
	for _, tc := range []struct {
		name string
		pat  string
	}{
		{"one line", "x"},
		{"short lines", "ok  \tgithub.com/prunesched/prunesched/eligibility\t6.209s (cached) output line\n"},
		{"numbered lines", "  1234→\tfunc handler(w http.ResponseWriter, r *http.Request) { serve(w, r) }\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSess(t, spanOn)
			s.ref = nil
			s.core.SetContentReader(func(string) (io.ReadCloser, error) {
				return io.NopCloser(&repeatReader{pat: []byte(tc.pat), n: size}), nil
			})
			s.toolR("Bash", map[string]any{"command": "head other.log"}, &events.ToolResult{Output: strPtr(numbered(1, 40))})
			s.req()
			hash := events.HashBytes(bytes.Repeat([]byte{'y'}, 8)) // the getter ignores it
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			s.toolR("Bash", map[string]any{"command": "cat big.log"}, &events.ToolResult{
				OutputRef: &events.ContentRef{Hash: hash, Bytes: size, Tokens: size / 4}})
			runtime.ReadMemStats(&after)
			if err := s.core.ContentErr(); err != nil {
				t.Fatal(err)
			}
			// The line hashes the core keeps (8 bytes a line, 12 when
			// numbered), twice over (lineHasher's blocks, then the
			// result), and a read buffer: what streaming costs.
			lines := uint64(size/len(tc.pat)*strings.Count(tc.pat, "\n") + 1)
			bound := 2*12*lines + 2<<20
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d MiB output, %d lines: %.1f MiB allocated judging it (bound %.1f MiB)", size>>20, lines, float64(alloc)/(1<<20), float64(bound)/(1<<20))
			if alloc > bound {
				t.Errorf("judging a %d MiB output allocated %.1f MiB, over %.1f MiB (its line hashes twice and a buffer): the output is held whole", size>>20, float64(alloc)/(1<<20), float64(bound)/(1<<20))
			}
		})
	}
}

// TestIndexSpansEarlySameMarks: indexing the outputs' lines as soon as
// they are observed (IndexSpans, as the proxy does after forwarding) or
// only when the next output reads the index gives the same marks.
func TestIndexSpansEarlySameMarks(t *testing.T) {
	first, again := numbered(1, 60)+testLog("FAIL 1", 12), shifted(5, 49, 3)+testLog("FAIL 2", 12)
	judge := func(early bool) []events.Event {
		s := newSess(t, spanOn)
		s.toolR("Bash", map[string]any{"command": "cat a.go; go test"}, &events.ToolResult{Output: &first})
		if early {
			s.core.IndexSpans()
			if len(s.core.unindexed) != 0 || len(s.core.spanIdx) == 0 {
				t.Fatalf("after IndexSpans: %d outputs unindexed, %d lines indexed", len(s.core.unindexed), len(s.core.spanIdx))
			}
		}
		s.req()
		item := s.toolR("Bash", map[string]any{"command": "cat a.go; go test ./..."}, &events.ToolResult{Output: &again})
		s.req()
		s.want(item, events.Prune, events.ReasonSpanReference)
		return s.marks
	}
	sameMarks(t, "indexed early", judge(true), judge(false))
}
