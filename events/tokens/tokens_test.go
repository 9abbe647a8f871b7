package tokens

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/prunesched/prunesched/events"
)

// whole counts s without cutting it.
func whole(t testing.TB, c *Counter, s string) int {
	t.Helper()
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	return c.countOne(s)
}

// mixed builds a text of lines mixing the shapes the pre-split treats
// apart: words in every case, contractions, digits, punctuation runs,
// whitespace runs with and without line feeds, CRLF, non-Latin letters,
// marks and invalid UTF-8.
func mixed(r *rand.Rand, n int) string {
	atoms := []string{"word", "Word", "WORD", "it's", "WE'LL", "x", " ", "  ", "\t", "\n", "\r\n", "\n\n", " \n", "\n ", "123", "4567890",
		"...", "//", "/\n", "->", "{", "}", "\"", "日本語", "Ωmega", "é", "e\u0301", "ſ", "'s", "'", "\xff", "\xe2\x82", "\u00a0", "\u2028", "_", "1a", "a1"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(atoms[r.IntN(len(atoms))])
	}
	return b.String()
}

func TestCountPartsAddUp(t *testing.T) {
	c := New()
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 12; i++ {
		s := mixed(r, 2*partBytes+r.IntN(6*partBytes))
		if got, want := c.Count(s), whole(t, c, s); got != want {
			t.Fatalf("text %d (%d bytes, %d parts): Count %d, whole %d", i, len(s), len(splitExact(s, partBytes)), got, want)
		}
	}
}

func TestSplitExactCuts(t *testing.T) {
	tests := []struct {
		s    string
		min  int
		want []string
	}{
		{"ab\ncd\nef", 2, []string{"ab\n", "cd\n", "ef"}},
		{"ab\ncd\nef", 3, []string{"ab\ncd\n", "ef"}},
		{"ab\n cd\n1ef", 2, []string{"ab\n cd\n1ef"}}, // no line feed before a letter
		{"abcd", 1, []string{"abcd"}},
		{"a\nb", 1, []string{"a\n", "b"}},
		{"a\n\xffb", 1, []string{"a\n\xffb"}},
	}
	for _, tt := range tests {
		got := splitExact(tt.s, tt.min)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("splitExact(%q, %d) = %q, want %q", tt.s, tt.min, got, tt.want)
		}
	}
}

// TestCountPartsRealTraces checks the cut on the shared real traces
// (skipped without them): the start of every file, counted in parts and
// whole.
func TestCountPartsRealTraces(t *testing.T) {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		if filepath.Dir(dir) == dir {
			t.Skip("module root not found")
		}
		dir = filepath.Dir(dir)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "..", "shared", "traces", "*", "*"))
	if len(files) == 0 {
		t.Skip("no shared traces")
	}
	c := New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// The first 24 KiB of each (several parts): the tokenizer is slow.
		if len(b) > 24<<10 {
			b = b[:24<<10]
		}
		s := string(b)
		if got, want := c.Count(s), whole(t, c, s); got != want {
			t.Errorf("%s: Count %d, whole %d", f, got, want)
		}
	}
}

func FuzzCountParts(f *testing.F) {
	f.Add("ab\ncd\n ef\n\ngh's\r\nIJ'LL\n123\n...\n/\nx")
	f.Add("日本\n語\n\xff\nβ  \n\tγ")
	c := New()
	f.Fuzz(func(t *testing.T, s string) {
		// Repeat the input so it is long enough to be cut.
		s = strings.Repeat(s+"\nz", 2*partBytes/(len(s)+2)+1)
		if got, want := c.Count(s), whole(t, c, s); got != want {
			t.Fatalf("Count %d, whole %d", got, want)
		}
	})
}

func BenchmarkCount(b *testing.B) {
	s := mixed(rand.New(rand.NewPCG(3, 4)), 64<<10)
	c := New()
	_ = c.Check()
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		c.Count(s)
	}
}

// TestCountContentRemembers: a payload counted by content address gives
// Count's answer, the first time and from memory, under concurrent use,
// and the memory stays bounded.
func TestCountContentRemembers(t *testing.T) {
	c := New()
	r := rand.New(rand.NewPCG(3, 4))
	texts, want := make([]string, 8), make([]int, 8)
	for i := range texts {
		texts[i] = mixed(r, 100+r.IntN(2*partBytes))
		want[i] = c.Count(texts[i])
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2 * len(texts) {
				k := (i + g) % len(texts)
				if got := c.CountContent(events.HashBytes([]byte(texts[k])), texts[k]); got != want[k] {
					t.Errorf("text %d: CountContent %d, Count %d", k, got, want[k])
				}
			}
		})
	}
	wg.Wait()
	c.mu.Lock()
	n := len(c.known)
	c.mu.Unlock()
	if n != len(texts) {
		t.Fatalf("remembered %d counts, want %d", n, len(texts))
	}
	// A remembered count is answered by address: the text is not read.
	if got := c.CountContent(events.HashBytes([]byte(texts[0])), ""); got != want[0] {
		t.Fatalf("remembered count %d, want %d", got, want[0])
	}
	// Full: a new count takes the place of a remembered one.
	c.mu.Lock()
	for i := len(c.known); i < knownEntries; i++ {
		c.known[fmt.Sprintf("h%d", i)] = 1
	}
	c.mu.Unlock()
	for i := range 10 {
		s := fmt.Sprintf("new %d", i)
		if got, want := c.CountContent(events.HashBytes([]byte(s)), s), c.Count(s); got != want {
			t.Fatalf("count of %q when full: %d, want %d", s, got, want)
		}
	}
	c.mu.Lock()
	n = len(c.known)
	c.mu.Unlock()
	if n != knownEntries {
		t.Fatalf("remembered %d counts, want the bound %d", n, knownEntries)
	}
}

