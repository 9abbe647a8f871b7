package peers

import "github.com/prunesched/prunesched/events"

// DefaultMaskWindow is how many of the most recent observations masking
// keeps (Lindenbauer et al.).
const DefaultMaskWindow = 10

// Masking returns the marks of observation masking: at every request, every
// tool output but the window most recent is replaced by a placeholder.
func Masking(facts []events.Event, window int) []events.Event {
	v := newView(facts)
	m := newMarker(v, "masking")
	for _, f := range v.requests {
		var obs []*call
		for _, c := range v.calls {
			if c.outFact >= 0 && c.outFact < f {
				obs = append(obs, c)
			}
		}
		for _, c := range obs[:max(0, len(obs)-window)] {
			m.prune(c.out, "output", c.tokens, f-1, events.L4, events.ReasonPredicted, "observation masking: not among the last 10 observations", nil, "")
		}
	}
	return m.marks
}
