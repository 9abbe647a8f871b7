package eligibility

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/cespare/xxhash/v2"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/placeholder"
)

// wholeLineHashes is the line hashing lineHasher streams, stated on the
// text held whole: split at "\n", a numbered line (placeholder.LineNumber)
// hashed as its separator and the rest (lineHash), with its number in
// nums; any other line hashed as it is.
func wholeLineHashes(text string) (hashes []uint64, nums []int32) {
	lines := strings.Split(text, "\n")
	hashes = make([]uint64, len(lines))
	for i, l := range lines {
		if num, rest, ok := placeholder.LineNumber(l); ok {
			if nums == nil {
				nums = make([]int32, len(lines))
			}
			nums[i] = int32(num)
			sep := strings.TrimLeft(l[:len(l)-len(rest)], " 0123456789")
			hashes[i] = lineHash(xxhash.Sum64String(rest), sep)
		} else {
			hashes[i] = lineHash(xxhash.Sum64String(l), "")
		}
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
	// string or as bytes; one read from elsewhere comes through the read
	// buffer, in pieces of the reader's sizes. Its size known (then a
	// piece holding it all is counted first) or not.
	for _, size := range []int{0, len(text)} {
		readers := []io.Reader{strings.NewReader(text), bytes.NewReader([]byte(text)), &cutReader{s: text, cuts: cuts}}
		for _, r := range readers {
			lh := lineHasher{size: size}
			if err := lh.readFrom(r); err != nil {
				t.Fatal(err)
			}
			rh, rn := lh.result()
			if fmt.Sprint(wh) != fmt.Sprint(rh) || fmt.Sprint(wn) != fmt.Sprint(rn) {
				t.Fatalf("text %q read from %T (size %d): hashes %v nums %v, whole %v %v", text, r, size, rh, rn, wh, wn)
			}
		}
	}
	checkNumbering(t, text, wh, wn, cuts)
}

// checkNumbering: a numbered line's hash has the lowest bit set and a
// plain line's not, so the two never equal; and the text with every
// numbered line renumbered (another number, no leading spaces) hashes
// the same, streamed in the same pieces, with the new numbers.
func checkNumbering(t *testing.T, text string, wh []uint64, wn []int32, cuts []int) {
	t.Helper()
	lines := strings.Split(text, "\n")
	for i, h := range wh {
		if numbered := wn != nil && wn[i] > 0; numbered != (h&1 == 1) {
			t.Fatalf("text %q line %d (%q): numbered %v, hash %#x", text, i+1, lines[i], numbered, h)
		}
	}
	if wn == nil {
		return
	}
	for i, l := range lines {
		if n, rest, ok := placeholder.LineNumber(l); ok {
			sep := strings.TrimLeft(l[:len(l)-len(rest)], " 0123456789")
			lines[i] = fmt.Sprintf("%d%s%s", n%9999999+1+i%3, sep, rest)
		}
	}
	moved := strings.Join(lines, "\n")
	mh, mn := streamLineHashes(moved, cuts)
	if fmt.Sprint(wh) != fmt.Sprint(mh) {
		t.Fatalf("text %q renumbered as %q: hashes %v, before %v", text, moved, mh, wh)
	}
	for i := range wn {
		if (wn[i] > 0) != (mn[i] > 0) {
			t.Fatalf("text %q renumbered as %q: numbers %v, before %v", text, moved, mn, wn)
		}
	}
}

// cutReader reads s in pieces of the given sizes (cycled), and is not an
// io.WriterTo: lineHasher.readFrom reads it through its buffer.
type cutReader struct {
	s    string
	cuts []int
	i    int
}

func (r *cutReader) Read(p []byte) (int, error) {
	if len(r.s) == 0 {
		return 0, io.EOF
	}
	n := len(r.s)
	if len(r.cuts) > 0 {
		n = min(n, max(1, r.cuts[r.i%len(r.cuts)]))
		r.i++
	}
	n = copy(p, r.s[:n])
	r.s = r.s[n:]
	return n, nil
}

// TestLineHash: the four separators give four hashes of the same rest,
// none equal to a plain line's.
func TestLineHash(t *testing.T) {
	seen := map[uint64]string{}
	for _, h := range []uint64{0, 1, 0xfffffffffffffffe, 0xffffffffffffffff, xxhash.Sum64String("x")} {
		clear(seen)
		for _, sep := range []string{"", "→", "\t", ": ", "| "} {
			lh := lineHash(h, sep)
			if o, ok := seen[lh]; ok {
				t.Fatalf("hash %#x: separators %q and %q both give %#x", h, o, sep, lh)
			}
			seen[lh] = sep
			if numbered := sep != ""; numbered != (lh&1 == 1) {
				t.Fatalf("hash %#x separator %q: %#x", h, sep, lh)
			}
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
// hashes in any pieces (written, or read through the buffer) must agree
// with hashing the text held whole, numbered lines must never equal
// plain ones, and renumbering a numbered line must not change its hash.
func FuzzLineHasher(f *testing.F) {
	f.Add("     1→\tpackage main\n     2→\t\n", uint8(3))
	f.Add("12: x\n  0|y\n123456789→z", uint8(1))
	f.Add("x\n     7→x\n7\tx\n   8: x\n9| x\n", uint8(0x35))
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
