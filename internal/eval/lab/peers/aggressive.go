package peers

import (
	"sort"

	"github.com/prunesched/prunesched/events"
)

// AggressiveConfig configures condition E.
type AggressiveConfig struct {
	// FailedAfter: failed calls (input and output) go once this many
	// requests were sent after the failure. Default 4.
	FailedAfter int
	// AgeRequests: a tool output goes once this many requests were sent
	// after it, unless it is the latest output of its kind (tool and main
	// argument). Default 20.
	AgeRequests int
}

// DefaultAggressive returns E's settings.
func DefaultAggressive() AggressiveConfig { return AggressiveConfig{FailedAfter: 4, AgeRequests: 20} }

// Aggressive returns the marks of condition E, the cleanup pass of the
// spec's opening story, recalculated at every request: duplicate tool calls
// (same tool and arguments) keep only the newest output; failed calls older
// than FailedAfter requests go whole (input and error output); every tool
// output of a subtask the agent closed goes, whatever verified it; and any
// tool output older than AgeRequests requests goes unless it is the latest
// of its kind. It deletes, never summarises.
func Aggressive(facts []events.Event, cfg AggressiveConfig) []events.Event {
	v := newView(facts)
	m := newMarker(v, "E")
	var closedAt []int
	for f := range v.closed {
		closedAt = append(closedAt, f)
	}
	sort.Ints(closedAt)
	for _, f := range v.requests {
		cause := f - 1
		newest := map[string]*call{}
		latestKind := map[string]*call{}
		for i := len(v.calls) - 1; i >= 0; i-- {
			c := v.calls[i]
			if c.outFact < 0 || c.outFact >= f {
				continue
			}
			age := v.requestsBetween(c.outFact, f)
			if n, ok := newest[c.key]; ok {
				m.prune(c.out, "output", c.tokens, cause, events.L4, events.ReasonPredicted, "duplicate tool call: newest kept", nil, n.out)
			} else {
				newest[c.key] = c
			}
			if c.failed && age >= cfg.FailedAfter {
				m.prune(c.in, "input", c.inTokens, cause, events.L4, events.ReasonPredicted, "failed call older than 4 requests", nil, "")
				m.prune(c.out, "output", c.tokens, cause, events.L4, events.ReasonPredicted, "failed call older than 4 requests", nil, "")
			}
			if _, ok := latestKind[c.target]; !ok {
				latestKind[c.target] = c
			} else if age >= cfg.AgeRequests {
				m.prune(c.out, "output", c.tokens, cause, events.L4, events.ReasonPredicted, "older than 20 requests and not the latest of its kind", nil, "")
			}
		}
		for _, cf := range closedAt {
			if cf >= f {
				break
			}
			for _, c := range v.closed[cf] {
				m.prune(c.out, "output", c.tokens, cause, events.L4, events.ReasonPredicted, "output of a subtask the agent closed", nil, "")
			}
		}
	}
	return m.marks
}
