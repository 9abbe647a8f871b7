package peers

import (
	"encoding/json"
	"fmt"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/toolspec"
)

// call is one tool call as the peers see it.
type call struct {
	id       string
	tool     string
	key      string // tool + canonical arguments
	target   string // tool + its main argument (path, command, pattern, url)
	in, out  string // item ids
	inFact   int
	outFact  int // -1 until the result arrives
	failed   bool
	errType  string
	errMsg   string
	inTokens int
	tokens   int // output tokens
}

// view is one session's facts indexed for the peers.
type view struct {
	facts    []events.Event
	session  string
	tenant   string
	calls    []*call          // in call order
	byID     map[string]*call // call id -> call
	requests []int            // fact indices of model requests
	raw      []int            // raw context tokens before each fact index
	closed   map[int][]*call  // fact index of a SubtaskClosed -> outputs observed while open
}

func newView(facts []events.Event) *view {
	v := &view{facts: facts, byID: map[string]*call{}, closed: map[int][]*call{}, raw: make([]int, len(facts)+1)}
	if len(facts) > 0 {
		v.session, v.tenant = facts[0].Session, facts[0].Tenant
	}
	open := map[string][]*call{}
	var order []string
	tok := 0
	for i, ev := range facts {
		v.raw[i] = tok
		switch p := ev.Data.(type) {
		case *events.Message:
			tok += p.Tokens
		case *events.ToolCall:
			tok += p.InputTokens
			c := &call{id: p.CallID, tool: p.Tool, in: p.Item, inFact: i, outFact: -1, inTokens: p.InputTokens}
			c.key, c.target = keys(p.Tool, p.Input)
			v.calls = append(v.calls, c)
			v.byID[p.CallID] = c
		case *events.ToolResult:
			n := 0
			if p.OutputRef != nil {
				n = p.OutputRef.Tokens
			}
			tok += n
			c := v.byID[p.CallID]
			if c == nil {
				continue
			}
			c.out, c.outFact, c.tokens = p.Item, i, n
			if p.IsError {
				c.failed = true
				if p.Error != nil {
					c.errType, c.errMsg = p.Error.Type, p.Error.Message
				}
			}
			for _, st := range order {
				open[st] = append(open[st], c)
			}
		case *events.ModelRequest:
			v.requests = append(v.requests, i)
		case *events.SubtaskOpened:
			if _, ok := open[p.Subtask]; !ok {
				order = append(order, p.Subtask)
				open[p.Subtask] = nil
			}
		case *events.SubtaskClosed:
			v.closed[i] = append(v.closed[i], open[p.Subtask]...)
			delete(open, p.Subtask)
			for k, st := range order {
				if st == p.Subtask {
					order = append(order[:k:k], order[k+1:]...)
					break
				}
			}
		}
	}
	v.raw[len(facts)] = tok
	return v
}

// keys returns the dedup key (tool + canonical arguments) and the kind key
// (tool + main argument) of a call.
func keys(tool string, input json.RawMessage) (string, string) {
	canon, v, ok := toolspec.CanonicalJSON(input)
	if !ok {
		return tool + "\x00" + string(input), tool
	}
	target := tool
	if m, ok := v.(map[string]any); ok {
		for _, k := range []string{"file_path", "path", "command", "pattern", "url"} {
			if s, ok := m[k].(string); ok && s != "" {
				target = tool + "\x00" + s
				break
			}
		}
	}
	return tool + "\x00" + canon, target
}

// requestsBetween counts model requests with fact index in (from, to).
func (v *view) requestsBetween(from, to int) int {
	n := 0
	for _, r := range v.requests {
		if r > from && r < to {
			n++
		}
	}
	return n
}

// marker collects PRUNE marks, at most one per item.
type marker struct {
	v     *view
	by    string
	done  map[string]bool
	marks []events.Event
}

func newMarker(v *view, by string) *marker {
	return &marker{v: v, by: by, done: map[string]bool{}}
}

// prune records a PRUNE of item (part "input" or "output") caused by the
// fact at index cause.
func (m *marker) prune(item, part string, tokens, cause int, rung events.Rung, reason events.Reason, rule string, res *events.Residue, survivor string) {
	if m.done[item] || cause < 0 {
		return
	}
	m.done[item] = true
	c := m.v.facts[cause]
	mk := &events.Mark{
		Item: item, Decision: events.Prune, Rung: rung, Reason: reason, Part: part,
		Evidence:       []events.Evidence{{Kind: "peer_rule", Value: m.by, Detail: rule}},
		Recoverability: &events.Recoverability{Log: c.ID, Survivor: survivor, Command: fmt.Sprintf("prunesched item %s %s", m.v.session, item)},
		Residue:        res, TokensEstimated: max(0, tokens-PlaceholderTokens),
		Cause: c.ID, CauseIndex: cause, PolicyVersion: "lab/" + m.by, By: "lab/" + m.by,
	}
	id := events.DerivedID("mark", m.v.tenant, m.v.session, item, m.by, c.ID)
	m.marks = append(m.marks, events.New(id, m.v.tenant, m.v.session, c.Time, mk))
}

// PlaceholderTokens is the placeholder size the peers' marks assume, the
// same as the eligibility core's.
const PlaceholderTokens = 30
