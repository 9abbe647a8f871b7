package eligibility

import (
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

// Tool classes come from package toolspec (the built-in table and the shell
// classifier). Precedence: a policy override (eligibility.tools) wins, then
// the class an importer wrote on the tool result (ToolResult.Determinism),
// then the built-in table, then the shell classifier for shell tools. An
// unknown tool is judged as state and counted as a possible write of
// anything.

// classifier resolves tool classes under one policy.
type classifier struct {
	overrides map[string]events.Determinism
}

func newClassifier(p *policy.Eligibility) *classifier {
	c := &classifier{overrides: map[string]events.Determinism{}}
	for name, cls := range p.Tools {
		c.overrides[name] = events.Determinism(cls)
	}
	return c
}

// override returns the policy class of tool, if any.
func (c *classifier) override(tool string) (events.Determinism, bool) {
	if d, ok := c.overrides[tool]; ok {
		return d, true
	}
	if len(c.overrides) > 0 {
		if d, ok := c.overrides[strings.ToLower(tool)]; ok {
			return d, true
		}
	}
	return "", false
}
