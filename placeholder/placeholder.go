// Package placeholder is the one definition of the placeholder prunesched
// leaves where a payload was removed: its text (Render) and its size
// (Tokens). Eligibility nets its savings with Tokens, the scheduler prices
// applications with it and projections renders with Render, so the size
// assumed when deciding is the size of the text sent. It imports only
// events and events/tokens: every core may use it.
//
// A placeholder carries identity, never content: the tool, the source (a
// path relative to the session's cwd, a URL, or a short argument), the rung
// and reason code, the count of tokens removed as the certificate records
// it, the surviving item and a short recovery handle, after the name of
// the recovery tool the model can call (agenttools.Recover). The full certificate
// stays in the log.
package placeholder

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/agenttools"
)

// Limits on what a placeholder quotes.
const (
	// SourceBytes is the longest source shown whole; a longer one is
	// elided in the middle ("…"), keeping its start and its file name.
	SourceBytes = 80
	// ArgBytes bounds the one argument value a placeholder quotes for a
	// call that names no path or URL (a shell command, a search pattern).
	ArgBytes = 40
	// ResidueMsgBytes and ResidueSkelBytes bound the residue of an errored
	// call quoted in an output's placeholder.
	ResidueMsgBytes  = 240
	ResidueSkelBytes = 120
)

// Parts of a tool call an item can be.
const (
	PartInput  = "input"
	PartOutput = "output"
)

// Spec is what a placeholder may say about a removed item.
type Spec struct {
	// Part is "output", "input" or "" (a message's text); Role is a
	// message's author.
	Part string
	Role events.Role
	// Tool names the call; Source is what it read (see Source).
	Tool   string
	Source string
	// Rung and Reason say why the item left.
	Rung   events.Rung
	Reason events.Reason
	// Tokens is the count the certificate records (Mark.TokensEstimated):
	// tokens removed net of this placeholder.
	Tokens int
	// Survivor is the handle (see Handle) of the item still holding the
	// surviving copy, if any. SurvivorRemoved, when set, says that item was
	// itself removed since (its rung and reason), and SurvivorNext is the
	// handle of what it deferred to.
	Survivor        string
	SurvivorRemoved string
	SurvivorNext    string
	// Item is the removed item's own handle: what `prunesched item SESSION
	// HANDLE` and the API's item endpoint recover.
	Item string
	// Residue is what survives of an errored call, quoted in an output's
	// placeholder (an input's residue is rendered beside it).
	Residue *events.Residue
}

// Handle is the short recovery handle of the item at position index (0-based,
// in log order) of its session: "#index".
func Handle(index int) string {
	var b [24]byte
	return string(strconv.AppendInt(append(b[:0], '#'), int64(index), 10))
}

// ParseHandle returns the index a handle names, and false when s is not a
// handle.
func ParseHandle(s string) (int, bool) {
	if len(s) < 2 || s[0] != '#' {
		return 0, false
	}
	n, err := strconv.Atoi(s[1:])
	if err != nil || n < 0 || strconv.Itoa(n) != s[1:] {
		return 0, false
	}
	return n, true
}

// NamesRecovery reports whether the rendered placeholder text names the
// recovery of the item at index: it ends with the recovery tool and that
// item's handle (", context_recover #N]"), as Render writes it.
func NamesRecovery(text string, index int) bool {
	return strings.HasSuffix(text, ", "+string(agenttools.Recover)+" "+Handle(index)+"]")
}

// WriteRule writes why an item left as placeholders and the text view
// show it: "L0 DUPLICATE_OUTPUT", or the reason alone when the rule has no
// rung (errored inputs, manual prunes).
func WriteRule(b *strings.Builder, r events.Rung, why events.Reason) {
	var a [64]byte
	b.Write(appendRule(a[:0], r, why))
}

// appendRule appends the rule WriteRule writes to b.
func appendRule(b []byte, r events.Rung, why events.Reason) []byte {
	if r != events.RungNone {
		b = append(b, r...)
		b = append(b, ' ')
	}
	return append(b, why...)
}

// Render returns the placeholder text. It is deterministic and copies no
// payload beyond the one bounded argument and the residue.
func Render(p Spec) string { return string(appendRender(make([]byte, 0, 128), p)) }

