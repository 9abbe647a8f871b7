package peers

import (
	"strings"

	"github.com/prunesched/prunesched/events"
)

// DCPConfig is the part of DCP's documented configuration the lab models.
type DCPConfig struct {
	// ErrorTurns is how many model requests an errored call's input waits
	// before it is purged. Default 4.
	ErrorTurns int
	// ProtectedTools are never deduplicated or purged. Default: DCP's
	// documented protected tools (subagents, skills, todos).
	ProtectedTools []string
}

// DefaultDCP returns DCP's documented defaults.
func DefaultDCP() DCPConfig {
	return DCPConfig{ErrorTurns: 4, ProtectedTools: []string{"task", "skill", "todowrite", "todoread"}}
}

func (c DCPConfig) protected(tool string) bool {
	for _, t := range c.ProtectedTools {
		if strings.EqualFold(t, tool) {
			return true
		}
	}
	return false
}

// DCP returns the marks DCP's automatic strategies make on a session's
// facts (in log order), recalculated at every model request:
// deduplication (same tool and same arguments: every output but the newest
// is removed) and error purging (the input of a failed call is removed once
// ErrorTurns requests were sent after its failure; the error text stays).
// Each removal is caused by the last fact before the request that makes it.
func DCP(facts []events.Event, cfg DCPConfig) []events.Event {
	v := newView(facts)
	m := newMarker(v, "DCP")
	for _, f := range v.requests {
		cause := f - 1
		newest := map[string]*call{}
		for i := len(v.calls) - 1; i >= 0; i-- {
			c := v.calls[i]
			if c.outFact < 0 || c.outFact >= f || cfg.protected(c.tool) {
				continue
			}
			if n, ok := newest[c.key]; ok {
				m.prune(c.out, "output", c.tokens, cause, events.L4, events.ReasonPredicted, "deduplication: same tool and arguments as "+n.id+" (newest kept)", nil, n.out)
				continue
			}
			newest[c.key] = c
			if c.failed && v.requestsBetween(c.outFact, f) >= cfg.ErrorTurns {
				res := &events.Residue{Tool: c.tool, ErrorType: c.errType, ErrorMessage: c.errMsg}
				m.prune(c.in, "input", c.inTokens, cause, events.RungNone, events.ReasonErroredInput, "purge errors: input of a failed call after 4 requests; the error text stays", res, c.out)
			}
		}
	}
	return m.marks
}
