package toolspec

import (
	"path"
	"regexp"
	"strings"
)

// installPrograms are package managers whose install output is a log.
var installPrograms = map[string]bool{"pip": true, "pip3": true, "npm": true, "yarn": true, "pnpm": true, "bun": true,
	"apt": true, "apt-get": true, "conda": true, "poetry": true, "uv": true, "cargo": true, "go": true, "gem": true, "brew": true}

// IsInstall reports whether a shell command, whose first program is
// program, installs packages: a package manager (pip, npm, apt-get, go, ...)
// given an install, add, i or get word.
func IsInstall(command, program string) bool {
	words := strings.Fields(command)
	if len(words) < 2 || !installPrograms[path.Base(program)] {
		return false
	}
	for _, w := range words[1:] {
		if w == "install" || w == "add" || w == "i" || w == "get" {
			return true
		}
	}
	return false
}

var outputFilterRe = regexp.MustCompile(`\s*(2>&1|\|\s*(head|tail)(\s+-n)?(\s+-?\d+)?)\s*`)

// RunKey is what identifies a run of a shell command (a test run) across
// calls: the command without output redirection and head/tail filters.
func RunKey(command string) string {
	return strings.TrimSpace(outputFilterRe.ReplaceAllString(command, " "))
}
