package peers

import (
	"sort"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/eval/lab/fixtures"
)

// Oracle returns condition F: a PRUNE of every item the fixture labels
// safe, caused by the fact that makes it safe (Label.SafeFrom), with the
// label's rung. Items too small to net a saving over their placeholder
// (PlaceholderTokens or fewer) are left alone, as every condition does.
func Oracle(s *fixtures.Session) []events.Event {
	v := newView(s.Events)
	m := newMarker(v, "F")
	inputOf := map[string]*call{}
	for _, c := range v.calls {
		inputOf[c.in] = c
	}
	ids := make([]string, 0, len(s.Labels))
	for id, l := range s.Labels {
		if l.Class == fixtures.Safe && l.Tokens > PlaceholderTokens {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := s.Labels[ids[i]], s.Labels[ids[j]]
		if a.SafeFrom != b.SafeFrom {
			return a.SafeFrom < b.SafeFrom
		}
		return a.Item < b.Item
	})
	for _, id := range ids {
		l := s.Labels[id]
		rung, reason, part := events.Rung(l.Rung), events.Reason(""), "output"
		var res *events.Residue
		switch l.Rung {
		case fixtures.RungL0:
			reason = events.ReasonDuplicateOutput
		case fixtures.RungL1:
			reason = events.ReasonSameSource
		case fixtures.RungL2:
			reason = events.ReasonSuperseded
			if l.Input {
				part = "input"
			}
		case fixtures.RungL3:
			reason = events.ReasonCompletedResidue
		case fixtures.RungErrored:
			rung, reason, part = events.RungNone, events.ReasonErroredInput, "input"
			if c := inputOf[id]; c != nil {
				res = &events.Residue{Tool: c.tool, ErrorType: c.errType, ErrorMessage: c.errMsg}
			}
		}
		m.prune(id, part, l.Tokens, l.SafeFrom, rung, reason, "fixture label: safe ("+l.Category+")", res, l.Survivor)
	}
	return m.marks
}
