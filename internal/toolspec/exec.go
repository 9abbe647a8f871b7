package toolspec

import (
	"encoding/json"
	"regexp"
	"strings"
)

var execCmdRe = regexp.MustCompile("exec_command\\(\\s*\\{[^{}]*?\\bcmd\\s*:\\s*(\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`)")

// ExecCommands returns the shell commands a Codex code-mode "exec" call
// runs: its input is a JSON string holding a JavaScript snippet, whose
// tools.exec_command({cmd: ...}) calls with a string-literal cmd are the
// commands. An input that is not a JSON string gives none. A call that runs
// exactly one command observes what that command does.
func ExecCommands(input json.RawMessage) []string {
	var js string
	if json.Unmarshal(input, &js) != nil {
		return nil
	}
	return snippetCommands(js)
}

// snippetCommands returns the commands of a code-mode snippet (see
// ExecCommands); a template literal with a substitution is not a known
// command.
func snippetCommands(js string) []string {
	var out []string
	for _, m := range execCmdRe.FindAllStringSubmatch(js, -1) {
		lit := m[1]
		switch lit[0] {
		case '"':
			var s string
			if json.Unmarshal([]byte(lit), &s) == nil {
				out = append(out, s)
			}
		case '\'':
			s := lit[1 : len(lit)-1]
			s = strings.ReplaceAll(s, `\'`, `'`)
			s = strings.ReplaceAll(s, `\\`, `\`)
			out = append(out, s)
		default:
			if !strings.Contains(lit, "${") {
				out = append(out, lit[1:len(lit)-1])
			}
		}
	}
	return out
}