// appendRender appends the placeholder text of p to b (Render's bytes).
func appendRender(b []byte, p Spec) []byte {
	b = append(b, "[prunesched: "...)
	switch p.Part {
	case PartOutput, PartInput:
		b = append(b, p.Part...)
		b = append(b, " of "...)
		b = append(b, orDash(p.Tool)...)
		if p.Source != "" {
			b = append(b, ' ')
			b = append(b, p.Source...)
		}
	default:
		b = append(b, p.Role...)
		b = append(b, " text"...)
	}
	b = append(b, " removed: "...)
	b = appendRule(b, p.Rung, p.Reason)
	b = append(b, ", "...)
	b = strconv.AppendInt(b, int64(p.Tokens), 10)
	b = append(b, " tokens"...)
	if p.Survivor != "" {
		b = append(b, ", "...)
		b = append(b, survivorLabel(p.Rung)...)
		b = append(b, ' ')
		b = append(b, p.Survivor...)
		if p.SurvivorRemoved != "" {
			b = append(b, " (since removed: "...)
			b = append(b, p.SurvivorRemoved...)
			if p.SurvivorNext != "" {
				b = append(b, ", see "...)
				b = append(b, p.SurvivorNext...)
			}
			b = append(b, ')')
		}
	}
	if r := p.Residue; r != nil {
		b = append(b, ", residue: tool "...)
		b = append(b, orDash(r.Tool)...)
		b = append(b, ", error "...)
		if r.ErrorType != "" {
			b = append(b, r.ErrorType...)
			b = append(b, ' ')
		}
		b = append(b, quote(Trunc(r.ErrorMessage, ResidueMsgBytes))...)
		if r.Skeleton != "" {
			b = append(b, ", skeleton "...)
			b = append(b, Trunc(r.Skeleton, ResidueSkelBytes)...)
		}
	}
	if p.Item != "" {
		// The recovery tool by its exact name: an agent that defers MCP
		// tools (Claude Code's ToolSearch) finds it by this name.
		b = append(b, ", "...)
		b = append(b, agenttools.Recover...)
		b = append(b, ' ')
		b = append(b, p.Item...)
	}
	return append(b, ']')
}

// renderBufs are the buffers Tokens and FitsUnder render into: sizing a
// placeholder allocates nothing once warm.
var renderBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

var counter = tokens.New()

// Tokens is the size of the placeholder p renders to, counted with the
// project's tokenizer (o200k). Eligibility nets savings with it, the
// scheduler prices applications with it: the one definition of the
// placeholder's size. p.Tokens should be the payload's tokens (an upper
// bound on the count the placeholder will state, so on its digits).
func Tokens(p Spec) int {
	bp := renderBufs.Get().(*[]byte)
	*bp = appendRender((*bp)[:0], p)
	n := count(*bp, nil)
	renderBufs.Put(bp)
	return n
}

// Sizer is Tokens, Net and FitsUnder (the same results) for one user at a
// time, as a session's eligibility core: it renders into its own buffer
// and looks pieces up in its own small cache before the shared one, so
// sizing takes no lock once warm. Not safe for concurrent use; the zero
// value is ready.
type Sizer struct {
	buf    []byte
	pieces map[string]int
	// recent are the last few handles and numbers counted, in place
	// (no string kept, nothing allocated): a survivor's handle and a
	// payload's token count recur in the placeholders of one run of
	// copies, which otherwise each take the shared cache's lock.
	recent [sizerRecent]recentEntry
	next   uint8
	// heads caches the count of a placeholder's text up to its last
	// piece (its own handle, which never recurs): the placeholders of a
	// run of copies differ only there, so one look-up replaces a dozen.
	heads map[string]int
}

// recentEntry is one handle or number a Sizer counted: its bytes
// (b[:len]) and its count.
type recentEntry struct {
	b   [recentBytes]byte
	len uint8
	n   int32
}

// sizerRecent is how many handles and numbers a Sizer remembers, and
// recentBytes the longest it keeps (longer ones are not remembered).
const (
	sizerRecent = 8
	recentBytes = 22
)

// sizerPieces bounds a Sizer's cache: the template's words, rungs, tool
// names and sources, first come. Handles and numbers (token counts), which
// rarely repeat, are looked up in the shared cache only.
const sizerPieces = 256

// sizerHeads bounds Sizer.heads; a full cache is emptied (the heads of
// a session's recent runs are the ones that recur).
const sizerHeads = 64

// Tokens is placeholder.Tokens.
func (z *Sizer) Tokens(p Spec) int {
	z.buf = appendRender(z.buf[:0], p)
	return z.count(z.buf)
}

// count is count(s, z) with the count of s up to its last piece, its
// head, cached: the pieces of s are the head's pieces and the last one
// (a piece starts at a space, so none spans the cut), and their counts
// add up.
func (z *Sizer) count(s []byte) int {
	last := lastPiece(s)
	if last == 0 {
		return count(s, z)
	}
	n, ok := z.heads[string(s[:last])]
	if !ok {
		n = count(s[:last], z)
		if z.heads == nil {
			z.heads = map[string]int{}
		} else if len(z.heads) >= sizerHeads {
			clear(z.heads)
		}
		z.heads[string(s[:last])] = n
	}
	return n + piece(z, s[last:])
}

