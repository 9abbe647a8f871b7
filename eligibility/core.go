package eligibility

import (
	"encoding/json"
	"path"
	"slices"
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

// By is the Mark.By of every automatic decision.
const By = "eligibility"

// PlaceholderTokens is the estimated size of the placeholder left where an
// item is removed; estimated savings are net of it, and an item that would
// not net a saving is not pruned automatically.
const PlaceholderTokens = 30

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
}

type item struct {
	id      string
	idx     int
	kind    itemKind
	eventID string
	factIdx int
	req     int // model requests dispatched before the item entered
	tokens  int
	hash    string
	role    events.Role
	msgKind events.MessageKind
	call    *call
	errored bool // an output of a failed call (the error message: always stays)
	passing bool // an output of a call that succeeded with exit code 0 or none

	gone     bool
	pinned   bool
	pinBy    string
	manualAt int // fact index of the latest prune request, -1 none
	manualBy string
	manualRs string
	restored int // fact index of the latest restore, -1 none
	refAt    int // fact index of the first later reference (L4), -1 none

	v [nSlots]*verdict

	cur        *events.Mark // current decision (nil: none)
	curSurv    *item
	last       *events.Mark // last emitted mark
	survRefs   int
	dependents []*item
	conseqOf   []*subtask

	queued, touched, recentWake bool
	startKey                    decisionKey
}

// call is one tool call with everything the rungs need about it.
type call struct {
	id     string
	tool   string
	known  bool
	class  events.Determinism
	kind   toolKind
	canon  string
	key    string // tool + canonical args; "" when the call is unknown
	parsed any
	args   callArgs

	// paths is every path the call reads or writes (protection matching);
	// readPath is set for a content read of one file, with its range.
	paths    []string
	readPath string
	rng      readRange
	url      string
	rule     string // project-rule pattern matched, if any
	protFile string // protected-file pattern matched, if any
	target   string // what a failure is about, for UNRESOLVED_ERROR

	in, out *item

	sideAtCall   int // fact index of the last state change when called
	chgAtCall    int // last possible change of readPath when called
	sideAtResult int
	chgAtResult  int
	scopedAtRes  int // last recorded (scoped) write of readPath at result
	stable       bool
	srcKey       string
	srcVersion   string
	srcHash      string
	srcExplicit  bool

	failed   bool
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
	byID     map[string]*item
	calls    map[string]*call

	// State changes: the fact index of the last side effect of any kind,
	// of the last unscoped write, and per path key of the last scoped write
	// ("p:"+path and "b:"+base name) and inferred external change.
	sideAt     int
	unscopedAt writeMark
	writes     map[string]writeMark
	inferred   map[string]int

	latest      map[string]*item   // L0: tool+canonical args -> latest output
	runStart    map[string]*item   // L0: first copy of the current identical run
	latestSrc   map[string]*item   // L1: source identity -> latest observation
	readsByPath map[string][]*item // L2: recent content reads of a path
	targets     map[string]*target // errored: failures per target
	planIn      *item
	planOut     *item
	subtasks    map[string]*subtask
	open        []*subtask
	awaitItem   map[string][]*subtask
	pendingPins map[string]string
	wake        map[int][]*item // model request count -> items to re-judge
	l4wake      map[int][]*item
	refs        map[string][]*item // L4: reference key -> unreferenced outputs

	// canon caches canonicalJSON by the raw argument bytes (the parsed
	// value is never modified, so calls with the same bytes share it).
	canon map[string]canonArgs
	// canonHashes caches events.HashBytes of canonical arguments (L0
	// evidence), bounded like canon.
	canonHashes map[string]string
	// shells caches classifyShell per command line, bounded like canon.
	shells map[string]shellInfo
	// pathMatch caches matchAny per path (matchProtectedPaths).
	pathMatch map[string]pathMatch
	// slab is where items are allocated from, 16 at a time.
	slab []item

	queue    []*item
	touched  []*item
	cause    events.Event
	causeIdx int
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
		byID:        map[string]*item{},
		calls:       map[string]*call{},
		sideAt:      -1,
		unscopedAt:  writeMark{idx: -1},
		writes:      map[string]writeMark{},
		inferred:    map[string]int{},
		subtasks:    map[string]*subtask{},
		awaitItem:   map[string][]*subtask{},
		pendingPins: map[string]string{},
		wake:        map[int][]*item{},
		l4wake:      map[int][]*item{},
	}
	c.el = &c.pol.Eligibility
	c.cls = newClassifier(c.el)
	c.slotOn = [nSlots]bool{
		sL0: c.el.RungEnabled("L0"), sL1: c.el.RungEnabled("L1"), sL2: c.el.RungEnabled("L2"),
		sL3: c.el.RungEnabled("L3"), sErr: c.el.ErroredEnabled(), sL4: true,
	}
	c.resetIndexes()
	return c
}

