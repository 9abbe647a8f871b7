package eligibility

// Tool calls: canonical arguments, the call table and the side effects
// (writes, changes) a call has on the paths it touches.

import (
	"encoding/json"
	"path"
	"slices"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/toolspec"
)

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
	if c.recOn { // coldText does nothing without it: spare the copy
		c.coldText(string(p.Input), true)
	}
}

// newCall classifies a call and reads its arguments. It returns the paths
// the call may write and whether it may write anything.
func (c *Core) newCall(id, tool string, input json.RawMessage) (*call, []string, bool) {
	// Slab calls are fresh (zero), and live as long as the items naming
	// them: as long as the core.
	cl := next(&c.slab.calls, callChunk)
	cl.id, cl.tool = id, tool
	e := c.canonical(input, tool)
	spec, args := e.spec, e.args
	cl.canon, cl.parsed, cl.key, cl.known = e.canon, e.parsed, e.key, e.known
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
			writes = append(cl.pathBuf[:0], args.Path)
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
	if cl.paths == nil {
		cl.paths = cl.pathBuf[:0]
	}
	if cl.readPath != "" {
		cl.paths = append(cl.paths, cl.readPath)
	} else if args.Path != "" && cl.class != events.DeterminismSideEffect {
		cl.paths = append(cl.paths, toolspec.CleanPath(args.Path, c.cwd))
	}
	if len(cl.paths) == 0 {
		cl.paths = nil
	}
	if cl.target == "" {
		if len(cl.paths) > 0 {
			cl.tgtPath = true // tool + "\x00" + paths[0], built when first needed
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

// canonArgs is one cached canonicalJSON result, with the call key, the
// tool's spec (toolspec.Lookup) and the arguments (extractArgs) of the
// last tool called with those bytes.
type canonArgs struct {
	canon  string
	parsed any
	tool   string
	key    string // tool + "\x00" + canon
	spec   toolspec.Spec
	known  bool
	args   toolspec.Args
}

// maxCanonCache bounds the canonical-arguments cache; it is emptied when
// full (only speed depends on it).
const maxCanonCache = 4096

// canonical is canonicalJSON through the core's cache, with the call key
// (tool + "\x00" + canonical arguments), the tool's spec and whether it is
// known (toolspec.Lookup), and extractArgs(spec, parsed). The entry is
// shared between calls with the same bytes and tool: it is never
// modified while it names that tool.
func (c *Core) canonical(input []byte, tool string) *canonArgs {
	e := c.canon[string(input)]
	if e != nil && e.tool == tool {
		return e
	}
	if e == nil {
		if c.canon == nil || len(c.canon) >= maxCanonCache {
			c.canon = map[string]*canonArgs{}
		}
		e = new(canonArgs)
		e.canon, e.parsed, _ = toolspec.CanonicalJSON(input)
		c.canon[string(input)] = e
	}
	e.spec, e.known = toolspec.Lookup(tool)
	e.tool, e.key, e.args = tool, tool+"\x00"+e.canon, toolspec.ExtractArgs(e.spec, e.parsed)
	return e
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
func (c *Core) lastChange(p string) int { return c.lastChangeWith(p, c.scopedWrite(p)) }

// lastChangeWith is lastChange with scopedWrite(p) known.
func (c *Core) lastChangeWith(p string, w writeMark) int {
	best := c.unscopedAt.idx
	if w.idx > best {
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
