package proxy

import (
	"bytes"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prunesched/prunesched/events"
)

// The client resends the whole conversation with every request, so most of
// a request body is the previous body again. Parsing happens before the
// session is known, so the proxy keeps the parses of recent bodies keyed by
// content: a request whose messages array starts with the bytes of the
// first k elements of a cached array reuses their blocks (shared: blocks
// are immutable and own their bytes, their offsets count from the array's
// start) and the parse state at the end of element k (occurrence counts,
// cache_control counts, the first user message, the system text), and only
// scans and parses the elements after them.

// Bounds of a proxy's parse cache. An entry keeps its own copy of the
// array (with room to grow) and the blocks, which own their raw values;
// entries are counted at their copy's capacity plus the array's size.
const (
	parseCacheEntries = 32
	parseCacheBytes   = 128 << 20
)

// parseCache holds the parses of recent request bodies' messages arrays,
// most recent first. The zero value is ready; a nil cache caches nothing.
type parseCache struct {
	mu      sync.Mutex
	entries []*parsed
	size    int
}

// elemMark is the parse state at the end of one array element.
type elemMark struct {
	end     int        // offset after the element, relative to the array
	nblocks int        // blocks of the array through the element
	bp      cacheCount // cache_control breakpoints of the array through it
}

// parsed is the cached parse of one request's messages (input) array. It
// is immutable once cached.
type parsed struct {
	api API
	// arr is the array from its '[' through the end of its last element:
	// the cache's own copy, not a slice of the request body (which is
	// garbage once its request is done), at the start of a buffer that
	// the parse replacing this one takes over (parseCache.put).
	arr []byte
	// lookups counts the lookups reading arr; the buffer is taken over
	// only when none is (lookups are counted under the cache's lock, and
	// the entry leaves the cache under it).
	lookups atomic.Int32
	// pre is the Responses instructions value the array was parsed after
	// (their texts count as occurrences); nil when absent.
	pre    []byte
	elems  []elemMark
	blocks []*block
	// firstUserAt is the element that set the first user message (-1:
	// none), systemAt the one that set the system text (Chat Completions,
	// Responses).
	firstUserAt int
	firstUser   string
	systemAt    int
	system      string
	// plain is true when the body arr came from is events.PlainText: its
	// strings decode unchanged, and so do those of any byte-identical
	// prefix of arr.
	plain bool
}

func (e *parsed) size() int { return cap(e.arr) + len(e.arr) }

// lookup returns the cached parse that shares the most leading elements
// with arr (a request's array from its '['), and how many.
func (pc *parseCache) lookup(api API, arr []byte) (*parsed, int) {
	if pc == nil {
		return nil, 0
	}
	pc.mu.Lock()
	ents := append([]*parsed(nil), pc.entries...)
	for _, e := range ents {
		e.lookups.Add(1)
	}
	pc.mu.Unlock()
	defer func() {
		for _, e := range ents {
			e.lookups.Add(-1)
		}
	}()
	var best *parsed
	bestK := 0
	for _, e := range ents {
		if e.api != api || len(e.elems) <= bestK {
			continue
		}
		// The first element (the task) tells conversations apart cheaply.
		if e0 := e.elems[0].end; len(arr) < e0 || !bytes.Equal(arr[:e0], e.arr[:e0]) {
			continue
		}
		d := commonPrefix(arr, e.arr)
		k := sort.Search(len(e.elems), func(j int) bool { return e.elems[j].end > d })
		if k > bestK {
			best, bestK = e, k
		}
	}
	return best, bestK
}

