package eligibility

import (
	"path"
	"strconv"
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/toolspec"
)

// L4, predicted irrelevant: a heuristic, off by default (eligibility.l4).
// When on, a successful tool output that names a file path or URL (its read
// path, source path, or url argument) is predicted irrelevant once
// l4_min_age_requests model requests (default 10) were dispatched after it
// and no later item referred to it: no later message text or tool-call input
// contains its path, its base name or its URL as a token. A reference at any
// time afterwards rules it out for good.
//
// The prediction is PRUNE L4 PREDICTED_IRRELEVANT with the age and the
// absence of references in the evidence, and it is only carried out when the
// content is recoverable from its source: a versioned read whose path has no
// write recorded or possible since it was read, and that never changed
// outside the log (two reads of it disagreed with no write between)
// (Recoverability.Source names it). Otherwise UNIQUE_EVIDENCE keeps it. The core sees only content
// addresses of outputs, never their text, so identifiers inside an output
// are not tracked: that is why L4 needs a recoverable source, and why it is
// off by default.
func (c *Core) l4Register(n *item) {
	if !c.el.L4 {
		return
	}
	cl := n.call
	var kb [3]string
	keys := kb[:0]
	if cl.readPath != "" {
		keys = append(keys, cl.readPath, path.Base(cl.readPath))
	} else if len(cl.paths) > 0 {
		keys = append(keys, cl.paths[0], path.Base(cl.paths[0]))
	}
	if cl.url != "" {
		keys = append(keys, cl.url)
	}
	if len(keys) == 0 {
		return
	}
	for _, k := range keys {
		c.refs[k] = append(c.refs[k], n)
	}
	at := int(n.req) + c.el.L4MinAgeRequests
	c.l4wake[at] = append(c.l4wake[at], n)
}

// l4Due is called when an output reaches the L4 age.
func (c *Core) l4Due(it *item) {
	if it.gone || it.refAt >= 0 {
		return
	}
	cl := it.call
	source := ""
	_, volatile := c.inferred[cl.readPath]
	if cl.readPath != "" && !volatile && cl.class == events.DeterminismVersioned && cl.stable && c.lastChange(cl.readPath) == cl.chgAtResult {
		v := cl.srcVersion
		if v == "" {
			v = cl.srcHash
		}
		if v == "" {
			v = "unchanged-since-" + it.eventID
		}
		source = cl.readPath + "@" + v
	}
	age := strconv.Itoa(c.requests - int(it.req))
	c.setVerdict(it, sL4, c.withEvidence(verdict{
		decision: events.Prune, rung: events.L4, reason: events.ReasonPredicted, source: source,
	},
		events.Evidence{Kind: "age", Value: age, Detail: age + " model requests since it entered (l4_min_age_requests " + strconv.Itoa(c.el.L4MinAgeRequests) + ")"},
		events.Evidence{Kind: "references", Value: sourceName(cl), Detail: "no later message or tool input mentions it"},
	))
}

// reference records that text mentions paths, base names or URLs: outputs
// registered under them are referenced and never L4.
func (c *Core) reference(text string) {
	if len(c.refs) == 0 || text == "" {
		return
	}
	// The fields of strings.FieldsFunc(text, isRefSep), without the slice:
	// every separator is ASCII, so splitting bytes splits the same runes.
	for start := 0; start < len(text); {
		for start < len(text) && text[start] < 0x80 && isRefSep(rune(text[start])) {
			start++
		}
		end := start
		for end < len(text) && !(text[end] < 0x80 && isRefSep(rune(text[end]))) {
			end++
		}
		if end == start {
			break
		}
		tok := text[start:end]
		start = end
		tok = strings.TrimRight(tok, ".:")
		if i := strings.LastIndexByte(tok, ':'); i > 0 && isDigits(tok[i+1:]) {
			tok = tok[:i]
		}
		if tok == "" {
			continue
		}
		c.referenced(tok)
		if cp := toolspec.CleanPath(tok, c.cwd); cp != tok {
			c.referenced(cp)
		}
		if b := path.Base(tok); b != tok {
			c.referenced(b)
		}
	}
}

func (c *Core) referenced(key string) {
	its, ok := c.refs[key]
	if !ok {
		return
	}
	delete(c.refs, key)
	for _, it := range its {
		if it.refAt >= 0 {
			continue
		}
		it.refAt = int32(c.causeIdx)
		if it.slot(sL4) != nil {
			it.v[sL4] = nil
			c.dirty(it)
		}
	}
}

func isRefSep(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '"', '\'', '`', '(', ')', '[', ']', '{', '}', '<', '>', ',', ';', '|', '=':
		return true
	}
	return false
}

// isDigits reports whether s is a non-empty run of ASCII digits (a line
// number after "path:").
func isDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
