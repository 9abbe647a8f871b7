package eligibility

import (
	"bytes"
	"hash/maphash"
	"io"
	"path"
	"strings"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/toolspec"
	"github.com/prunesched/prunesched/placeholder"
	"github.com/prunesched/prunesched/policy"
)

// By is the Mark.By of every automatic decision.
const By = "eligibility"

// maxReadsPerPath bounds the reads of one path kept for L2 comparisons, so
// per-event work stays bounded on sessions that read one file thousands of
// times. Older reads keep their decisions; they are just not compared again.
const maxReadsPerPath = 32

type itemKind uint8

const (
	kMessage itemKind = iota
	kInput
	kOutput
)

// Verdict slots, in the order a PRUNE is preferred (strongest evidence first).
const (
	sL0 = iota
	sL1
	sL2
	sL3
	sErr
	sL4
	sCold // L4 COLD_RECOVERABLE (the opt-in recoverable policy)
	sSpan // L1 span: a partial prune, only when nothing removes the whole item
	nSlots
)

// verdict is one rung's proposal for an item. Verdicts are immutable once set.
type verdict struct {
	decision events.Decision
	rung     events.Rung
	reason   events.Reason
	// at is the fact index at which the evidence was established.
	at       int
	survivor *item
	evidence []events.Evidence
	source   string // Recoverability.Source when known
	residue  *events.Residue
	subtask  *subtask // L3: which subtask proposed it
	// span is set on an L1 span proposal (SPAN_REFERENCE): the runs and
	// their net saving.
	span *spanProposal
}

// item is one item of the session. It is kept small (one is live per item
// of the session): positions and counts are int32 (a session never has 2^31
// facts), the small fields are packed at the end, what few items have is
// out of line (rare).
type item struct {
	id      string
	eventID string
	hash    string
	tokens  int
	call    *call

	// v holds the rungs' proposals, one per slot; nil until the first
	// (most items never get one: kept out of line).
	v *verdicts

	// curSurv is the survivor a current PRUNE relies on; curMark is the
	// mark built for the current decision when it differs from last's
	// (what emit publishes). curPrune (below) says whether the current
	// decision is PRUNE: the rest of it is never needed after judging.
	curSurv    *item
	curMark    *events.Mark
	last       *events.Mark // last emitted mark
	dependents []*item
	rare       *itemRare

	idx      int32 // position in Core.items
	factIdx  int32
	req      int32 // model requests dispatched before the item entered
	manualAt int32 // fact index of the latest prune request, -1 none
	restored int32 // fact index of the latest restore, -1 none
	refAt    int32 // fact index of the first later reference (L4), -1 none
	survRefs int32

	kind    itemKind
	msgProt protSet // a message's own protection (user or system)
	errored bool    // an output of a failed call (the error message: always stays)
	passing bool    // an output of a call that succeeded with exit code 0 or none
	gone    bool
	pinned  bool

	queued, touched, recentWake bool
	curPrune                    bool
	// curSpan is set when the current PRUNE is a span reference: the item
	// is still rendered, its repeated runs as references to lines that
	// are rendered, so it still holds its content for the items that
	// rely on it.
	curSpan bool

	// ph caches the net saving of the last placeholder estimated for the
	// item (see Core.netOf); nil until a PRUNE is first considered.
	ph *phCache
}

// itemList is the session's items in order (Core.items), allocated in
// chunks of itemChunk items: an item's position is its place in its chunk, so
// there is no array of pointers to grow, copy and scan, only one pointer
// per chunk.
type itemList struct {
	chunks []*[itemChunk]item
	n      int
}

// itemChunk is how many items a chunk of an itemList holds: 33 items of
// 184 bytes are 6,072 bytes of a 6,144-byte size class (see slabs).
const itemChunk = 33

// at returns the item at position i (0 <= i < n).
func (l *itemList) at(i int) *item { return &l.chunks[i/itemChunk][i%itemChunk] }

