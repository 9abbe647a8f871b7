package eligibility

import (
	"encoding/json"
	"hash/maphash"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/toolspec"
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

	v [nSlots]*verdict

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

// phCache is one item's last placeholder estimate and what it depends on.
type phCache struct {
	rung     events.Rung
	reason   events.Reason
	survivor int32 // survivor's position, -1 none
	residue  *events.Residue
	net      int
}

// itemRare holds what few items have, out of line to keep items small: who
// pinned the item, who asked to prune it and why, and the subtasks that name
// it as a consequence.
type itemRare struct {
	pinBy, manualBy, manualRs string
	conseqOf                  []*subtask
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
	readPath string
	rng      toolspec.Range
	url      string
	rule     string // project-rule pattern matched, if any
	protFile string // protected-file pattern matched, if any
	target   string // what a failure is about, for UNRESOLVED_ERROR

	in, out *item

	// phSource is what the call's placeholder names as its source
	// (placeholder.Source), computed once when first needed.
	phSource    string
	phSourceSet bool

	sideAtCall   int // fact index of the last state change when called
	chgAtCall    int // last possible change of readPath when called
	sideAtResult int
	chgAtResult  int
	scopedAtRes  int // last recorded (scoped) write of readPath at result
	srcKey       string
	srcVersion   string
	srcHash      string
	// lines are the FNV-64a hashes of the output's lines (L1 span, only
	// when span references are on and the output has span_min_lines).
	lines []uint64
	nums  []int32 // line numbers of a numbered read (see hashLines)

	// fail is set when the call failed (out of line: few calls fail).
	fail *callFailure

	known  bool
	kind   toolspec.Kind
	stable bool
	// fullPlan is set for a plan call that replaces the whole plan (its
	// tool's plan list is present and not empty).
	fullPlan bool
}

// callFailure is what the errored rung and its protections need about a
// failed call.
type callFailure struct {
	failIdx  int
	failReq  int
	errType  string
	errMsg   string
	explains string

	skel     string // residue skeleton of the input, once skelDone
	skelDone bool
}

type writeMark struct {
	idx int
	ev  string
}

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
	items    []*item
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

	latest      map[string]*item   // L0: tool+canonical args -> latest output
	runStart    map[string]*item   // L0: first copy of the current identical run
	latestSrc   map[string]*item   // L1: source identity -> latest observation
	firstSrc    map[string]*item   // L1: first observation of the current version's run
	readsByPath map[string][]*item // L2: recent content reads of a path
	spanIdx     map[uint64][]*item // L1 span: line hash -> outputs holding it
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
	// slab is where items are allocated from, 32 at a time.
	slab []item

	queue   []*item
	touched []*item
	// causeID, causeTime and causeIdx are the id, time and fact index of
	// the fact being observed.
	causeID   string
	causeTime time.Time
	causeIdx  int

	// candValues caches candidateValue.
	candValues []candValue
	// alwaysBuild makes judge build the mark on every judgement, which
	// must change no decision (tests only).
	alwaysBuild bool

	// content returns a stored output by content address (SetContent);
	// L1 span needs the lines of reads stored by reference.
	content func(hash string) ([]byte, error)
}

// SetContent gives the core the payloads of outputs stored by content
// address (events.ToolResult.OutputRef), which span references (policy
// eligibility.span_refs) compare line by line. Content addresses name
// immutable payloads, so decisions stay a function of the log. Without
// it, or when get fails, only inline outputs are compared.
func (c *Core) SetContent(get func(hash string) ([]byte, error)) { c.content = get }

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
	c.slotOn = [nSlots]bool{
		sL0: c.el.RungEnabled("L0"), sL1: c.el.RungEnabled("L1"), sL2: c.el.RungEnabled("L2"),
		sL3: c.el.RungEnabled("L3"), sErr: c.el.ErroredEnabled(), sL4: true,
		sSpan: c.el.SpanRefsEnabled() && c.el.RungEnabled("L1"),
	}
	c.resetIndexes()
	return c
}

