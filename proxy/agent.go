package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/agenttools"
	"github.com/prunesched/prunesched/placeholder"
	"github.com/prunesched/prunesched/projections"
)

// The context tools (package agenttools) are answered here. The MCP server
// the agent runs answers a stub: it cannot know the conversation a call
// belongs to. The proxy can: the call is in the answer it records, and its
// result comes back in the session's next request, where the result is a
// new item that no cached prefix holds yet. So the proxy replaces the stub
// with the real answer, decided from that request's own session (tenant,
// credential and conversation: a handle never resolves anywhere else), and
// records the answer as the tool result's output. Every later request of
// the conversation resends the stub; the proxy splices the recorded answer
// in its place, byte for byte, so the prefix the provider cached stays
// valid.
//
// context_prune becomes one PruneRequest fact per handle, by
// events.ByAgent: eligibility judges it like a rung proposal, with every
// protection, and answers with a mark caused by it; the scheduler applies
// an accepted one at the next cache-safe point, with the rule-based
// removals. The proxy appends those facts, waits for their marks and only
// then writes the answer: accepted (queued), or refused with the
// protection, in plain words.
//
// context_recover answers the original item byte for byte from the log,
// appended where the tool result is: the placeholder stays where it is.

// agentCall is a context tool's result new in a request.
type agentCall struct {
	kind agenttools.Kind
	res  *block
	tool string // the tool's name as the agent calls it
	// input is the call's arguments (nil: the call is not in the request).
	input json.RawMessage
	asks  []agentAsk
	// answer replaces the MCP server's stub.
	answer string
}

// agentAsk is one handle of a context_prune call.
type agentAsk struct {
	handle string
	index  int
	item   string
	// fact is the id of its PruneRequest fact, "" when the handle was
	// answered without one (line says why).
	fact string
	line string
}

// Outcomes counted by prunesched_proxy_agent_requests_total and
// prunesched_proxy_recoveries_total (their reasons for invalid input).
const (
	outcomeAccepted  = "accepted"
	outcomeRefused   = "refused"
	outcomeInvalid   = "invalid"
	outcomeRecovered = "recovered"
	outcomeNotFound  = "not_found"

	invalidGarbled  = "garbled"
	invalidNotFound = "not_found"
	invalidRemoved  = "already_removed"
	invalidNotYours = "not_removable"
	invalidTooMany  = "too_many"
)

// agentCalls returns the context-tool results among blocks (the request's
// new blocks), in order, with their calls' arguments from the request.
func agentCalls(c *conversation, blocks []*block) []*agentCall {
	calls := contextCalls(c)
	var out []*agentCall
	for _, b := range blocks {
		if b.kind != bToolResult {
			continue
		}
		tool := b.tool
		call := calls[b.callID]
		if call != nil {
			tool = call.tool
		}
		k, ok := agenttools.Match(tool)
		if !ok {
			continue
		}
		ac := &agentCall{kind: k, res: b, tool: tool}
		if call != nil {
			ac.input = call.input
			if call.inputIsString {
				var s string
				if json.Unmarshal(call.input, &s) == nil {
					ac.input = json.RawMessage(s)
				}
			}
		}
		out = append(out, ac)
	}
	return out
}

// contextCalls returns the request's context-tool calls by call id (nil
// when none): their results are the ones the proxy answers (agentCalls)
// and splices the recorded answer of (render).
func contextCalls(c *conversation) map[string]*block {
	var calls map[string]*block
	for _, b := range c.blocks {
		if b.kind != bToolUse {
			continue
		}
		if _, ok := agenttools.Match(b.tool); ok {
			if calls == nil {
				calls = map[string]*block{}
			}
			calls[b.callID] = b
		}
	}
	return calls
}

// prepareAgent answers the context_list and context_recover calls and
// turns every context_prune handle into a PruneRequest fact (returned) or
// an answer line, from the session's state before this request's facts.
func (p *Proxy) prepareAgent(ctx context.Context, pl *plan, calls []*agentCall, tenant string) ([]events.Event, error) {
	var items []projections.ContextItem
	p.view(pl, func(s *projections.Session) { items = s.ContextItems() })
	var facts []events.Event
	for _, ac := range calls {
		switch ac.kind {
		case agenttools.List:
			var args agenttools.ListArgs
			if err := agenttools.DecodeArgs(ac.kind, ac.input, &args); err != nil {
				ac.answer = "prunesched: " + err.Error()
				continue
			}
			ac.answer = p.listAnswer(items, args.Limit)
		case agenttools.Recover:
			ans, outcome := p.recoverAnswer(ctx, pl, items, ac.input)
			ac.answer = ans
			p.met.recovery(outcome)
		case agenttools.Prune:
			facts = append(facts, p.pruneAsks(pl, items, ac, tenant)...)
		}
	}
	return facts, nil
}