// add returns a fresh (zero) item at position n, and counts it.
func (l *itemList) add() *item {
	if l.n%itemChunk == 0 {
		l.chunks = append(l.chunks, new([itemChunk]item))
	}
	it := &l.chunks[l.n/itemChunk][l.n%itemChunk]
	l.n++
	return it
}

// verdicts is an item's proposals, one per verdict slot.
type verdicts [nSlots]*verdict

// slot returns the item's proposal in slot s, nil when none.
func (it *item) slot(s int) *verdict {
	if it.v == nil {
		return nil
	}
	return it.v[s]
}

// phCache is one item's last placeholder estimate and what it depends on.
type phCache struct {
	rung     events.Rung
	reason   events.Reason
	survivor int32 // survivor's position, -1 none, -2 no estimate yet
	residue  *events.Residue
	// net is placeholder.Net once counted; fits says the placeholder is
	// shorter in bytes than the payload in tokens (placeholder.FitsUnder),
	// so it saves without being counted.
	net     int
	counted bool
	fits    bool
	// handle is the item's placeholder.Handle.
	handle string
}

// itemRare holds what few items have, out of line to keep items small: who
// pinned the item, who asked to prune it and why, and the subtasks that name
// it as a consequence.
type itemRare struct {
	pinBy, manualBy, manualRs string
	conseqOf                  []*subtask
	// agentRs is the reason the agent gave with its latest removal
	// request, made at fact index agentAt (-1: none; see agentSet).
	// agentOK records whether that request was accepted when judged at
	// its own fact: only an accepted request stands afterwards. agentForce
	// asks emit for a mark caused by the request even when the decision
	// did not change, so the agent always gets its answer.
	agentRs    string
	agentAt    int32
	agentSet   bool
	agentOK    bool
	agentForce bool
}

// setRare returns the item's rare fields, allocating them on first use.
func (it *item) setRare() *itemRare {
	if it.rare == nil {
		it.rare = &itemRare{}
	}
	return it.rare
}

func (it *item) pinBy() string {
	if it.rare == nil {
		return ""
	}
	return it.rare.pinBy
}

func (it *item) manualBy() string {
	if it.rare == nil {
		return ""
	}
	return it.rare.manualBy
}

func (it *item) manualRs() string {
	if it.rare == nil {
		return ""
	}
	return it.rare.manualRs
}

func (it *item) conseqOf() []*subtask {
	if it.rare == nil {
		return nil
	}
	return it.rare.conseqOf
}

// call is one tool call with everything the rungs need about it.
type call struct {
	id     string
	tool   string
	class  events.Determinism
	canon  string
	key    string // tool + canonical args; "" when the call is unknown
	parsed any

	// paths is every path the call reads or writes (protection matching);
	// readPath is set for a content read of one file, with its range.
	paths    []string
	pathBuf  [1]string // paths' first backing array (most calls have one)
	readPath string
	rng      toolspec.Range
	url      string
	rule     string // project-rule pattern matched, if any
	protFile string // protected-file pattern matched, if any
	target   string // what a failure is about, for UNRESOLVED_ERROR (targetKey)

	in, out *item

	// phSource is what the call's placeholder names as its source
	// (placeholder.Source), computed once when first needed (phSourceSet).
	phSource string

	sideAtCall   int // fact index of the last state change when called
	chgAtCall    int // last possible change of readPath when called
	sideAtResult int
	chgAtResult  int
	scopedAtRes  int // last recorded (scoped) write of readPath at result
	srcVersion   string
	srcHash      string
	// lines are the 64-bit hashes of the output's lines (lineHasher; L1
	// span, only when span references are on and the output has
	// span_min_lines).
	lines []uint64
	nums  []int32 // line numbers of a numbered read (see lineHasher)

	// fail is set when the call failed (out of line: few calls fail).
	fail *callFailure

	known       bool
	tgtPath     bool // target is tool + "\x00" + paths[0], not built yet
	phSourceSet bool
	kind        toolspec.Kind
	stable      bool
	// fullPlan is set for a plan call that replaces the whole plan (its
	// tool's plan list is present and not empty).
	fullPlan bool
}

