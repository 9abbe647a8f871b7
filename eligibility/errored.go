package eligibility

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/prunesched/prunesched/events"
)

// Errored calls. When a tool result has is_error, its call's input item (Part
// "input") is a candidate for removal if it has at least
// errored_input_min_tokens tokens (default 200):
//
//   - before the horizon (error_horizon_requests model requests dispatched
//     after the failure, default 4): DEFER WAITING_HORIZON;
//   - after it: PRUNE ERRORED_INPUT with a residue: tool, error type, error
//     message, and the argument skeleton (keys, sizes in bytes, paths and
//     short path-like values verbatim, never the bulk). The rung is L3: the
//     failed attempt is finished work whose residue is kept, and the two
//     protections below establish that nothing still depends on its bulk.
//
// The error message itself (the failed call's output item) is never judged:
// it always stays. Two protections keep the input:
//
//   - UNRESOLVED_ERROR: the call is the latest failure on its target (the
//     tool and the path it touched; for shell commands the program or the
//     path read; otherwise the tool) and no later call on that target
//     succeeded: the input is the only record of an open problem;
//   - INPUT_EXPLAINS_FAILURE: the error message quotes the input (a line of
//     at least 10 characters of a non-path argument appears verbatim in it)
//     or points into it ("line 12", "column 4", "offset 5012", "position 3").
//     Only the error message the log holds inline (ToolError.Message, or an
//     inline output) is consulted.
type target struct {
	fail     *item // latest failed input on the target
	resolved bool
}

var pointsIntoRe = regexp.MustCompile(`(?i)\b(line|lines|column|col|offset|position|pos|byte|char|character)\s*[:#]?\s*\d+`)

// minQuote is the shortest input fragment whose presence in an error message
// counts as quoting.
const minQuote = 10

func (c *Core) onFailure(cl *call, p *events.ToolResult) {
	in := cl.in
	t := c.targets[cl.target]
	if t == nil {
		t = &target{}
		c.targets[cl.target] = t
	}
	if t.fail != nil && t.fail != in {
		c.dirty(t.fail)
	}
	t.fail, t.resolved = in, false
	if in == nil {
		return
	}
	cl.failed = true
	cl.failIdx = c.causeIdx
	cl.failReq = c.requests
	if p.Error != nil {
		cl.errType, cl.errMsg = p.Error.Type, p.Error.Message
	}
	msg := cl.errMsg
	if p.Output != nil {
		msg += "\n" + *p.Output
	}
	cl.explains = explainsFailure(cl.parsed, msg)
	if cl.errMsg == "" && p.Output != nil {
		cl.errMsg = trunc(*p.Output, 2000)
	}
	if in.tokens >= c.el.ErroredMinTokens() {
		c.wakeAt(cl.failReq+c.el.ErrorHorizon(), in)
		c.dirty(in)
	}
}

func (c *Core) onSuccess(cl *call) {
	if t := c.targets[cl.target]; t != nil && t.fail != nil && !t.resolved {
		t.resolved = true
		c.dirty(t.fail)
	}
}

// unresolved reports whether a failed call is the latest failure on its
// target with no later success.
func (c *Core) unresolved(cl *call) bool {
	t := c.targets[cl.target]
	return t != nil && t.fail == cl.in && !t.resolved
}

// explainsFailure returns why an error message explains the input, or "".
func explainsFailure(input any, msg string) string {
	if strings.TrimSpace(msg) == "" {
		return ""
	}
	if m := pointsIntoRe.FindString(msg); m != "" {
		return fmt.Sprintf("the error message points into the input (%q)", m)
	}
	found := ""
	checked := 0
	leafStrings("", input, func(s string) {
		if found != "" || checked > 5000 {
			return
		}
		for _, line := range strings.Split(s, "\n") {
			checked++
			line = strings.TrimSpace(line)
			if len(line) >= minQuote && strings.Contains(msg, line) {
				found = line
				return
			}
		}
	})
	if found != "" {
		return fmt.Sprintf("the error message quotes the input (%q)", trunc(found, 80))
	}
	return ""
}

// erroredVerdict is the errored-call proposal for an input item, computed
// from the horizon at judge time.
func (c *Core) erroredVerdict(it *item) *verdict {
	cl := it.call
	if it.kind != kInput || cl == nil || !cl.failed || it.tokens < c.el.ErroredMinTokens() {
		return nil
	}
	since := c.requests - cl.failReq
	h := c.el.ErrorHorizon()
	if since < h {
		return &verdict{
			decision: events.Defer, reason: events.ReasonHorizon, at: cl.failIdx,
			evidence: []events.Evidence{{Kind: "error_horizon", Item: cl.out.id,
				Value: fmt.Sprintf("%d/%d", since, h), Detail: fmt.Sprintf("%d of %d model requests since the failure", since, h)}},
		}
	}
	msg := cl.errMsg
	if msg == "" {
		msg = "(see output item " + cl.out.id + ")"
	}
	return &verdict{
		decision: events.Prune, rung: events.L3, reason: events.ReasonErroredInput, at: cl.failIdx,
		evidence: []events.Evidence{
			{Kind: "error_horizon", Item: cl.out.id, Value: fmt.Sprintf("%d/%d", since, h),
				Detail: fmt.Sprintf("%d model requests since the failure; the error message stays in %s", since, cl.out.id)},
		},
		residue: &events.Residue{Tool: cl.tool, ErrorType: cl.errType, ErrorMessage: trunc(msg, 2000), Skeleton: cl.skeleton()},
	}
}

// skeleton is the residue skeleton of the call's input, computed once (it
// depends only on the arguments, which never change).
func (cl *call) skeleton() string {
	if !cl.skelDone {
		cl.skel, cl.skelDone = skeleton(cl.parsed, []byte(cl.canon)), true
	}
	return cl.skel
}