// inContext reports whether an item is in the model's context: not
// removed by the host itself.
func inContext(it *projections.ContextItem) bool { return !it.HostCompacted && !it.HostPruned }

// listAnswer is context_list's answer: the largest items in context with
// their handles and state.
func (p *Proxy) listAnswer(items []projections.ContextItem, limit int) string {
	if limit <= 0 {
		limit = 30
	}
	limit = min(limit, 200)
	var live []*projections.ContextItem
	for i := range items {
		if inContext(&items[i]) {
			live = append(live, &items[i])
		}
	}
	sort.SliceStable(live, func(i, j int) bool { return live[i].Tokens > live[j].Tokens })
	n := min(limit, len(live))
	var b strings.Builder
	fmt.Fprintf(&b, "prunesched: the %d largest of %d items in context (handle, item, tokens, age in model requests, status). context_prune takes these handles; context_recover brings back a removed one.\n", n, len(live))
	for _, it := range live[:n] {
		fmt.Fprintf(&b, "%s  %s  %d tokens  age %d  %s\n", placeholder.Handle(it.Index), itemLabel(it), it.Tokens, it.Age, p.status(it))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// itemLabel names an item for the model: which part of which call, and
// what it read.
func itemLabel(it *projections.ContextItem) string {
	var s string
	switch it.Kind {
	case projections.ItemToolUse:
		s = "input of " + orUnknown(it.Tool)
	case projections.ItemToolResult:
		s = "output of " + orUnknown(it.Tool)
	case projections.ItemThinking:
		return "assistant thinking"
	default:
		return string(it.Role) + " text"
	}
	if it.Source != "" {
		s += " " + it.Source
	}
	return s
}

// status is an item's state in plain words: removed, pending removal,
// protected and why, or kept.
func (p *Proxy) status(it *projections.ContextItem) string {
	var b strings.Builder
	switch m := it.Mark; {
	case it.Pruned:
		b.WriteString("removed (")
		placeholder.WriteRule(&b, it.Applied.Rung, it.Applied.Reason)
		b.WriteByte(')')
	case m != nil && m.Decision == events.Prune:
		b.WriteString("pending removal (")
		placeholder.WriteRule(&b, m.Rung, m.Reason)
		b.WriteString("), applied at the next cache-safe point")
	case it.Pinned:
		b.WriteString("protected (PINNED)")
	case m != nil && m.Decision == events.Keep && len(m.Protection) > 0:
		b.WriteString("protected (")
		for i, r := range m.Protection {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(string(r))
		}
		b.WriteByte(')')
	case it.Role == events.RoleUser && it.Kind == projections.ItemText:
		b.WriteString("protected (USER_MESSAGE)")
	case it.Role == events.RoleSystem:
		b.WriteString("protected (SYSTEM_PROMPT)")
	case it.Kind == projections.ItemText || it.Kind == projections.ItemThinking:
		b.WriteString("kept (assistant text is not removable)")
	case it.Age < p.cfg.Policy.Eligibility.RecentTurns():
		b.WriteString("protected (RECENT_TURN)")
	default:
		b.WriteString("kept")
	}
	return b.String()
}

// resolve finds the item a handle names, in context, or says why not.
func resolve(items []projections.ContextItem, handle string) (*projections.ContextItem, string, string) {
	n, err := agenttools.ParseHandle(handle)
	if err != nil {
		return nil, err.Error(), invalidGarbled
	}
	if n >= len(items) {
		return nil, "not found: no item " + placeholder.Handle(n) + " in this session", invalidNotFound
	}
	it := &items[n]
	if !inContext(it) {
		return nil, "not found: " + placeholder.Handle(n) + " left the context (the agent compacted it)", invalidNotFound
	}
	return it, "", ""
}

// maxReasonBytes bounds the agent's reason recorded with its request.
const maxReasonBytes = 500

// pruneAsks turns a context_prune call's handles into PruneRequest facts
// (by the agent, with its reason), answering invalid ones at once.
func (p *Proxy) pruneAsks(pl *plan, items []projections.ContextItem, ac *agentCall, tenant string) []events.Event {
	var args agenttools.PruneArgs
	if err := agenttools.DecodeArgs(ac.kind, ac.input, &args); err != nil {
		ac.answer = "prunesched: " + err.Error()
		p.met.agentRequest(outcomeInvalid, invalidGarbled)
		return nil
	}
	if len(args.Handles) == 0 {
		ac.answer = "prunesched: context_prune: no handles given (want handles such as [\"#12\"])"
		p.met.agentRequest(outcomeInvalid, invalidGarbled)
		return nil
	}
	if len(args.Handles) > agenttools.MaxHandles {
		ac.answer = fmt.Sprintf("prunesched: context_prune: %d handles, at most %d in one call; nothing was requested", len(args.Handles), agenttools.MaxHandles)
		p.met.agentRequest(outcomeInvalid, invalidTooMany)
		return nil
	}
	reason := truncUTF8(strings.ToValidUTF8(args.Reason, "\uFFFD"), maxReasonBytes)
	var facts []events.Event
	seen := map[int]bool{}
	for i, h := range args.Handles {
		ask := agentAsk{handle: truncUTF8(h, 40), index: -1}
		it, why, inv := resolve(items, h)
		switch {
		case it == nil:
			ask.line = why
		case seen[it.Index]:
			ask.line = "already asked above in this call"
			inv = invalidGarbled
		case it.Pruned:
			ask.line = "already removed; context_recover " + placeholder.Handle(it.Index) + " brings it back"
			inv = invalidRemoved
		case it.Kind == projections.ItemThinking || it.Kind == projections.ItemText && it.Role == events.RoleAssistant:
			ask.line = "not removable: only tool inputs and outputs can be removed at the agent's request"
			inv = invalidNotYours
		default:
			seen[it.Index] = true
			ask.index, ask.item = it.Index, it.ID
			ask.fact = events.DerivedID("proxy-agent-prune", pl.tenant, pl.session, ac.res.item, strconv.Itoa(i), it.ID)
			facts = append(facts, events.New(ask.fact, tenant, pl.session, pl.at, &events.PruneRequest{Item: it.ID, By: events.ByAgent, Reason: reason}))
		}
		if ask.line != "" {
			p.met.agentRequest(outcomeInvalid, inv)
		}
		ac.asks = append(ac.asks, ask)
	}
	return facts
}

// pruneAnswer writes context_prune's answer once eligibility judged its
// facts: one line per handle.
func (p *Proxy) pruneAnswer(pl *plan, ac *agentCall) {
	if ac.answer != "" {
		return // refused as a whole (bad arguments)
	}
	var marks map[string]events.Mark
	p.view(pl, func(s *projections.Session) {
		for _, a := range ac.asks {
			if a.fact == "" {
				continue
			}
			if m, ok := s.MarkCausedBy(a.fact, a.item); ok {
				if marks == nil {
					marks = map[string]events.Mark{}
				}
				marks[a.fact] = m
			}
		}
	})
	var b strings.Builder
	accepted := 0
	lines := make([]string, len(ac.asks))
	for i, a := range ac.asks {
		h := a.handle
		if a.index >= 0 {
			h = placeholder.Handle(a.index)
		}
		switch m, ok := marks[a.fact]; {
		case a.fact == "":
			lines[i] = h + " " + a.line
		case !ok:
			lines[i] = h + " not judged: eligibility made no decision on it; nothing changes"
			p.met.agentRequest(outcomeRefused, "not_judged")
		case m.Decision == events.Prune:
			accepted++
			var rule strings.Builder
			placeholder.WriteRule(&rule, m.Rung, m.Reason)
			lines[i] = h + " accepted (" + rule.String() + "): " + p.queuedUntil() + "; context_recover " + h + " brings it back"
			p.met.agentRequest(outcomeAccepted, string(m.Reason))
		default:
			lines[i] = h + " refused: " + refusal(&m)
			p.met.agentRequest(outcomeRefused, string(m.Reason))
		}
	}
	fmt.Fprintf(&b, "prunesched: %d of %d accepted.", accepted, len(ac.asks))
	for _, l := range lines {
		b.WriteString("\n")
		b.WriteString(l)
	}
	ac.answer = b.String()
}

// queuedUntil says when an accepted removal takes effect, from the
// policy's triggers.
func (p *Proxy) queuedUntil() string {
	s := p.cfg.Policy.Scheduler
	pressure := "context passes " + strconv.FormatFloat(s.PressurePercent, 'f', -1, 64) + "% of the window"
	if s.PressureTokens > 0 {
		pressure = "context passes " + strconv.Itoa(s.PressureTokens) + " tokens"
	}
	return "queued until a cache-safe point (the prompt cache expires, a subtask closes, " + pressure + ", or the saving pays for the cache break), then removed with the rule-based removals in one rewrite"
}

// refusal says in plain words why eligibility kept an item: its
// protection and the protection's own detail.
func refusal(m *events.Mark) string {
	why := string(m.Reason)
	for _, e := range m.Evidence {
		if e.Kind == "protection" && e.Value == string(m.Reason) && e.Detail != "" {
			why += ": " + e.Detail
			break
		}
	}
	if info, ok := m.Reason.Info(); ok && m.Reason == events.ReasonNoSaving {
		why += ": " + info.Description
	}
	return "protected (" + why + ")"
}

// recoverAnswer is context_recover's answer: the original item byte for
// byte, or why not.
func (p *Proxy) recoverAnswer(ctx context.Context, pl *plan, items []projections.ContextItem, input json.RawMessage) (string, string) {
	var args agenttools.RecoverArgs
	if err := agenttools.DecodeArgs(agenttools.Recover, input, &args); err != nil {
		return "prunesched: " + err.Error(), outcomeInvalid
	}
	it, why, _ := resolve(items, args.Handle)
	if it == nil {
		if strings.HasPrefix(why, "not found") {
			return "prunesched: " + why, outcomeNotFound
		}
		return "prunesched: " + why, outcomeInvalid
	}
	h := placeholder.Handle(it.Index)
	if !it.Pruned {
		return "prunesched: " + h + " is not removed: it is in your context as it was.", outcomeInvalid
	}
	var o projections.Original
	var ok bool
	p.view(pl, func(s *projections.Session) { o, ok = s.OriginalOf(it.Index) })
	if !ok {
		return "prunesched: not found: no item " + h + " in this session", outcomeNotFound
	}
	switch {
	case o.Kind == projections.ItemToolUse:
		return string(o.Input), outcomeRecovered
	case o.Output != nil || o.Hash != "":
		text, n, err := p.outputText(ctx, pl, o)
		switch {
		case err != nil:
			return "prunesched: " + h + " could not be read from the log (" + err.Error() + "); try again", outcomeInvalid
		case n >= 0:
			return "prunesched: " + h + " holds bytes that are not text (" + strconv.Itoa(n) + " bytes); `prunesched item` shows them", outcomeInvalid
		}
		return text, outcomeRecovered
	}
	return o.Text, outcomeRecovered
}

// outputText returns a tool output's text, inline or fetched by content
// address. n is the output's size when it is not valid UTF-8 (text is
// then empty), -1 otherwise.
func (p *Proxy) outputText(ctx context.Context, pl *plan, o projections.Original) (text string, n int, err error) {
	if o.Output != nil {
		return *o.Output, -1, nil
	}
	s, err := p.blobOf(ctx, pl, o.Hash)
	if err != nil {
		return "", -1, err
	}
	if !utf8.ValidString(s) {
		return "", len(s), nil
	}
	return s, -1, nil
}

// answerOf returns the recorded answer of a context-tool result the log
// already holds (the stub's replacement), from the session's cache or the
// log. Caller holds st.mu.
func (p *Proxy) answerOf(ctx context.Context, pl *plan, item string) (string, bool) {
	if a, ok := pl.st.answers[item]; ok {
		return a, true
	}
	var o projections.Original
	var ok bool
	p.view(pl, func(s *projections.Session) {
		if i, found := s.IndexOf(item); found {
			o, ok = s.OriginalOf(i)
		}
	})
	if !ok || o.Output == nil && o.Hash == "" {
		return "", false
	}
	a, n, err := p.outputText(ctx, pl, o)
	if err != nil || n >= 0 {
		return "", false
	}
	pl.st.rememberAnswer(item, a)
	return a, true
}

// maxAnswers bounds the answers a session's state keeps in memory (the
// log holds them all).
const maxAnswers = 256

// rememberAnswer caches a context-tool answer by result item.
func (st *sessState) rememberAnswer(item, answer string) {
	if st.answers == nil || len(st.answers) >= maxAnswers {
		st.answers = map[string]string{}
	}
	st.answers[item] = answer
}