func (c *Core) resetIndexes() {
	c.latest = map[string]*item{}
	c.runStart = map[string]*item{}
	c.latestSrc = map[string]*item{}
	c.readsByPath = map[string][]*item{}
	c.targets = map[string]*target{}
	c.refs = map[string][]*item{}
	c.planIn, c.planOut = nil, nil
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
	c.cause = ev
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
	it := c.byID[itemID]
	if it == nil || it.last == nil {
		return events.Mark{}, false
	}
	return *it.last, true
}

func estimate(n int) int { return (n + 3) / 4 }

func (c *Core) newItem(id string, kind itemKind, tokens int) *item {
	if _, dup := c.byID[id]; dup {
		return nil
	}
	if len(c.slab) == 0 {
		c.slab = make([]item, 16)
	}
	it := &c.slab[0]
	c.slab = c.slab[1:]
	*it = item{
		id: id, idx: len(c.items), kind: kind, eventID: c.cause.ID, factIdx: c.causeIdx,
		req: c.requests, tokens: tokens, manualAt: -1, restored: -1, refAt: -1,
	}
	if by, ok := c.pendingPins[id]; ok {
		it.pinned, it.pinBy = true, by
		delete(c.pendingPins, id)
	}
	c.items = append(c.items, it)
	c.byID[id] = it
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
		tok = estimate(len(p.Text))
	}
	it := c.newItem(p.Item, kMessage, tok)
	if it == nil {
		return
	}
	it.role, it.msgKind = p.Role, p.Kind
	c.reference(p.Text)
}

func (c *Core) onToolCall(ev events.Event, p *events.ToolCall) {
	tok := p.InputTokens
	if tok == 0 {
		tok = estimate(len(p.Input))
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
	if cl.kind == kindPlan {
		prevIn, prevOut := c.planIn, c.planOut
		c.planIn, c.planOut = in, nil
		if prevIn != nil {
			c.dirty(prevIn)
		}
		if prevOut != nil {
			c.dirty(prevOut)
		}
	}
	c.reference(string(p.Input))
}

// newCall classifies a call and reads its arguments. It returns the paths
// the call may write and whether it may write anything.
func (c *Core) newCall(id, tool string, input json.RawMessage) (*call, []string, bool) {
	cl := &call{id: id, tool: tool}
	cl.canon, cl.parsed = c.canonical(input)
	cl.key = tool + "\x00" + cl.canon
	spec, known := lookupSpec(tool)
	cl.known = known
	cl.args = extractArgs(spec, cl.parsed)
	cl.class, cl.kind = spec.class, spec.kind
	var writes []string
	unscoped := spec.unscoped
	switch spec.kind {
	case kindShell:
		sh := c.classifyShell(cl.args.command)
		cl.class, cl.kind = sh.class, sh.kind
		if sh.readPath != "" {
			cl.readPath, cl.rng = sh.readPath, sh.rng
		}
		writes, unscoped = sh.writes, sh.unscoped
		cl.target = tool + "\x00prog:" + sh.program
		if sh.readPath != "" {
			cl.target = tool + "\x00" + cleanPath(sh.readPath, c.cwd)
		}
	case kindSWEStrReplace:
		if cl.args.sub == "view" {
			cl.class, cl.kind = events.DeterminismVersioned, kindRead
			cl.readPath, cl.rng = cl.args.path, cl.args.rng
		} else {
			cl.class, cl.kind = events.DeterminismSideEffect, kindWrite
		}
	case kindRead:
		cl.readPath, cl.rng = cl.args.path, cl.args.rng
	}
	if cl.kind == kindWrite && spec.kind != kindShell {
		if cl.args.path != "" {
			writes = append(writes, cl.args.path)
		}
		writes = append(writes, cl.args.patchPaths...)
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
				if cl.args.path != "" {
					writes = []string{cl.args.path}
				} else {
					unscoped = true
				}
			}
			cl.readPath = ""
		case events.DeterminismVersioned:
			writes, unscoped = nil, false
			if cl.readPath == "" && cl.args.path != "" {
				cl.readPath, cl.rng = cl.args.path, cl.args.rng
			}
		default:
			writes, unscoped = nil, false
			cl.readPath = ""
		}
		if cl.kind == kindPlan && ov != events.DeterminismSideEffect {
			cl.kind = kindOther
		}
	}
	if !cl.known {
		// Unknown tool: observed as state, counted as a possible write of
		// anything.
		cl.class = events.DeterminismState
		unscoped = true
	}
	if cl.readPath != "" {
		cl.readPath = cleanPath(cl.readPath, c.cwd)
	}
	cl.url = cl.args.url
	for i, w := range writes {
		writes[i] = cleanPath(w, c.cwd)
	}
	cl.paths = append(cl.paths, writes...)
	if cl.readPath != "" {
		cl.paths = append(cl.paths, cl.readPath)
	} else if cl.args.path != "" && cl.class != events.DeterminismSideEffect {
		cl.paths = append(cl.paths, cleanPath(cl.args.path, c.cwd))
	}
	if cl.target == "" {
		if len(cl.paths) > 0 {
			cl.target = tool + "\x00" + cl.paths[0]
		} else {
			cl.target = tool
		}
	}
	c.matchProtectedPaths(cl)
	return cl, writes, unscoped && cl.class == events.DeterminismSideEffect || !cl.known
}

