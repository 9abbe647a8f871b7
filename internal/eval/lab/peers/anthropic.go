package peers

import "github.com/prunesched/prunesched/events"

// ClearToolUsesConfig is Anthropic's clear_tool_uses_20250919 context
// edit, with its documented defaults.
type ClearToolUsesConfig struct {
	// TriggerTokens: the edit activates when the prompt exceeds this many
	// input tokens. Default 100,000.
	TriggerTokens int
	// Keep is how many of the most recent tool uses keep their results.
	// Default 3.
	Keep int
}

// DefaultClearToolUses returns the documented defaults.
func DefaultClearToolUses() ClearToolUsesConfig {
	return ClearToolUsesConfig{TriggerTokens: 100000, Keep: 3}
}

// ClearToolUses returns the marks of Anthropic's server-side tool-result
// clearing. The client keeps sending the full history, so at every request
// whose full prompt (the raw context) exceeds the trigger, the results of
// every tool use but the Keep most recent are cleared (the prompt as the
// provider counts it, see promptTokens); inputs stay
// (clear_tool_inputs false). exclude_tools and clear_at_least are unset.
func ClearToolUses(facts []events.Event, cfg ClearToolUsesConfig) []events.Event {
	v := newView(facts)
	m := newMarker(v, "clear_tool_uses")
	for _, f := range v.requests {
		if promptTokens(v, f) <= cfg.TriggerTokens {
			continue
		}
		var uses []*call
		for _, c := range v.calls {
			if c.inFact < f {
				uses = append(uses, c)
			}
		}
		for _, c := range uses[:max(0, len(uses)-cfg.Keep)] {
			if c.outFact >= 0 && c.outFact < f {
				m.prune(c.out, "output", c.tokens, f-1, events.L4, events.ReasonPredicted, "clear_tool_uses: prompt over the trigger; not among the 3 most recent tool uses", nil, "")
			}
		}
	}
	return m.marks
}

// promptTokens is the input a request's prompt had: what the provider
// reported (system prompt and tool definitions included, which the log
// does not hold) when the request carries usage, else the raw context
// before it. The client sends the full history, so it is the unpruned
// prompt either way.
func promptTokens(v *view, f int) int {
	if r, ok := v.facts[f].Data.(*events.ModelRequest); ok && r.Usage != nil {
		if u := r.Usage.InputTokens + r.Usage.CacheReadTokens + r.Usage.CacheWriteTokens; u > 0 {
			return u
		}
	}
	return v.raw[f]
}
