package main

import (
	"strings"

	"github.com/spf13/pflag"
)

// suggest returns the candidate closest to word (a mistyped command or
// flag), "" when none is close: a candidate that word is a prefix of, else
// the one at the smallest edit distance, within a third of the word's
// length (at least one edit; two for words of six letters or more).
func suggest(word string, candidates []string) string {
	if word == "" {
		return ""
	}
	limit := max(1, len(word)/3)
	best, bestDist := "", limit+1
	for _, c := range candidates {
		if c == word {
			return ""
		}
		if len(word) >= 3 && strings.HasPrefix(c, word) {
			return c
		}
		if d := editDistance(word, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Damerau–Levenshtein distance (optimal string
// alignment: insertions, deletions, substitutions and transpositions of
// two neighbours) between a and b, by bytes.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// commandNames lists the subcommands (and help) for suggestions.
func commandNames() []string {
	names := []string{"help"}
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return names
}

// flagSuggestion adds a "did you mean --X?" to pflag's "unknown flag: --Y"
// error, when one of fs's flags is close to Y.
func flagSuggestion(fs *pflag.FlagSet, err error) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return msg
	}
	name, _, _ = strings.Cut(name, "=")
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	if s := suggest(name, names); s != "" {
		return msg + " (did you mean --" + s + "?)"
	}
	return msg
}