// copyRun is one key's latest observation and the first copy of its
// current run (L0: the same call; L1: the same source), one map entry
// for both so that an observation looks its key up once.
type copyRun struct {
	latest, first *item
	// ev is the evidence of the run's latest PRUNE (runVerdict).
	ev []events.Evidence
}

// runOf returns the run of key k in m, added empty on first use.
func runOf[K comparable](m map[K]*copyRun, k K) *copyRun {
	r := m[k]
	if r == nil {
		r = &copyRun{}
		m[k] = r
	}
	return r
}

// srcKey is a source identity (L1): kind 'f' for a file (a, its path; b,
// "full" or the tool and range), 'u' for a URL (a). The zero key is none.
type srcKey struct {
	kind byte
	a, b string
}

// reads is the recent content reads of one path (L2).
type reads struct{ list []readRef }

// Core judges the items of one session. Not safe for concurrent use.
// Deterministic: the same events in the same order give the same marks,
// byte for byte.
type Core struct {
	pol     policy.Policy
	el      *policy.Eligibility
	version string
	tenant  string
	session string
	cls     *classifier
	cwd     string
	// slotOn says which verdict slots the policy enables.
	slotOn [nSlots]bool

	facts    int
	requests int
	items    itemList
	liveFrom int
	byID     itemIndex        // item id -> item
	calls    map[string]*call // calls waiting for their result

	// State changes: the fact index of the last side effect of any kind,
	// of the last unscoped write, of the last scoped write per path and per
	// base name, and of the last inferred external change per path.
	sideAt     int
	unscopedAt writeMark
	writesPath map[string]writeMark
	writesBase map[string]writeMark
	inferred   map[string]int

	l0Runs      map[string]*copyRun // L0: tool+canonical args -> latest output, run
	srcRuns     map[srcKey]*copyRun // L1: source identity -> latest observation, run
	readsByPath map[string]*reads   // L2: recent content reads of a path
	spanIdx     map[uint64][]*item  // L1 span: line hash -> outputs holding it
	// unindexed are the outputs whose lines are not in spanIdx yet, in
	// observation order: indexed before spanIdx is next read
	// (spanCandidates) or by IndexSpans, whichever comes first.
	unindexed   []*item
	targets     map[string]*target // errored: failures per target
	planIn      *item
	planOut     *item
	lastPlan    map[string]*call // L2: tool -> latest successful full plan call
	subtasks    map[string]*subtask
	open        []*subtask
	awaitItem   map[string][]*subtask
	pendingPins map[string]string
	wake        map[int][]*item // model request count -> items to re-judge
	l4wake      map[int][]*item
	refs        map[string][]*item // L4: reference key -> unreferenced outputs

	// The recoverable policy (cold_recoverable.go): rec is its effective
	// configuration when recOn; cold the outputs watched, termLast the
	// model request of the agent's latest use of each watched term (-1:
	// none yet), coldWake the outputs to check per model request count,
	// termItems the items of the context (since the last host compaction)
	// holding each term.
	rec       policy.Recoverable
	recOn     bool
	cold      map[*item]*coldItem
	termLast  map[uint64]int32
	coldWake  map[int][]*item
	termItems map[uint64]int32

	// canon caches canonicalJSON by the raw argument bytes (the parsed
	// value is never modified, so calls with the same bytes share it).
	canon map[string]*canonArgs
	// canonHashes caches events.HashBytes of canonical arguments (L0
	// evidence), bounded like canon.
	canonHashes map[string]string
	// shells caches classifyShell per command line, bounded like canon.
	shells map[string]toolspec.Shell
	// shParser classifies the lines not in shells with one reused parser
	// (a parser allocates its buffers once).
	shParser toolspec.ShellClassifier
	// pathMatch caches matchAny per path (matchProtectedPaths).
	pathMatch map[string]pathMatch
	// slab is where calls, placeholder estimates, proposals, marks and
	// their parts come from (items: itemList).
	slab slabs

	queue   []*item
	touched []*item
	// causeID, causeTime and causeIdx are the id, time and fact index of
	// the fact being observed.
	causeID   string
	causeTime time.Time
	causeIdx  int

	// sizer sizes placeholders (netOf, worth) without the shared
	// cache's lock.
	sizer placeholder.Sizer

	// candValues caches candidateValue.
	candValues []candValue
	// alwaysBuild makes judge build the mark on every judgement, which
	// must change no decision (tests only).
	alwaysBuild bool

	// content opens a stored output by content address (SetContent,
	// SetContentReader); L1 span needs the lines of reads stored by
	// reference, and reads them as they stream by.
	content func(hash string) (io.ReadCloser, error)
	// contentErr is the first failure of content since ContentErr was
	// last called.
	contentErr error
}

