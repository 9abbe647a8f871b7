package eligibility

import (
	"hash/fnv"
	"strconv"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/terms"
)

// L4, cold and recoverable: the opt-in recoverable policy
// (eligibility.recoverable, off by default), reason COLD_RECOVERABLE. Age
// is never the rule alone. A successful tool output of at least
// recoverable.min_tokens tokens whose text has at least one distinctive
// term (package terms: the later-use signal's definition, read forward in
// time) is cold at model request r when
//
//   - it is old: at least horizon_requests model requests were dispatched
//     after it entered the log, and
//   - it is not referenced: none of its distinctive terms has appeared in
//     the agent's own messages (assistant text and thinking) or tool-call
//     inputs for quiet_requests model requests (counted from its entry
//     when the agent never used one since).
//
// A term already held by recoverable.common_term_items other items of the
// context (messages of any role, tool inputs, tool outputs, since the last
// host compaction) when the output arrives is not watched: it is not
// distinctive of this output (a project path, a package every file
// imports), and its use says nothing about this output. That is also why
// the later-use signal would not count it: it counts only the terms
// nowhere else in the context.
//
// The proposal is PRUNE L4 COLD_RECOVERABLE with the age, the quiet
// stretch and the recovery path in the evidence: recoverable, not proven
// redundant. The recovery path is the log itself: the model asks
// context_recover for the handle its placeholder names and the original
// comes back byte for byte, appended at the end. That path is why the
// L4 rule that an L4 prune needs a recoverable source does not apply to
// it; every other protection does (pins, restores, user and system
// messages, project rules, the active plan, protected tools and files,
// unresolved errors, recent turns), and unique evidence in the sense that
// fits a removal without a survivor: an output that pruned copies or span
// references rely on, or that records a closed subtask's consequence,
// stays (UNIQUE_EVIDENCE).
//
// A proposal stands once made: a term used after it is a recovery, priced
// as one, never a silent re-insertion. An output without a distinctive
// term it does not share with common_term_items other items, or whose
// text the core cannot read (stored by content address without
// SetContent), is never cold: there is nothing to watch, so nothing shows
// that it went cold.
//
// Terms are kept as FNV-64a hashes, so the core holds no output text.
// Cost: one pass over each output's and each message's or tool input's
// terms; a due output is checked once per quiet stretch that ends with a
// new use.

// coldItem is what the rule watches of one output.
type coldItem struct {
	terms []uint64
}

// termHash is the FNV-64a hash of a distinctive term.
func termHash(t string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(t))
	return h.Sum64()
}

// coldRegister starts watching a successful output (called from observe
// with its result) when the recoverable policy is on: its distinctive
// terms held by fewer than common_term_items other items of the context.
func (c *Core) coldRegister(n *item, p *events.ToolResult) {
	if !c.recOn {
		return
	}
	if n.tokens < c.rec.MinTokens || n.tokens < c.el.MinPruneTokens {
		c.coldOther(p)
		return
	}
	text, ok := c.outputText(p)
	if !ok {
		return
	}
	ts := terms.Of(text)
	ci := &coldItem{}
	for _, t := range ts {
		h := termHash(t)
		if int(c.termItems[h]) >= c.rec.CommonTermItems {
			c.termItems[h]++
			continue
		}
		c.termItems[h]++
		ci.terms = append(ci.terms, h)
		if _, ok := c.termLast[h]; !ok {
			c.termLast[h] = -1
		}
	}
	if len(ci.terms) == 0 {
		return
	}
	c.cold[n] = ci
	c.coldWakeAt(int(n.req)+c.rec.HorizonRequests, n)
}

func (c *Core) coldWakeAt(req int, it *item) {
	c.coldWake[req] = append(c.coldWake[req], it)
}

// coldOther counts the terms of a tool output the policy does not watch
// (failed, or below the floors) among the context's.
func (c *Core) coldOther(p *events.ToolResult) {
	if !c.recOn {
		return
	}
	if text, ok := c.outputText(p); ok {
		c.coldText(text, false)
	}
}

// coldText counts the terms of an item's text (a message, a tool input,
// an output not watched) among the context's and, when use is set (the
// agent's own message or tool-call input), records the agent's use of
// them at the current model request.
func (c *Core) coldText(text string, use bool) {
	if !c.recOn || text == "" {
		return
	}
	for _, t := range terms.Of(text) {
		h := termHash(t)
		c.termItems[h]++
		if !use {
			continue
		}
		if _, ok := c.termLast[h]; ok {
			c.termLast[h] = int32(c.requests)
		}
	}
}

// coldDue checks the outputs due at the current model request: a cold one
// gets its proposal, a referenced one is checked again when its quiet
// stretch could end.
func (c *Core) coldDue(its []*item) {
	for _, it := range its {
		ci := c.cold[it]
		if ci == nil {
			continue
		}
		if it.gone || it.slot(sCold) != nil {
			delete(c.cold, it)
			continue
		}
		last := int(it.req)
		for _, h := range ci.terms {
			if u := int(c.termLast[h]); u > last {
				last = u
			}
		}
		if due := max(int(it.req)+c.rec.HorizonRequests, last+c.rec.QuietRequests); due > c.requests {
			c.coldWakeAt(due, it)
			continue
		}
		delete(c.cold, it)
		c.setVerdict(it, sCold, c.coldVerdict(it, last, len(ci.terms)))
	}
}

// coldVerdict is the COLD_RECOVERABLE proposal for it, last used (or
// entered) at model request last, with n distinctive terms watched.
func (c *Core) coldVerdict(it *item, last, n int) *verdict {
	age := strconv.Itoa(c.requests - int(it.req))
	quiet := strconv.Itoa(c.requests - last)
	used := "never used by the agent since it entered"
	if last > int(it.req) {
		used = "last used by the agent at model request " + strconv.Itoa(last)
	}
	h := c.handle(it)
	return c.withEvidence(verdict{decision: events.Prune, rung: events.L4, reason: events.ReasonColdRecoverable},
		events.Evidence{Kind: "age", Value: age, Detail: age + " model requests since it entered (recoverable.horizon_requests " + strconv.Itoa(c.rec.HorizonRequests) + ")"},
		events.Evidence{Kind: "quiet", Value: quiet, Detail: "none of its " + strconv.Itoa(n) + " distinctive terms in the agent's messages or tool inputs for " + quiet +
			" model requests (recoverable.quiet_requests " + strconv.Itoa(c.rec.QuietRequests) + "): " + used},
		events.Evidence{Kind: "recovery", Value: "context_recover " + h, Detail: "recoverable, not proven redundant: context_recover " + h + " returns the original from the log"},
	)
}