// TestSplitBounded: chunks are never over the limit, join back to the
// text, end at an exact cut when the text has one and otherwise at a line
// feed, a space or a character boundary.
func TestSplitBounded(t *testing.T) {
	tests := []struct {
		s     string
		limit int
		want  []string
	}{
		{"ab\ncd\nef", 8, []string{"ab\ncd\nef"}},
		{"ab\ncd\nefgh", 8, []string{"ab\ncd\n", "efgh"}},
		{"abcdefgh\n1234", 10, []string{"abcdefgh\n", "1234"}}, // no exact cut: the last line feed
		{"abcdefg hijk", 10, []string{"abcdefg", " hijk"}},     // before the last space
		{"xxxxxxxxxxxxxxxxxxxxxx", 10, []string{"xxxxxxxxxx", "xxxxxxxxxx", "xx"}},
		{"ééééééé", 5, []string{"éé", "éé", "éé", "é"}}, // a character boundary
		{"\xff\xff\xff\xff\xff\xff", 4, []string{"\xff\xff\xff\xff", "\xff\xff"}},
	}
	for _, tt := range tests {
		got := splitBounded(tt.s, tt.limit)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("splitBounded(%q, %d) = %q, want %q", tt.s, tt.limit, got, tt.want)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 50; i++ {
		s := mixed(r, 1+r.IntN(4000))
		limit := 8 + r.IntN(300)
		parts := splitBounded(s, limit)
		if strings.Join(parts, "") != s {
			t.Fatalf("parts of %q do not join back", s)
		}
		for _, p := range parts {
			if len(p) > limit || len(p) == 0 {
				t.Fatalf("part of %d bytes, limit %d", len(p), limit)
			}
		}
	}
}

// TestCountLargeDeterministic: a text over ChunkBytes is counted in
// chunks; the count depends on the content only (not on the number of
// CPUs), is exact when every chunk ends at an exact cut, and a text
// without any cut (one repeated character, the adversarial case) is still
// counted.
func TestCountLargeDeterministic(t *testing.T) {
	c := New()
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	// Each text is just over ChunkBytes: cut into two bounded chunks,
	// counted by one worker (GOMAXPROCS 1) or two. Longer texts only
	// repeat the same cuts, at seconds each under -race.
	lines := mixed(rand.New(rand.NewPCG(7, 8)), ChunkBytes*3/5) + "\nLast"
	lines = strings.Repeat(lines+"\nnext", 2)
	run := strings.Repeat("x", ChunkBytes+17)
	for _, s := range []string{lines, run} {
		if n := len(splitBounded(s, ChunkBytes)); n < 2 {
			t.Fatalf("%d bytes: not cut into chunks (%d)", len(s), n)
		}
		counts := map[int]bool{}
		for _, procs := range []int{1, 2, 4} {
			prev := runtime.GOMAXPROCS(procs)
			counts[c.Count(s)] = true
			runtime.GOMAXPROCS(prev)
		}
		if len(counts) != 1 {
			t.Fatalf("%d bytes: counts differ with the number of CPUs: %v", len(s), counts)
		}
		for n := range counts {
			if n <= 0 {
				t.Fatalf("%d bytes: count %d", len(s), n)
			}
		}
	}
	sum := 0
	for _, p := range splitBounded(lines, ChunkBytes) {
		sum += whole(t, c, p)
	}
	if got, exact := c.Count(lines), whole(t, c, lines); got != sum || got != exact {
		t.Fatalf("Count %d, sum of chunks %d, whole %d: every chunk ends at an exact cut", got, sum, exact)
	}
}

// TestCountSerialIsCount: counting on one goroutine gives Count's answer,
// for texts counted whole, in exact parts and in bounded chunks.
func TestCountSerialIsCount(t *testing.T) {
	c := New()
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 10, 3 * partBytes, 100 << 10, ChunkBytes + 5000} {
		s := mixed(r, n)
		if got, want := c.CountSerial(s), c.Count(s); got != want {
			t.Errorf("%d bytes: CountSerial %d, Count %d", n, got, want)
		}
	}
}
