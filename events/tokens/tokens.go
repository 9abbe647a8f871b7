// Package tokens counts tokens with a real tokenizer. Tokenizing is slow, so
// prunesched counts each payload once, when it enters the log, and stores the
// count beside the content address; the render path only adds stored counts
// and must not tokenize.
package tokens

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/prunesched/prunesched/events"
	"github.com/tiktoken-go/tokenizer"
)

// Name identifies the tokenizer in reports.
const Name = "o200k_base (github.com/tiktoken-go/tokenizer v0.10.0)"

// Counter counts tokens in text. It is safe for concurrent use.
type Counter struct {
	once  sync.Once
	codec tokenizer.Codec
	err   error

	// known remembers the counts of payloads counted by content address
	// (CountContent), at most knownEntries of them.
	mu    sync.Mutex
	known map[string]int
}

// knownEntries bounds the counts a Counter remembers by content address
// (about 100 bytes each): the outputs a working set of sessions re-reads.
const knownEntries = 1 << 14

// New returns a Counter using the o200k_base encoding. The vocabulary is
// embedded in the binary; it is loaded on first use.
func New() *Counter { return &Counter{known: map[string]int{}} }

// Name returns the tokenizer's name for reports.
func (c *Counter) Name() string { return Name }

// Count returns the number of tokens in s. Invalid UTF-8 is counted with
// replacement characters rather than failing: a tool output is not ours to
// reject.
//
// A long text is counted in parts, in parallel (one goroutine per CPU):
// the tokenizer does about 1.5 MB/s, so a 60 KB tool output costs tens of
// milliseconds, which the proxy would add to the request that carries it.
// Up to ChunkBytes the parts are cut where the tokenizer's own pre-split
// always cuts (see splitExact), so the sum is exactly the count of the
// whole.
//
// A text over ChunkBytes is counted in chunks of at most ChunkBytes (see
// splitBounded), because the tokenizer's memory grows with the text it is
// given (about 40 bytes per byte: a rune copy, the merge heap), so a 60 MB
// output counted whole took gigabytes. A chunk ends where the pre-split
// always cuts when the text has such a place, otherwise at a line feed, a
// space or a character boundary; a cut inside a pre-split piece may change
// the count by a token or two. The count is a deterministic function of
// the content alone (not of the number of CPUs).
func (c *Counter) Count(s string) int {
	if c.load() != nil || s == "" {
		return 0
	}
	procs := runtime.GOMAXPROCS(0)
	var parts []string
	switch {
	case len(s) > ChunkBytes:
		parts = splitBounded(s, ChunkBytes)
	case procs < 2 || len(s) < 2*partBytes:
		return c.countOne(s)
	default:
		parts = splitExact(s, max(partBytes, len(s)/(4*procs)))
		if len(parts) == 1 {
			return c.countOne(s)
		}
	}
	counts := make([]int, len(parts))
	var (
		wg   sync.WaitGroup
		next = make(chan int, len(parts))
	)
	for i := range parts {
		next <- i
	}
	close(next)
	for range min(procs, len(parts)) {
		wg.Go(func() {
			for i := range next {
				counts[i] = c.countOne(parts[i])
			}
		})
	}
	wg.Wait()
	n := 0
	for _, k := range counts {
		if k < 0 {
			return events.EstimateTokens(len(s)) // rather than dropping the item when the codec fails
		}
		n += k
	}
	return n
}

// load loads the vocabulary once and returns the error it gave.
func (c *Counter) load() error {
	c.once.Do(func() {
		c.codec, c.err = tokenizer.Get(tokenizer.O200kBase)
	})
	return c.err
}

// CountSerial is Count on the calling goroutine alone: the same count,
// for work off a request's path (the proxy's exact counts after
// forwarding), which must not take every CPU from the requests beside it.
// It counts in parts of about partBytes, cut where the sum stays exact
// (splitExact, within ChunkBytes chunks as Count), and yields the
// processor after each (runtime.Gosched), so a goroutine made runnable
// meanwhile (a request's handler) waits for one part, not for the
// scheduler's 10 ms preemption.
func (c *Counter) CountSerial(s string) int {
	if c.load() != nil || s == "" {
		return 0
	}
	chunks := []string{s}
	if len(s) > ChunkBytes {
		chunks = splitBounded(s, ChunkBytes)
	}
	n := 0
	for _, ch := range chunks {
		for _, p := range splitExact(ch, partBytes) {
			k := c.countOne(p)
			if k < 0 {
				return events.EstimateTokens(len(s)) // as Count
			}
			n += k
			runtime.Gosched()
		}
	}
	return n
}

