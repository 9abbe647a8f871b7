package eligibility

import (
	"fmt"
	"regexp"
	"strconv"
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
//     short path-like values verbatim, never the bulk). It carries no rung:
//     it is its own rule, not a step of the evidence ladder, labelled
//     "errored" wherever prunes are counted by rule (events.PruneRule). The
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
	t := c.targets[cl.targetKey()]
	if t == nil {
		t = &target{}
		c.targets[cl.targetKey()] = t
	}
	if t.fail != nil && t.fail != in {
		c.dirty(t.fail)
	}
	t.fail, t.resolved = in, false
	if in == nil {
		return
	}
	f := cl.fail
	if f == nil {
		f = new(callFailure)
		cl.fail = f
	}
	f.failIdx = c.causeIdx
	f.failReq = c.requests
	if p.Error != nil {
		f.errType, f.errMsg = p.Error.Type, p.Error.Message
	}
	msg := f.errMsg
	if p.Output != nil {
		msg += "\n" + *p.Output
	}
	f.explains = explainsFailure(cl.parsed, msg)
	if f.errMsg == "" && p.Output != nil {
		f.errMsg = trunc(*p.Output, 2000)
	}
	if in.tokens >= c.el.ErroredMinTokens() {
		c.wakeAt(f.failReq+c.el.ErrorHorizon(), in)
		c.dirty(in)
	}
}

func (c *Core) onSuccess(cl *call) {
	if len(c.targets) == 0 {
		return
	}
	if t := c.targets[cl.targetKey()]; t != nil && t.fail != nil && !t.resolved {
		t.resolved = true
		c.dirty(t.fail)
	}
}

// unresolved reports whether a failed call is the latest failure on its
// target with no later success.
func (c *Core) unresolved(cl *call) bool {
	t := c.targets[cl.targetKey()]
	return t != nil && t.fail == cl.in && !t.resolved
}

// targetKey is what a call's failure is about (call.target), built on
// first use.
func (cl *call) targetKey() string {
	if cl.tgtPath {
		cl.target, cl.tgtPath = cl.tool+"\x00"+cl.paths[0], false
	}
	return cl.target
}

// explainsFailure returns why an error message explains the input, or "".
func explainsFailure(input any, msg string) string {
	if strings.TrimSpace(msg) == "" {
		return ""
	}
	// The pattern ends in \d+ (ASCII digits only): without a digit in the
	// message it cannot match.
	if strings.ContainsAny(msg, "0123456789") {
		if m := pointsIntoRe.FindString(msg); m != "" {
			return fmt.Sprintf("the error message points into the input (%q)", m)
		}
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

// erroredDecision is erroredVerdict without evidence or residue: it sets
// the decision, rung, reason and fact index of v (a zero verdict or one it
// filled before) and returns it, or returns nil when the item has no
// errored proposal.
func (c *Core) erroredDecision(it *item, v *verdict) *verdict {
	cl := it.call
	if it.kind != kInput || cl == nil || cl.fail == nil || it.tokens < c.el.ErroredMinTokens() {
		return nil
	}
	if c.requests-cl.fail.failReq < c.el.ErrorHorizon() {
		v.decision, v.rung, v.reason = events.Defer, "", events.ReasonHorizon
	} else {
		v.decision, v.rung, v.reason = events.Prune, events.RungNone, events.ReasonErroredInput
	}
	v.at = cl.fail.failIdx
	return v
}

// erroredVerdict is the errored-call proposal for an input item, computed
// from the horizon at judge time.
func (c *Core) erroredVerdict(it *item) *verdict {
	var d verdict
	if c.erroredDecision(it, &d) == nil {
		return nil
	}
	v := new(verdict)
	*v = d
	cl := it.call
	f := cl.fail
	since := c.requests - f.failReq
	h := c.el.ErrorHorizon()
	if v.decision == events.Defer {
		v.evidence = []events.Evidence{{Kind: "error_horizon", Item: cl.out.id,
			Value: strconv.Itoa(since) + "/" + strconv.Itoa(h), Detail: strconv.Itoa(since) + " of " + strconv.Itoa(h) + " model requests since the failure"}}
		return v
	}
	msg := f.errMsg
	if msg == "" {
		msg = "(see output item " + cl.out.id + ")"
	}
	v.evidence = []events.Evidence{
		{Kind: "error_horizon", Item: cl.out.id, Value: strconv.Itoa(since) + "/" + strconv.Itoa(h),
			Detail: strconv.Itoa(since) + " model requests since the failure; the error message stays in " + cl.out.id},
	}
	v.residue = &events.Residue{Tool: cl.tool, ErrorType: f.errType, ErrorMessage: trunc(msg, 2000), Skeleton: cl.skeleton()}
	return v
}

// skeleton is the residue skeleton of a failed call's input, computed once (it
// depends only on the arguments, which never change).
func (cl *call) skeleton() string {
	f := cl.fail
	if !f.skelDone {
		f.skel, f.skelDone = skeleton(cl.parsed, []byte(cl.canon)), true
	}
	return f.skel
}
