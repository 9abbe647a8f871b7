package projections

import (
	"fmt"
	"strings"
)

// The unit words every output uses for its figures, so that one number
// has one meaning across analyze, stats, sessions, the inspector and the
// docs (the glossary in docs/cli.md defines them for users).
const (
	// UnitContextNow labels tokens of the session's context as it is now
	// (the bundle the next request would send): tokens removed from it,
	// net of the placeholders that replace them.
	UnitContextNow = "in context now"
	// UnitTokensSent labels prompt tokens summed over every model request
	// of a session: what pruning saves is the tokens not sent.
	UnitTokensSent = "tokens sent (summed over requests)"
	// UnitPromptCost labels dollars: the prompts' cost at the provider's
	// prices, with cache reads and writes, summed over requests.
	UnitPromptCost = "prompt cost (USD)"
)

// NotYetSaved says why a session that has prunes shows no saving, "" when
// it has none or a saving can show: prunes is the session's PRUNE
// decisions, applied those an application put into effect, requests the
// model requests its economics priced. With no priced request (the only
// request failed open, or none followed the decision) nothing was sent
// with the prune yet; with none applied, the scheduler still waits.
func NotYetSaved(prunes, applied, requests int) string {
	switch {
	case prunes == 0:
		return ""
	case requests == 0:
		return fmt.Sprintf("%d prune%s decided, not yet applied to any priced request (no model request recorded with the session yet)", prunes, plural(prunes))
	case applied == 0:
		return fmt.Sprintf("%d prune%s decided, not yet applied to any request (the scheduler waits for a cache-safe point; 'prunesched pending' says why)", prunes, plural(prunes))
	}
	return ""
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// maxTitle bounds a title taken from a user message, in runes.
const maxTitle = 80

// TitleLine is the title of a session whose start names none: the first
// non-blank line of its first user message, cut at 80 runes with "…".
// The CLI's sessions and the inspector both show it.
func TitleLine(s string) string {
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if r := []rune(line); len(r) > maxTitle {
			return string(r[:maxTitle-1]) + "…"
		}
		return line
	}
	return ""
}