// lastPiece is where count's last piece of s starts (0: s is one piece).
func lastPiece(s []byte) int {
	for i := len(s) - 2; i >= 1; i-- {
		if startsPiece(s, i) {
			return i
		}
	}
	return 0
}

// Net is placeholder.Net.
func (z *Sizer) Net(p Spec, payload int) int { return net(p, payload, z.Tokens) }

// FitsUnder is placeholder.FitsUnder.
func (z *Sizer) FitsUnder(p Spec, n int) bool {
	z.buf = appendRender(z.buf[:0], p)
	return len(z.buf) < n
}

// piece is countPiece through the Sizer's cache (z nil: the shared cache
// only).
func piece[T ~string | ~[]byte](z *Sizer, s T) int {
	if z == nil {
		return countPiece(s)
	}
	if unique(s) {
		return recentPiece(z, s)
	}
	if n, ok := z.pieces[string(s)]; ok {
		return n
	}
	n := countPiece(s)
	if len(z.pieces) < sizerPieces {
		if z.pieces == nil {
			z.pieces = make(map[string]int, 64)
		}
		z.pieces[string(s)] = n
	}
	return n
}

// recentPiece is countPiece of a handle or number through z.recent (an
// item's own handle, the last piece, never recurs: countPiece's tails).
func recentPiece[T ~string | ~[]byte](z *Sizer, s T) int {
	if len(s) > recentBytes || s[len(s)-1] == ']' {
		return countPiece(s)
	}
	for i := range z.recent {
		r := &z.recent[i]
		if int(r.len) == len(s) && string(r.b[:r.len]) == string(s) {
			return int(r.n)
		}
	}
	n := countPiece(s)
	r := &z.recent[z.next%sizerRecent]
	r.len = uint8(copy(r.b[:], s))
	r.n = int32(n)
	z.next++
	return n
}

// unique reports whether a piece is a handle or a number (after its
// leading space).
func unique[T ~string | ~[]byte](s T) bool {
	i := 0
	if len(s) > 1 && s[0] == ' ' {
		i = 1
	}
	return i < len(s) && (s[i] == '#' || '0' <= s[i] && s[i] <= '9')
}

// Count is the o200k token count of s, computed word by word with a
// cache: o200k's pre-tokenizer never joins a single space followed by a
// non-space to what precedes it, so splitting s before each such space
// and adding the pieces' counts gives exactly the count of s, and the
// pieces (template words, tool names, reason codes, paths) repeat across
// placeholders. Deterministic; safe for concurrent use.
func Count(s string) int { return count(s, nil) }

// count is Count of a string or of bytes (a piece of bytes is looked up
// without being copied), through z's cache when z is not nil.
func count[T ~string | ~[]byte](s T, z *Sizer) int {
	n, start := 0, 0
	for i := 1; i+1 < len(s); i++ {
		if startsPiece(s, i) {
			n += piece(z, s[start:i])
			start = i
		}
	}
	return n + piece(z, s[start:])
}

// startsPiece reports whether a piece of s starts at i (0 < i <
// len(s)-1): a space before a non-space. count splits s there, and
// Sizer.count's cache of heads relies on lastPiece cutting where count
// would.
func startsPiece[T ~string | ~[]byte](s T, i int) bool {
	return s[i] == ' ' && !isSpace(s[i+1])
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f'
}

// pieces caches countPiece, bounded: past maxPieces new pieces are
// counted but not kept.
var pieces = struct {
	sync.RWMutex
	m map[string]int
}{m: map[string]int{}}

const maxPieces = 1 << 16

func countPiece[T ~string | ~[]byte](s T) int {
	if i, ok := tailIndex(s); ok {
		if n := tails[i].Load(); n > 0 {
			return int(n)
		}
		n := counter.Count(string(s))
		tails[i].Store(int32(n))
		return n
	}
	pieces.RLock()
	n, ok := pieces.m[string(s)]
	pieces.RUnlock()
	if ok {
		return n
	}
	str := string(s)
	n = counter.Count(str)
	pieces.Lock()
	if len(pieces.m) < maxPieces {
		pieces.m[str] = n
	}
	pieces.Unlock()
	return n
}

// tails caches countPiece of " #N]", by N: the last piece of the
// placeholder of the item with handle #N (Render ends with the item's
// handle). Every item's own placeholder has one, and it never recurs in
// the session, so in the shared map it cost a look-up that misses the
// processor's caches; here the items of a session are neighbours. 0: not
// counted yet (every piece counts at least one token).
var tails [maxTails]atomic.Int32