// CountContent is Count for a payload known by its content address hash,
// which must be events.HashBytes of s: the count is a function of the
// content, so a payload counted before (an agent re-reading an unchanged
// file, a repeated test run) is not tokenized again. It implements
// events.ContentCounter. The remembered counts are bounded (knownEntries;
// an arbitrary one makes room); a failed count is not remembered.
func (c *Counter) CountContent(hash, s string) int {
	c.mu.Lock()
	n, ok := c.known[hash]
	c.mu.Unlock()
	if ok {
		return n
	}
	n = c.Count(s)
	if c.err != nil || n < 0 {
		return n
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known == nil {
		c.known = map[string]int{}
	}
	if len(c.known) >= knownEntries {
		for k := range c.known {
			delete(c.known, k)
			break
		}
	}
	c.known[hash] = n
	return n
}

// countOne counts s in one piece; -1 when the codec fails.
func (c *Counter) countOne(s string) int {
	n, err := c.codec.Count(s)
	if err != nil {
		return -1
	}
	return n
}

// partBytes is the smallest part a long text is cut into.
const partBytes = 4 << 10

// splitExact cuts s into parts of at least minLen bytes (the last may be
// shorter) at positions right after a line feed that is followed by a
// letter. The o200k pre-split pattern never puts a line feed and a letter
// in one piece (letters pieces exclude \n; the pieces that hold a line
// feed are whitespace, or punctuation followed by [\r\n/]*), has no
// look-behind, and its one look-ahead (\s+(?!\S)) is never the piece that
// ends at such a line feed (\s*[\r\n]+ comes first and matches there):
// so the pieces of the whole are the pieces of the parts, and the counts
// add up. Invalid UTF-8 cannot span the ASCII line feed either.
func splitExact(s string, minLen int) []string {
	var parts []string
	for len(s) >= 2*minLen {
		cut := -1
		for from := minLen; from < len(s)-1; {
			i := strings.IndexByte(s[from:], '\n')
			if i < 0 {
				break
			}
			p := from + i + 1
			if p < len(s) {
				if r, _ := utf8.DecodeRuneInString(s[p:]); unicode.IsLetter(r) {
					cut = p
					break
				}
			}
			from = p
		}
		if cut < 0 {
			break
		}
		parts = append(parts, s[:cut])
		s = s[cut:]
	}
	return append(parts, s)
}

// ChunkBytes is the largest text counted in one piece: longer texts are
// counted in chunks of at most this size (Count), which bounds the
// tokenizer's memory to about 40 × ChunkBytes per CPU.
const ChunkBytes = 256 << 10

// splitBounded cuts s into chunks of at most limit bytes. Each chunk ends
// at the last place in it where the pre-split always cuts (a line feed
// followed by a letter, as splitExact), so that the counts still add up
// exactly; a chunk without one ends at its last line feed, else before its
// last space, within its second half, else at the last character boundary
// (invalid UTF-8 may be cut anywhere). The cuts depend on s and limit only.
func splitBounded(s string, limit int) []string {
	var parts []string
	for len(s) > limit {
		cut := lastExactCut(s, limit)
		if cut <= 0 {
			cut = softCut(s, limit)
		}
		parts = append(parts, s[:cut])
		s = s[cut:]
	}
	return append(parts, s)
}

// lastExactCut is the largest p in (0, limit] (p < len(s)) right after a
// line feed that is followed by a letter, or -1.
func lastExactCut(s string, limit int) int {
	end := limit
	for end > 0 {
		i := strings.LastIndexByte(s[:end], '\n')
		if i < 0 {
			return -1
		}
		if p := i + 1; p < len(s) {
			if r, _ := utf8.DecodeRuneInString(s[p:]); unicode.IsLetter(r) {
				return p
			}
		}
		end = i
	}
	return -1
}

// softCut is where a chunk of s of at most limit bytes without an exact
// cut ends: after its last line feed or before its last space in the
// second half, else at the last character boundary at or before limit.
func softCut(s string, limit int) int {
	half := limit / 2
	if i := strings.LastIndexByte(s[half:limit], '\n'); i >= 0 {
		return half + i + 1
	}
	if i := strings.LastIndexByte(s[half:limit], ' '); i > 0 {
		return half + i
	}
	p := limit
	for k := 0; k < utf8.UTFMax-1 && p > half && !utf8.RuneStart(s[p]); k++ {
		p--
	}
	if !utf8.RuneStart(s[p]) {
		return limit // not UTF-8 here: any cut will do
	}
	return p
}

// Check loads the vocabulary and reports an error if it cannot.
func (c *Counter) Check() error {
	c.Count("x")
	if c.err != nil {
		return fmt.Errorf("load tokenizer %s: %w", Name, c.err)
	}
	return nil
}

// Known returns the count remembered for the payload with content address
// hash, without counting (false when none is remembered).
func (c *Counter) Known(hash string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.known[hash]
	return n, ok
}