func (c *Core) resetIndexes() {
	c.latest = map[string]*item{}
	c.runStart = map[string]*item{}
	c.latestSrc = map[string]*item{}
	c.firstSrc = map[string]*item{}
	c.readsByPath = map[string][]*item{}
	c.spanIdx = map[uint64][]*item{}
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
	for _, it := range c.items {
		if it.last != nil {
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
func (c *Core) lookup(id string) *item { return c.byID.get(c.items, id) }

func (c *Core) newItem(id string, kind itemKind, tokens int) *item {
	h := c.byID.hash(id)
	if c.byID.getHash(c.items, id, h) != nil {
		return nil
	}
	if len(c.slab) == 0 {
		c.slab = make([]item, 32)
	}
	// Slab items are fresh (zero): set only the non-zero fields.
	it := &c.slab[0]
	c.slab = c.slab[1:]
	it.id, it.idx, it.kind, it.eventID, it.factIdx = id, int32(len(c.items)), kind, c.causeID, int32(c.causeIdx)
	it.req, it.tokens, it.manualAt, it.restored, it.refAt = int32(c.requests), tokens, -1, -1, -1
	if by, ok := c.pendingPins[id]; ok {
		it.pinned = true
		it.setRare().pinBy = by
		delete(c.pendingPins, id)
	}
	c.items = append(c.items, it)
	c.byID.add(h, int(it.idx))
	if subs := c.awaitItem[id]; len(subs) > 0 {
		delete(c.awaitItem, id)
		for _, st := range subs {
			c.evalSubtask(st)
		}
	}
	return it
}

func (c *Core) onMessage(ev events.Event, p *events.Message) {
	tok := p.Tokens
	if tok == 0 {
		tok = events.EstimateTokens(len(p.Text))
	}
	it := c.newItem(p.Item, kMessage, tok)
	if it == nil {
		return
	}
	switch p.Role {
	case events.RoleUser:
		it.msgProt = pUserMessage
	case events.RoleSystem:
		it.msgProt = pSystemPrompt
	}
	c.reference(p.Text)
}

func (c *Core) onToolCall(ev events.Event, p *events.ToolCall) {
	tok := p.InputTokens
	if tok == 0 {
		tok = events.EstimateTokens(len(p.Input))
	}
	in := c.newItem(p.Item, kInput, tok)
	if in == nil {
		return
	}
	cl, writes, unscoped := c.newCall(p.CallID, p.Tool, p.Input)
	cl.in = in
	in.call = cl
	c.calls[p.CallID] = cl
	c.applySideEffects(cl, writes, unscoped)
	cl.sideAtCall = c.sideAt
	if cl.readPath != "" {
		cl.chgAtCall = c.lastChange(cl.readPath)
	}
	if cl.kind == toolspec.KindPlan {
		prevIn, prevOut := c.planIn, c.planOut
		c.planIn, c.planOut = in, nil
		if prevIn != nil {
			c.dirty(prevIn)
		}
		if prevOut != nil {
			c.dirty(prevOut)
		}
	}
	if len(c.refs) > 0 { // reference does nothing without them: spare the copy
		c.reference(string(p.Input))
	}
}

// newCall classifies a call and reads its arguments. It returns the paths
// the call may write and whether it may write anything.
func (c *Core) newCall(id, tool string, input json.RawMessage) (*call, []string, bool) {
	cl := &call{id: id, tool: tool}
	spec, known := toolspec.Lookup(tool)
	var args toolspec.Args
	cl.canon, cl.parsed, cl.key, args = c.canonical(input, tool, spec)
	cl.known = known
	cl.class, cl.kind = spec.Class, spec.Kind
	var writes []string
	unscoped := spec.Unscoped
	switch spec.Kind {
	case toolspec.KindShell:
		sh := c.classifyShell(args.Command)
		cl.class, cl.kind = sh.Class, sh.Kind
		if sh.ReadPath != "" {
			cl.readPath, cl.rng = sh.ReadPath, sh.Range
		}
		writes, unscoped = sh.Writes, sh.Unscoped
		cl.target = tool + "\x00prog:" + sh.Program
		if sh.ReadPath != "" {
			cl.target = tool + "\x00" + toolspec.CleanPath(sh.ReadPath, c.cwd)
		}
	case toolspec.KindSWEStrReplace:
		if args.Sub == "view" {
			cl.class, cl.kind = events.DeterminismVersioned, toolspec.KindRead
			cl.readPath, cl.rng = args.Path, args.Range
		} else {
			cl.class, cl.kind = events.DeterminismSideEffect, toolspec.KindWrite
		}
	case toolspec.KindRead:
		cl.readPath, cl.rng = args.Path, args.Range
	}
	if cl.kind == toolspec.KindWrite && spec.Kind != toolspec.KindShell {
		if args.Path != "" {
			writes = append(writes, args.Path)
		}
		writes = append(writes, args.PatchPaths...)
		if len(writes) == 0 {
			unscoped = true
		}
	}
	if ov, ok := c.cls.override(tool); ok {
		cl.known = true
		cl.class = ov
		switch ov {
		case events.DeterminismSideEffect:
			if len(writes) == 0 && !unscoped {
				if args.Path != "" {
					writes = []string{args.Path}
				} else {
					unscoped = true
				}
			}
			cl.readPath = ""
		case events.DeterminismVersioned:
			writes, unscoped = nil, false
			if cl.readPath == "" && args.Path != "" {
				cl.readPath, cl.rng = args.Path, args.Range
			}
		default:
			writes, unscoped = nil, false
			cl.readPath = ""
		}
		if cl.kind == toolspec.KindPlan && ov != events.DeterminismSideEffect {
			cl.kind = toolspec.KindOther
		}
	}
	if !cl.known {
		// Unknown tool: observed as state, counted as a possible write of
		// anything.
		cl.class = events.DeterminismState
		unscoped = true
	}
	if cl.readPath != "" {
		cl.readPath = toolspec.CleanPath(cl.readPath, c.cwd)
	}
	cl.url = args.URL
	for i, w := range writes {
		writes[i] = toolspec.CleanPath(w, c.cwd)
	}
	// writes is this call's own slice (built here or cloned from the shell
	// cache) and is only read after: paths may share it.
	if len(writes) > 0 {
		cl.paths = writes
	}
	if cl.readPath != "" {
		cl.paths = append(cl.paths, cl.readPath)
	} else if args.Path != "" && cl.class != events.DeterminismSideEffect {
		cl.paths = append(cl.paths, toolspec.CleanPath(args.Path, c.cwd))
	}
	if cl.target == "" {
		if len(cl.paths) > 0 {
			cl.target = tool + "\x00" + cl.paths[0]
		} else {
			cl.target = tool
		}
	}
	c.matchProtectedPaths(cl)
	cl.fullPlan = cl.kind == toolspec.KindPlan && spec.PlanList != "" && nonEmptyList(cl.parsed, spec.PlanList)
	return cl, writes, unscoped && cl.class == events.DeterminismSideEffect || !cl.known
}

// nonEmptyList reports whether the arguments v hold a non-empty JSON array
// under key.
func nonEmptyList(v any, key string) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	l, ok := m[key].([]any)
	return ok && len(l) > 0
}

// canonArgs is one cached canonicalJSON result, with the call key and the
// arguments (extractArgs) of the last tool called with those bytes.
type canonArgs struct {
	canon  string
	parsed any
	tool   string
	key    string // tool + "\x00" + canon
	args   toolspec.Args
}

// maxCanonCache bounds the canonical-arguments cache; it is emptied when
// full (only speed depends on it).
const maxCanonCache = 4096

// canonical is canonicalJSON through the core's cache, with the call key
// (tool + "\x00" + canonical arguments) and extractArgs(spec, parsed), spec
// being lookupSpec(tool). The arguments are shared between calls with the
// same bytes and tool: they are never modified.
func (c *Core) canonical(input []byte, tool string, spec toolspec.Spec) (string, any, string, toolspec.Args) {
	e := c.canon[string(input)]
	if e != nil && e.tool == tool {
		return e.canon, e.parsed, e.key, e.args
	}
	if e == nil {
		if c.canon == nil || len(c.canon) >= maxCanonCache {
			c.canon = map[string]*canonArgs{}
		}
		e = new(canonArgs)
		e.canon, e.parsed, _ = toolspec.CanonicalJSON(input)
		c.canon[string(input)] = e
	}
	e.tool, e.key, e.args = tool, tool+"\x00"+e.canon, toolspec.ExtractArgs(spec, e.parsed)
	return e.canon, e.parsed, e.key, e.args
}

// classifyShell is classifyShell through the core's cache. The writes
// slice is copied: callers rewrite it in place.
func (c *Core) classifyShell(line string) toolspec.Shell {
	sh, ok := c.shells[line]
	if !ok {
		sh = c.shParser.Classify(line)
		if c.shells == nil || len(c.shells) >= maxCanonCache {
			c.shells = map[string]toolspec.Shell{}
		}
		c.shells[line] = sh
	}
	sh.Writes = slices.Clone(sh.Writes)
	return sh
}

// canonHash is events.HashBytes([]byte(canon)) through the core's cache.
func (c *Core) canonHash(canon string) string {
	if h, ok := c.canonHashes[canon]; ok {
		return h
	}
	h := events.HashBytes([]byte(canon))
	if c.canonHashes == nil || len(c.canonHashes) >= maxCanonCache {
		c.canonHashes = map[string]string{}
	}
	c.canonHashes[canon] = h
	return h
}

// applySideEffects records the state change a call may make.
func (c *Core) applySideEffects(cl *call, writes []string, unscoped bool) {
	if cl.class != events.DeterminismSideEffect && cl.known {
		return
	}
	if cl.kind == toolspec.KindPlan {
		return
	}
	c.sideAt = c.causeIdx
	wm := writeMark{idx: c.causeIdx, ev: c.causeID}
	if unscoped {
		c.unscopedAt = wm
	}
	for _, w := range writes {
		if w == "" {
			continue
		}
		c.writesPath[w] = wm
		c.writesBase[path.Base(w)] = wm
	}
	for _, st := range c.open {
		st.lastChange = c.causeIdx
	}
}

// lastChange returns the fact index of the last recorded or possible change
// of the file p: an unscoped write, a scoped write of p, of a directory
// above it or of anything with the same base name, or an inferred external
// change. scopedWrite returns the last recorded write naming p (or a
// directory above it) and its event.
func (c *Core) lastChange(p string) int {
	best := c.unscopedAt.idx
	if w := c.scopedWrite(p); w.idx > best {
		best = w.idx
	}
	for q := p; ; {
		if i, ok := c.inferred[q]; ok && i > best {
			best = i
		}
		d := path.Dir(q)
		if q == "." || q == "/" || d == q {
			break
		}
		q = d
	}
	return best
}

func (c *Core) scopedWrite(p string) writeMark {
	best := writeMark{idx: -1}
	for q := p; ; {
		if w, ok := c.writesPath[q]; ok && w.idx > best.idx {
			best = w
		}
		if w, ok := c.writesBase[path.Base(q)]; ok && w.idx > best.idx {
			best = w
		}
		d := path.Dir(q)
		if q == "." || q == "/" || d == q {
			break
		}
		q = d
	}
	return best
}

func (c *Core) onToolResult(ev events.Event, p *events.ToolResult) {
	tokens, hash := 0, ""
	switch {
	case p.OutputRef != nil:
		tokens, hash = p.OutputRef.Tokens, p.OutputRef.Hash
	case p.Output != nil:
		tokens, hash = events.EstimateTokens(len(*p.Output)), events.HashBytes([]byte(*p.Output))
	}
	out := c.newItem(p.Item, kOutput, tokens)
	if out == nil {
		return
	}
	out.hash = hash
	cl := c.calls[p.CallID]
	if cl != nil && cl.out == nil {
		// Matched: the call leaves the pending set (a second result for
		// it would be an orphan either way), which keeps the map small.
		delete(c.calls, p.CallID)
	}
	if cl == nil || cl.out != nil {
		// An orphan result: no arguments to compare, so no rung applies.
		tool := p.Tool
		cl, _, _ = c.newCall(p.CallID, tool, json.RawMessage("null"))
		cl.key = ""
	}
	cl.out = out
	out.call = cl
	if p.HostPruned {
		out.gone = true
		return
	}
	if d := p.Determinism; d != "" {
		if _, ov := c.cls.override(cl.tool); !ov && d != cl.class {
			if d == events.DeterminismSideEffect && cl.class != events.DeterminismSideEffect {
				cl.class = d
				c.sideAt = c.causeIdx
				c.unscopedAt = writeMark{idx: c.causeIdx, ev: ev.ID}
			}
			cl.class = d
			cl.known = true
			if d != events.DeterminismVersioned {
				cl.readPath = ""
			}
		}
	}
	out.errored = p.IsError
	out.passing = !p.IsError && (p.ExitCode == nil || *p.ExitCode == 0)
	if p.IsError {
		c.onFailure(cl, p)
		return
	}
	c.onSuccess(cl)
	if cl.kind == toolspec.KindPlan && c.planIn == cl.in && cl.in != nil {
		c.planOut = out
	}
	if cl.fullPlan {
		c.l2Plan(cl)
	}
	c.observe(cl, out, p)
	for _, st := range c.open {
		st.items = append(st.items, out)
	}
}

// observe indexes a successful, in-context output and runs the rungs that
// compare it with earlier observations.
func (c *Core) observe(cl *call, out *item, p *events.ToolResult) {
	cl.sideAtResult = c.sideAt
	if s := p.Source; s != nil {
		cl.srcVersion, cl.srcHash = s.Version, s.ContentHash
		if s.Kind == "file" && s.Path != "" && (cl.class == events.DeterminismVersioned || cl.class == events.DeterminismPure) {
			sp := toolspec.CleanPath(s.Path, c.cwd)
			if cl.readPath == "" || cl.readPath == sp {
				if cl.readPath == "" {
					cl.chgAtCall = c.lastChange(sp)
				}
				cl.readPath = sp
				if s.Offset != 0 || s.Limit != 0 {
					cl.rng = toolspec.Range{Off: s.Offset, Lim: s.Limit}
				} else if !cl.rng.Window && !cl.rng.Tail && cl.rng.Off == 0 && cl.rng.Lim == 0 {
					cl.rng = toolspec.Range{Full: true}
				}
			}
			if !containsStr(cl.paths, sp) {
				cl.paths = append(cl.paths, sp)
				c.matchProtectedPaths(cl)
			}
		}
		if s.URL != "" {
			cl.url = s.URL
		}
	}
	if cl.readPath != "" {
		cl.chgAtResult = c.lastChange(cl.readPath)
		cl.scopedAtRes = c.scopedWrite(cl.readPath).idx
		cl.stable = cl.chgAtCall == cl.chgAtResult
		rk := "full"
		if !cl.rng.Full {
			rk = cl.tool + ":" + cl.rng.String()
		}
		cl.srcKey = "f\x00" + cl.readPath + "\x00" + rk
	} else if cl.url != "" {
		cl.srcKey = "u\x00" + cl.url
	}
	if cl.key == "" {
		return
	}
	c.l0(out)
	c.l1(out)
	c.l2(out) // before l1Span: a read that supersedes o does not refer to it
	if c.slotOn[sSpan] {
		c.l1Span(out, p)
	}
	c.l4Register(out)
}

func containsStr(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func (c *Core) onModelRequest() {
	c.requests++
	if its, ok := c.wake[c.requests]; ok {
		delete(c.wake, c.requests)
		for _, it := range its {
			it.recentWake = false
			c.dirty(it)
		}
	}
	if its, ok := c.l4wake[c.requests]; ok {
		delete(c.l4wake, c.requests)
		for _, it := range its {
			c.l4Due(it)
		}
	}
}

func (c *Core) wakeAt(req int, it *item) {
	c.wake[req] = append(c.wake[req], it)
}

// onCompaction: the host replaced the context; every item so far left it.
// They are never judged again and nothing is emitted for them.
func (c *Core) onCompaction() {
	for _, it := range c.items[c.liveFrom:] {
		it.gone = true
	}
	c.liveFrom = len(c.items)
	c.resetIndexes()
	for _, st := range c.open {
		st.items = nil
	}
}

func (c *Core) onPin(p *events.Pin) {
	it := c.lookup(p.Item)
	if it == nil {
		c.pendingPins[p.Item] = p.By
		return
	}
	it.pinned = true
	it.setRare().pinBy = p.By
	c.dirty(it)
}

func (c *Core) onUnpin(p *events.Unpin) {
	delete(c.pendingPins, p.Item)
	if it := c.lookup(p.Item); it != nil && it.pinned {
		it.pinned = false
		c.dirty(it)
	}
}

func (c *Core) onRestore(p *events.Restore) {
	if it := c.lookup(p.Item); it != nil {
		it.restored = int32(c.causeIdx)
		c.dirty(it)
	}
}

func (c *Core) onPruneRequest(p *events.PruneRequest) {
	if it := c.lookup(p.Item); it != nil {
		it.manualAt = int32(c.causeIdx)
		r := it.setRare()
		r.manualBy, r.manualRs = p.By, p.Reason
		c.dirty(it)
	}
}

// withEvidence returns a copy of v with evidence ev, allocated together with
// the evidence's backing array (one allocation instead of two; verdicts and
// their evidence are never modified, so they live and die together).
func withEvidence(v verdict, ev ...events.Evidence) *verdict {
	switch len(ev) {
	case 1:
		x := &struct {
			v  verdict
			ev [1]events.Evidence
		}{v: v, ev: [1]events.Evidence(ev)}
		x.v.evidence = x.ev[:]
		return &x.v
	case 2:
		x := &struct {
			v  verdict
			ev [2]events.Evidence
		}{v: v, ev: [2]events.Evidence(ev)}
		x.v.evidence = x.ev[:]
		return &x.v
	case 3:
		x := &struct {
			v  verdict
			ev [3]events.Evidence
		}{v: v, ev: [3]events.Evidence(ev)}
		x.v.evidence = x.ev[:]
		return &x.v
	case 4:
		x := &struct {
			v  verdict
			ev [4]events.Evidence
		}{v: v, ev: [4]events.Evidence(ev)}
		x.v.evidence = x.ev[:]
		return &x.v
	}
	x := new(verdict)
	*x = v
	x.evidence = slices.Clone(ev)
	return x
}

// setVerdict records a rung's proposal for an item and queues it.
func (c *Core) setVerdict(it *item, slot int, v *verdict) {
	v.at = c.causeIdx
	it.v[slot] = v
	if v.survivor != nil {
		v.survivor.dependents = append(v.survivor.dependents, it)
	}
	c.dirty(it)
}

func (c *Core) dirty(it *item) {
	if it == nil || it.gone {
		return
	}
	if !it.touched {
		it.touched = true
		c.touched = append(c.touched, it)
	}
	if !it.queued {
		it.queued = true
		c.queue = append(c.queue, it)
	}
}

// decisionKey is what makes a decision change: decision, rung and reason.
// The zero key is "no decision" (every decision has a non-empty Decision).
type decisionKey struct {
	decision events.Decision
	rung     events.Rung
	reason   events.Reason
}

func markKey(m *events.Mark) decisionKey {
	if m == nil {
		return decisionKey{}
	}
	return decisionKey{decision: m.Decision, rung: m.Rung, reason: m.Reason}
}

func (k decisionKey) isPrune() bool { return k.decision == events.Prune }

// set reports whether k is a decision.
func (k decisionKey) set() bool { return k.decision != "" }

// settle re-judges queued items until nothing changes.
func (c *Core) settle() {
	limit := 64*len(c.queue) + 4096
	for i := 0; i < len(c.queue); i++ {
		if i > limit {
			break // defensive: decisions never oscillate, but never spin
		}
		it := c.queue[i]
		it.queued = false
		if it.gone {
			continue
		}
		old, oldSurv := it.curPrune, it.curSurv
		k, surv, m := c.judge(it)
		it.curPrune, it.curSurv, it.curMark = k.isPrune(), surv, m
		it.curSpan = k.isPrune() && k.reason == events.ReasonSpanReference
		if oldSurv != surv {
			if oldSurv != nil {
				oldSurv.survRefs--
				c.dirty(oldSurv)
			}
			if surv != nil {
				surv.survRefs++
				c.dirty(surv)
			}
		}
		if old != it.curPrune {
			for _, d := range it.dependents {
				c.dirty(d)
			}
			for _, st := range it.conseqOf() {
				c.evalSubtask(st)
			}
		}
	}
	c.queue = c.queue[:0]
}

// emit turns the changed decisions into mark events, in item order.
func (c *Core) emit() []events.Event {
	if len(c.touched) == 0 {
		return nil
	}
	slices.SortFunc(c.touched, func(a, b *item) int { return int(a.idx) - int(b.idx) })
	n := 0
	for _, it := range c.touched {
		if it.curMark != nil {
			n++
		}
	}
	var out []events.Event
	if n > 0 {
		out = make([]events.Event, 0, n)
	}
	for _, it := range c.touched {
		it.touched = false
		m := it.curMark
		if m == nil {
			continue
		}
		// it.curMark is the mark built at the item's last judgement, for a
		// decision that differs from the last emitted one (the key set
		// only changes here, so "differs" held at that judgement and
		// still does); it is never modified or shared after: it becomes
		// the emitted mark itself (no copy).
		it.curMark = nil
		m.Cause = c.causeID
		m.CauseIndex = c.causeIdx
		m.PolicyVersion = c.version
		if m.By == "" {
			m.By = By
		}
		id := events.DerivedID("mark", c.tenant, c.session, m.Item, string(m.Decision), string(m.Rung), string(m.Reason), c.causeID)
		e := events.New(id, c.tenant, c.session, c.causeTime, m)
		it.last = m
		out = append(out, e)
	}
	c.touched = c.touched[:0]
	return out
}
