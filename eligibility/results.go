package eligibility

// Tool results: an output observed, indexed and offered to the rungs.

import (
	"encoding/json"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/toolspec"
)

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
		c.coldOther(p)
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
	var src srcKey // the source identity, for L1
	if cl.readPath != "" {
		w := c.scopedWrite(cl.readPath)
		cl.chgAtResult = c.lastChangeWith(cl.readPath, w)
		cl.scopedAtRes = w.idx
		cl.stable = cl.chgAtCall == cl.chgAtResult
		rk := "full"
		if !cl.rng.Full {
			rk = cl.tool + ":" + cl.rng.String()
		}
		src = srcKey{kind: 'f', a: cl.readPath, b: rk}
	} else if cl.url != "" {
		src = srcKey{kind: 'u', a: cl.url}
	}
	if cl.key == "" {
		return
	}
	c.l0(out)
	c.l1(out, src)
	c.l2(out) // before l1Span: a read that supersedes o does not refer to it
	if c.slotOn[sSpan] {
		c.l1Span(out, p)
	}
	c.l4Register(out)
	c.coldRegister(out, p)
}

func containsStr(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