// SetContent gives the core the payloads of outputs stored by content
// address (events.ToolResult.OutputRef), which span references (policy
// eligibility.span_refs) compare line by line. Content addresses name
// immutable payloads, so decisions stay a function of the log. Without
// it only inline outputs are compared; when get fails the output is
// judged as inline-less too and ContentErr reports the failure.
func (c *Core) SetContent(get func(hash string) ([]byte, error)) {
	if get == nil {
		c.content = nil
		return
	}
	c.content = func(h string) (io.ReadCloser, error) {
		b, err := get(h)
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
}

// SetContentReader is SetContent for a getter that streams the payload:
// span references hash a stored output's lines as it is read, a buffer at
// a time, so a large output is never held whole (the pipeline's worker
// opens blobs from the object store this way). A read error counts as a
// failure of the getter (ContentErr).
func (c *Core) SetContentReader(open func(hash string) (io.ReadCloser, error)) { c.content = open }

// ContentErr returns the first failure of SetContent's getter since the
// previous call, and forgets it. After a failure the core judged the
// output as if its payload were not stored, which the log does not say:
// a caller that needs decisions to be a function of the log (the
// pipeline's worker) discards the core and its marks and judges again.
func (c *Core) ContentErr() error {
	err := c.contentErr
	c.contentErr = nil
	return err
}

// New returns a core for one session under policy p. Defaults are applied to
// a copy of p.
func New(p policy.Policy, tenant, session string) *Core {
	p.SetDefaults()
	c := &Core{
		pol:         p,
		version:     p.Version(),
		tenant:      tenant,
		session:     session,
		calls:       map[string]*call{},
		sideAt:      -1,
		unscopedAt:  writeMark{idx: -1},
		writesPath:  map[string]writeMark{},
		writesBase:  map[string]writeMark{},
		inferred:    map[string]int{},
		subtasks:    map[string]*subtask{},
		awaitItem:   map[string][]*subtask{},
		pendingPins: map[string]string{},
		wake:        map[int][]*item{},
		l4wake:      map[int][]*item{},
	}
	c.el = &c.pol.Eligibility
	c.byID.seed = maphash.MakeSeed()
	c.cls = newClassifier(c.el)
	if c.rec, c.recOn = c.el.RecoverableOn(); c.recOn {
		c.cold, c.termLast, c.coldWake, c.termItems = map[*item]*coldItem{}, map[uint64]int32{}, map[int][]*item{}, map[uint64]int32{}
	}
	c.slotOn = [nSlots]bool{
		sL0: c.el.RungEnabled("L0"), sL1: c.el.RungEnabled("L1"), sL2: c.el.RungEnabled("L2"),
		sL3: c.el.RungEnabled("L3"), sErr: c.el.ErroredEnabled(), sL4: true, sCold: c.recOn,
		sSpan: c.el.SpanRefsEnabled() && c.el.RungEnabled("L1"),
	}
	c.resetIndexes()
	return c
}

func (c *Core) resetIndexes() {
	c.l0Runs = map[string]*copyRun{}
	c.srcRuns = map[srcKey]*copyRun{}
	c.readsByPath = map[string]*reads{}
	c.spanIdx = map[uint64][]*item{}
	c.unindexed = nil
	c.targets = map[string]*target{}
	c.refs = map[string][]*item{}
	c.planIn, c.planOut = nil, nil
	c.lastPlan = map[string]*call{}
}

// PolicyVersion is the policy version written on every mark.
func (c *Core) PolicyVersion() string { return c.version }

// Facts returns how many fact events the core has observed.
func (c *Core) Facts() int { return c.facts }

// Observe feeds the session's next fact event in log order and returns the
// marks for every item whose decision (decision, rung, reason) changed
// because of it. Non-fact events (marks, applications) are ignored.
func (c *Core) Observe(ev events.Event) []events.Event {
	if !ev.IsFact() || ev.Data == nil {
		return nil
	}
	c.causeID, c.causeTime = ev.ID, ev.Time
	c.causeIdx = c.facts
	c.facts++
	switch p := ev.Data.(type) {
	case *events.SessionStarted:
		c.cwd = strings.TrimSuffix(path.Clean(p.CWD), "/")
		if p.CWD == "" {
			c.cwd = ""
		}
	case *events.Message:
		c.onMessage(ev, p)
	case *events.ToolCall:
		c.onToolCall(ev, p)
	case *events.ToolResult:
		c.onToolResult(ev, p)
	case *events.ModelRequest:
		c.onModelRequest()
	case *events.HostCompaction:
		c.onCompaction()
	case *events.Pin:
		c.onPin(p)
	case *events.Unpin:
		c.onUnpin(p)
	case *events.Restore:
		c.onRestore(p)
	case *events.PruneRequest:
		c.onPruneRequest(p)
	case *events.SubtaskOpened:
		c.onSubtaskOpened(p)
	case *events.SubtaskClosed:
		c.onSubtaskClosed(p)
	}
	c.settle()
	return c.emit()
}

// Decisions returns the latest mark per item, in item order of first
// appearance. Items without a decision are left out.
func (c *Core) Decisions() []events.Mark {
	var out []events.Mark
	for i := range c.items.n {
		if it := c.items.at(i); it.last != nil {
			out = append(out, *it.last)
		}
	}
	return out
}

// Decision returns the latest mark of one item.
func (c *Core) Decision(itemID string) (events.Mark, bool) {
	it := c.lookup(itemID)
	if it == nil || it.last == nil {
		return events.Mark{}, false
	}
	return *it.last, true
}

// lookup returns the item with id, or nil.
func (c *Core) lookup(id string) *item { return c.byID.get(&c.items, id) }

func (c *Core) newItem(id string, kind itemKind, tokens int) *item {
	h := c.byID.hash(id)
	if c.byID.getHash(&c.items, id, h) != nil {
		return nil
	}
	// New items are fresh (zero): set only the non-zero fields.
	it := c.items.add()
	it.id, it.idx, it.kind, it.eventID, it.factIdx = id, int32(c.items.n-1), kind, c.causeID, int32(c.causeIdx)
	it.req, it.tokens, it.manualAt, it.restored, it.refAt = int32(c.requests), tokens, -1, -1, -1
	if by, ok := c.pendingPins[id]; ok {
		it.pinned = true
		it.setRare().pinBy = by
		delete(c.pendingPins, id)
	}
	c.byID.add(h, int(it.idx))
	if subs := c.awaitItem[id]; len(subs) > 0 {
		delete(c.awaitItem, id)
		for _, st := range subs {
			c.evalSubtask(st)
		}
	}
	return it
}