// maxTails bounds tails: handles past it go to the shared map.
const maxTails = 1 << 16

// tailIndex returns N when s is exactly " #N]" (N in decimal, as Handle
// writes it, below maxTails).
func tailIndex[T ~string | ~[]byte](s T) (int, bool) {
	if len(s) < 4 || len(s) > 8 || s[0] != ' ' || s[1] != '#' || s[len(s)-1] != ']' || s[2] == '0' && len(s) > 4 {
		return 0, false
	}
	n := 0
	for i := 2; i < len(s)-1; i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n < maxTails
}

// FitsUnder reports cheaply whether the placeholder of p is certainly
// smaller than n tokens (no token is shorter than a byte), so a caller
// need only count when it returns false.
func FitsUnder(p Spec, n int) bool {
	bp := renderBufs.Get().(*[]byte)
	*bp = appendRender((*bp)[:0], p)
	size := len(*bp)
	renderBufs.Put(bp)
	return size < n
}

// Net is what removing an item of payload tokens saves once the
// placeholder p is in its place: payload minus the placeholder's Tokens, 0
// when the placeholder is not smaller. p.Tokens is set to payload first.
func Net(p Spec, payload int) int { return net(p, payload, Tokens) }

// net is Net with the placeholder sized by tokens.
func net(p Spec, payload int, tokens func(Spec) int) int {
	p.Tokens = payload
	if ph := tokens(p); ph < payload {
		return payload - ph
	}
	return 0
}

// Saves reports whether removing an item of payload tokens for the
// placeholder p nets a saving (Net > 0), counting tokens only when the
// placeholder's byte length does not already settle it.
func Saves(p Spec, payload int) bool {
	p.Tokens = payload
	return FitsUnder(p, payload) || Tokens(p) < payload
}

// Source returns what a placeholder names as a call's source, from its
// arguments (JSON) and the session's cwd: the path it reads (relative to
// cwd, elided in the middle past SourceBytes), else its URL, else one short
// argument (a command or pattern, quoted, cut at ArgBytes), else "".
func Source(args []byte, cwd string) string {
	var obj map[string]any
	if len(args) == 0 || json.Unmarshal(args, &obj) != nil {
		return ""
	}
	return SourceOf(obj, cwd)
}

// SourceOf is Source for arguments already decoded.
func SourceOf(obj map[string]any, cwd string) string {
	for _, k := range pathKeys {
		if s, ok := obj[k].(string); ok && s != "" {
			return Elide(Rel(s, cwd), SourceBytes)
		}
	}
	for _, k := range urlKeys {
		if s, ok := obj[k].(string); ok && s != "" {
			return Elide(s, SourceBytes)
		}
	}
	for _, k := range argKeys {
		if s, ok := obj[k].(string); ok && s != "" {
			return quote(Trunc(oneLine(s), ArgBytes))
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if s, ok := obj[k].(string); ok && s != "" && len(s) <= ArgBytes && !strings.ContainsAny(s, "\n\r") {
			return quote(s)
		}
	}
	return ""
}

var (
	pathKeys = []string{"file_path", "filePath", "path", "notebook_path", "file", "filename"}
	urlKeys  = []string{"url", "uri"}
	argKeys  = []string{"command", "cmd", "pattern", "query", "description"}
)

// Rel makes path relative to cwd when it lies under it.
func Rel(path, cwd string) string {
	cwd = strings.TrimSuffix(cwd, "/")
	if cwd != "" && strings.HasPrefix(path, cwd+"/") {
		return path[len(cwd)+1:]
	}
	return path
}

// Elide shortens s past n bytes by cutting its middle ("…"), keeping the
// start and the end (the file name), on rune boundaries.
func Elide(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "…"
	keep := n - len(ell)
	head := keep / 3
	tail := keep - head
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	start := len(s) - tail
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[:head] + ell + s[start:]
}

// Trunc cuts s to at most n bytes on a rune boundary, marking a cut with
// "…" (counted in n when n allows).
func Trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "…"
	cut := max(n-len(ell), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ell
}

func oneLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i] + "…"
	}
	return s
}

// survivorLabel names the survivor's relation: the identical copy (L0),
// the copy of the same version (L1), the newer observation (L2), else the
// item kept.
func survivorLabel(r events.Rung) string {
	switch r {
	case events.L0, events.L1:
		return "copy"
	case events.L2:
		return "newer"
	}
	return "kept"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// unescapeHTML undoes json.Marshal's escapes of <, > and & so the model
// sees them (a Replacer is safe for concurrent use).
var unescapeHTML = strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&")

// quote returns s as a JSON string without HTML escaping.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return unescapeHTML.Replace(string(b))
}