// put caches e, replacing from (the parse it reused: the conversation has
// moved on), and evicts the least recent entries beyond the bounds. e.arr
// is a slice of its request body when put is called: put gives e its own
// copy, so the body is not kept alive by the cache (a large body read into
// memory the process has not touched before costs a page fault per 4 KiB,
// docs/performance.md "What the read costs"). The copy goes into from's
// buffer when from is still cached and no lookup reads it: its first keep
// bytes are e.arr's already (e reused from's elements through them), so
// only the rest is copied, the new elements of the conversation.
func (pc *parseCache) put(e, from *parsed, keep int) {
	if pc == nil || len(e.elems) == 0 || 2*len(e.arr) > parseCacheBytes/4 {
		return
	}
	var buf []byte
	if from != nil {
		pc.mu.Lock()
		if i := slices.Index(pc.entries, from); i >= 0 && from.lookups.Load() == 0 {
			pc.entries = slices.Delete(pc.entries, i, i+1)
			pc.size -= from.size()
			buf = from.arr
		}
		pc.mu.Unlock()
	}
	if buf == nil {
		keep = 0
	}
	e.arr = ownArr(buf, e.arr, keep)
	switch {
	case from != nil:
		// A parse reuses from only after the same instructions
		// (arrScan.start): from's own copy serves.
		e.pre = from.pre
	case e.pre != nil:
		e.pre = bytes.Clone(e.pre)
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	out := make([]*parsed, 0, len(pc.entries)+1)
	out = append(out, e)
	size := e.size()
	for _, o := range pc.entries {
		if o == from || len(out) >= parseCacheEntries || size+o.size() > parseCacheBytes {
			continue
		}
		out = append(out, o)
		size += o.size()
	}
	pc.entries, pc.size = out, size
}

// ownArr returns arr in buf when it fits (buf's first keep bytes are
// arr's already, and only the rest is copied), else in a new buffer with
// a quarter more room, for the conversation's next requests.
func ownArr(buf, arr []byte, keep int) []byte {
	if cap(buf) >= len(arr) {
		buf = buf[:len(arr)]
		copy(buf[keep:], arr[keep:])
		return buf
	}
	return append(make([]byte, 0, len(arr)+len(arr)/4), arr...)
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	const chunk = 4096
	for i+chunk <= n && bytes.Equal(a[i:i+chunk], b[i:i+chunk]) {
		i += chunk
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// arrScan is one parse's pass over the messages (input) array. Its hook,
// run by the top-level scan in place of skipping the array, looks up the
// longest cached prefix and splits only the rest of the array into
// elements, so the array is scanned once and the prefix not at all.
type arrScan struct {
	pc   *parseCache
	api  API
	body []byte

	ok   bool // the hook split the array
	off  int  // offset of the array's '[' in body
	from *parsed
	k    int    // leading elements reused from from
	rest []elem // the elements after them (offsets in body)

	// check makes the parse check the body's text (parseChecked) before
	// caching it; checked, plain and textErr are the check's outcome.
	check bool
	// later leaves the parse to be cached once the request is forwarded
	// (conversation.cacheParse) instead of at the parse's end.
	later   bool
	checked bool
	plain   bool
	textErr error
}

// checkText checks the body's text as events.CheckText does, once. The
// leading elements reused from a cached parse of a plain body are byte
// for byte a checked array's and are skipped: the rest (before the
// array's '[' and after the reused elements, both cut between JSON tokens,
// so no UTF-8 sequence or escape spans a cut) is checked with
// events.PlainText, and only a body that is not plain takes the full
// check.
func (a *arrScan) checkText() error {
	if a.checked {
		return a.textErr
	}
	a.checked = true
	b := a.body
	if a.ok && a.from != nil && a.from.plain && a.k > 0 {
		end := a.off + a.from.elems[a.k-1].end
		a.plain = events.PlainText(b[:a.off]) && events.PlainText(b[end:])
	} else {
		a.plain = events.PlainText(b)
	}
	if !a.plain {
		a.textErr = events.CheckText(b)
	}
	return a.textErr
}

func (a *arrScan) hook(i int) (int, error) {
	b := a.body
	if i >= len(b) || b[i] != '[' {
		return skipValue(b, i)
	}
	from, k := a.pc.lookup(a.api, b[i:])
	pos, first := i+1, true
	if k > 0 {
		pos, first = i+from.elems[k-1].end, false
	}
	rest, end, err := scanElems(b, pos, first, 0)
	if err != nil {
		// Malformed: skip it as before; the parse reports the error.
		return skipValue(b, i)
	}
	a.ok, a.off, a.from, a.k, a.rest = true, i, from, k, rest
	return end, nil
}

// arrParse is the running state of an array parse.
type arrParse struct {
	a     *arrScan
	c     *conversation
	occ   *occurrences
	marks []elemMark
	bp    cacheCount
	// firstUserAt and systemAt are as in parsed.
	firstUserAt int
	systemAt    int
	// calls are the tool calls of the parsed elements by call id; earlier
	// ones are found in the reused blocks (toolCall).
	calls map[string]*block
}

// start begins the array parse of c after the top-level scan found the
// array member m: it takes the reused prefix (blocks, counts, first user
// message, system text) or, when the hook did not split the array (or the
// prefix was parsed after other instructions), splits it now. occ holds
// the occurrences counted before the array. It returns the elements to
// parse; element j of them is element first+j of the array.
func (a *arrScan) start(c *conversation, m *member, occ *occurrences, pre []byte) (*arrParse, []elem, int, error) {
	if !a.ok || a.off != m.off || (a.from != nil && !bytes.Equal(a.from.pre, pre)) {
		els, err := scanArray(m.val, m.off)
		if err != nil {
			return nil, nil, 0, err
		}
		a.ok, a.off, a.from, a.k, a.rest = true, m.off, nil, 0, els
	}
	ap := &arrParse{a: a, c: c, occ: occ, firstUserAt: -1, systemAt: -1, calls: map[string]*block{}}
	c.arrOff, c.arrBlocks = a.off, len(c.blocks)
	ap.marks = make([]elemMark, a.k, a.k+len(a.rest))
	if f := a.from; f != nil && a.k > 0 {
		copy(ap.marks, f.elems[:a.k])
		last := f.elems[a.k-1]
		prefix := f.blocks[:last.nblocks:last.nblocks]
		c.blocks = append(make([]*block, 0, len(c.blocks)+len(prefix)+2*len(a.rest)+2), c.blocks...)
		c.blocks = append(c.blocks, prefix...)
		ap.bp = last.bp
		if f.firstUserAt >= 0 && f.firstUserAt < a.k {
			ap.firstUserAt, c.firstUser = f.firstUserAt, f.firstUser
		}
		if f.systemAt >= 0 && f.systemAt < a.k {
			ap.systemAt, c.system = f.systemAt, f.system
		}
		// Counts of contents seen before the array (instructions) stay
		// in pre; the prefix's blocks carry the counts through it.
		occ.pre, occ.m, occ.prefix = occ.m, map[occKey]int{}, prefix
	}
	return ap, a.rest, a.k, nil
}

// firstUserSeen reports whether the first user message was seen.
func (ap *arrParse) firstUserSeen() bool { return ap.firstUserAt >= 0 }

// setFirstUser records the first user message, found in element mi.
func (ap *arrParse) setFirstUser(mi int, text string) {
	ap.firstUserAt, ap.c.firstUser = mi, text
}

// setSystem records the system text when it is the first, found in
// element mi.
func (ap *arrParse) setSystem(mi int, text string) {
	if ap.c.system == "" && text != "" {
		ap.systemAt, ap.c.system = mi, text
	}
}

// toolCall returns the last tool call with the id before the element being
// parsed, or nil.
func (ap *arrParse) toolCall(id string) *block {
	if b := ap.calls[id]; b != nil {
		return b
	}
	for i := ap.c.arrBlocks + ap.prefixBlocks() - 1; i >= ap.c.arrBlocks; i-- {
		if b := ap.c.blocks[i]; b.kind == bToolUse && b.callID == id {
			return b
		}
	}
	return nil
}

func (ap *arrParse) prefixBlocks() int {
	if ap.a.k == 0 {
		return 0
	}
	return ap.marks[ap.a.k-1].nblocks
}

// addCall records a tool call parsed in this request.
func (ap *arrParse) addCall(b *block) { ap.calls[b.callID] = b }

// endElem records the state at the end of element e.
func (ap *arrParse) endElem(e elem) {
	ap.marks = append(ap.marks, elemMark{end: e.off + len(e.val) - ap.a.off, nblocks: len(ap.c.blocks) - ap.c.arrBlocks, bp: ap.bp})
}

// finish caches the parse when the request is an agent turn (the only ones
// the proxy processes), or with a.later leaves it on the conversation for
// cacheParse. pre is as in parsed.
//
// The blocks parsed from this body keep their raw values in place in it
// until the parse is cached: then each takes its own copy (ownRaw), so that
// a block reused by later requests does not keep this body alive. With
// a.later that copy (as large as the request's new outputs) is made after
// forwarding, not before.
func (ap *arrParse) finish(pre []byte) {
	a, c := ap.a, ap.c
	if a.pc == nil || !c.tools || len(ap.marks) == 0 {
		return
	}
	if a.check && a.checkText() != nil {
		return // parseChecked refuses the body
	}
	e := &parsed{
		api: a.api, arr: a.body[a.off : a.off+ap.marks[len(ap.marks)-1].end], pre: pre,
		elems: ap.marks, blocks: c.blocks[c.arrBlocks:len(c.blocks):len(c.blocks)],
		firstUserAt: ap.firstUserAt, systemAt: ap.systemAt, plain: a.check && a.plain,
	}
	if ap.firstUserAt >= 0 {
		e.firstUser = c.firstUser
	}
	if ap.systemAt >= 0 {
		e.system = c.system
	}
	pp := &pendingParse{pc: a.pc, e: e, from: a.from, fresh: e.blocks[ap.prefixBlocks():]}
	if a.from != nil && a.k > 0 {
		pp.keep = a.from.elems[a.k-1].end
	}
	if a.later {
		c.pending = pp
		return
	}
	pp.put()
}

// pendingParse is a parse waiting to be cached: e, which replaces from
// (whose first keep bytes of array it shares), and the blocks parsed from
// its body (fresh), whose raw values are still in place in the body.
type pendingParse struct {
	pc      *parseCache
	e, from *parsed
	keep    int
	fresh   []*block
	once    sync.Once
}

// put gives the fresh blocks their own raw values and caches the parse,
// once. Until then no other request can reach the fresh blocks (they
// are reached through the cache), and once cached they are immutable.
func (pp *pendingParse) put() {
	pp.once.Do(func() {
		for _, b := range pp.fresh {
			b.raw = ownRaw(b.raw)
		}
		pp.pc.put(pp.e, pp.from, pp.keep)
	})
}

// cacheParse caches the parse of c's messages array that the parse left
// for after forwarding (arrScan.later); nothing when there is none. Call it
// once the request is forwarded, when nothing reads c's blocks' raw values
// any more: the decision and the facts were made from them before.
func (c *conversation) cacheParse() {
	if c != nil && c.pending != nil {
		c.pending.put()
	}
}