// canonArgs is one cached canonicalJSON result.
type canonArgs struct {
	canon  string
	parsed any
}

// maxCanonCache bounds the canonical-arguments cache; it is emptied when
// full (only speed depends on it).
const maxCanonCache = 4096

// canonical is canonicalJSON through the core's cache.
func (c *Core) canonical(input []byte) (string, any) {
	if e, ok := c.canon[string(input)]; ok {
		return e.canon, e.parsed
	}
	canon, parsed := canonicalJSON(input)
	if c.canon == nil || len(c.canon) >= maxCanonCache {
		c.canon = map[string]canonArgs{}
	}
	c.canon[string(input)] = canonArgs{canon: canon, parsed: parsed}
	return canon, parsed
}

// classifyShell is classifyShell through the core's cache. The writes
// slice is copied: callers rewrite it in place.
func (c *Core) classifyShell(line string) shellInfo {
	sh, ok := c.shells[line]
	if !ok {
		sh = classifyShell(line)
		if c.shells == nil || len(c.shells) >= maxCanonCache {
			c.shells = map[string]shellInfo{}
		}
		c.shells[line] = sh
	}
	sh.writes = slices.Clone(sh.writes)
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
	if cl.kind == kindPlan {
		return
	}
	c.sideAt = c.causeIdx
	wm := writeMark{idx: c.causeIdx, ev: c.cause.ID}
	if unscoped {
		c.unscopedAt = wm
	}
	for _, w := range writes {
		if w == "" {
			continue
		}
		c.writes["p:"+w] = wm
		c.writes["b:"+path.Base(w)] = wm
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
	for q := p; ; q = path.Dir(q) {
		if i, ok := c.inferred["p:"+q]; ok && i > best {
			best = i
		}
		if q == "." || q == "/" || path.Dir(q) == q {
			break
		}
	}
	return best
}

func (c *Core) scopedWrite(p string) writeMark {
	best := writeMark{idx: -1}
	for q := p; ; q = path.Dir(q) {
		if w, ok := c.writes["p:"+q]; ok && w.idx > best.idx {
			best = w
		}
		if w, ok := c.writes["b:"+path.Base(q)]; ok && w.idx > best.idx {
			best = w
		}
		if q == "." || q == "/" || path.Dir(q) == q {
			break
		}
	}
	return best
}

func (c *Core) onToolResult(ev events.Event, p *events.ToolResult) {
	tokens, hash := 0, ""
	switch {
	case p.OutputRef != nil:
		tokens, hash = p.OutputRef.Tokens, p.OutputRef.Hash
	case p.Output != nil:
		tokens, hash = estimate(len(*p.Output)), events.HashBytes([]byte(*p.Output))
	}
	out := c.newItem(p.Item, kOutput, tokens)
	if out == nil {
		return
	}
	out.hash = hash
	cl := c.calls[p.CallID]
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
	if cl.kind == kindPlan && c.planIn == cl.in && cl.in != nil {
		c.planOut = out
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
			sp := cleanPath(s.Path, c.cwd)
			if cl.readPath == "" || cl.readPath == sp {
				if cl.readPath == "" {
					cl.chgAtCall = c.lastChange(sp)
				}
				cl.readPath = sp
				cl.srcExplicit = true
				if s.Offset != 0 || s.Limit != 0 {
					cl.rng = readRange{off: s.Offset, lim: s.Limit}
				} else if !cl.rng.window && !cl.rng.tail && cl.rng.off == 0 && cl.rng.lim == 0 {
					cl.rng = readRange{full: true}
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
		if !cl.rng.full {
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
	c.l2(out)
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
	it := c.byID[p.Item]
	if it == nil {
		c.pendingPins[p.Item] = p.By
		return
	}
	it.pinned, it.pinBy = true, p.By
	c.dirty(it)
}

func (c *Core) onUnpin(p *events.Unpin) {
	delete(c.pendingPins, p.Item)
	if it := c.byID[p.Item]; it != nil && it.pinned {
		it.pinned = false
		c.dirty(it)
	}
}

func (c *Core) onRestore(p *events.Restore) {
	if it := c.byID[p.Item]; it != nil {
		it.restored = c.causeIdx
		c.dirty(it)
	}
}

func (c *Core) onPruneRequest(p *events.PruneRequest) {
	if it := c.byID[p.Item]; it != nil {
		it.manualAt, it.manualBy, it.manualRs = c.causeIdx, p.By, p.Reason
		c.dirty(it)
	}
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
		it.startKey = markKey(it.last)
		c.touched = append(c.touched, it)
	}
	if !it.queued {
		it.queued = true
		c.queue = append(c.queue, it)
	}
}

// decisionKey is what makes a decision change: decision, rung and reason.
type decisionKey struct {
	set      bool
	decision events.Decision
	rung     events.Rung
	reason   events.Reason
}

func markKey(m *events.Mark) decisionKey {
	if m == nil {
		return decisionKey{}
	}
	return decisionKey{set: true, decision: m.Decision, rung: m.Rung, reason: m.Reason}
}

func isPrune(m *events.Mark) bool { return m != nil && m.Decision == events.Prune }

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
		old, oldSurv := it.cur, it.curSurv
		m, surv := c.judge(it)
		it.cur, it.curSurv = m, surv
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
		if isPrune(old) != isPrune(m) {
			for _, d := range it.dependents {
				c.dirty(d)
			}
			for _, st := range it.conseqOf {
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
	slices.SortFunc(c.touched, func(a, b *item) int { return a.idx - b.idx })
	n := 0
	for _, it := range c.touched {
		if it.cur != nil && markKey(it.cur) != it.startKey {
			n++
		}
	}
	var out []events.Event
	if n > 0 {
		out = make([]events.Event, 0, n)
	}
	for _, it := range c.touched {
		it.touched = false
		if it.cur == nil || markKey(it.cur) == it.startKey {
			continue
		}
		// it.cur is the judge's fresh mark, never modified or shared
		// after: it becomes the emitted mark itself (no copy).
		m := it.cur
		m.Cause = c.cause.ID
		m.CauseIndex = c.causeIdx
		m.PolicyVersion = c.version
		if m.By == "" {
			m.By = By
		}
		id := events.DerivedID("mark", c.tenant, c.session, m.Item, string(m.Decision), string(m.Rung), string(m.Reason), c.cause.ID)
		e := events.New(id, c.tenant, c.session, c.cause.Time, m)
		it.last = m
		out = append(out, e)
	}
	c.touched = c.touched[:0]
	return out
}
