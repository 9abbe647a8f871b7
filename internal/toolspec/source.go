package toolspec

import (
	"encoding/json"

	"github.com/prunesched/prunesched/events"
)

// ShellSource names what a shell command observed, as the eligibility
// core's shell classifier reads it: a single content read of one file gives
// kind "file" with the path and line range (Offset/Limit, 0 when whole or
// when the range is a tail), a search or listing gives kind "search", and
// anything else kind "command". An empty command gives nil.
func ShellSource(command string) *events.SourceIdentity {
	if command == "" {
		return nil
	}
	cc := ClassifyShellCommand(command)
	switch {
	case cc.ReadPath != "":
		s := &events.SourceIdentity{Kind: "file", Path: cc.ReadPath}
		if !cc.Full && !cc.Tail && !cc.Window {
			s.Offset, s.Limit = cc.Offset, cc.Limit
		}
		return s
	case cc.Kind == "search":
		return &events.SourceIdentity{Kind: "search"}
	}
	return &events.SourceIdentity{Kind: "command"}
}

// sourceRule says where a read, search or fetch tool names what it
// observed.
type sourceRule struct {
	kind  string // "file", "search" or "url"
	key   string // the argument holding the path or URL
	lines bool   // a file read whose offset and limit arguments are its range
	cwd   bool   // a search without a path searches the working directory
}

var (
	ruleSearchPath = sourceRule{kind: "search", key: "path", cwd: true}
	ruleFetch      = sourceRule{kind: "url", key: "url"}
)

// sourceTools are the read, search and fetch tools whose source the
// importers record, by the name each harness gives them: Claude Code,
// OpenCode and SWE-agent (shell tools go through ShellSource).
var sourceTools = map[string]sourceRule{
	// Claude Code.
	"Read": {kind: "file", key: "file_path", lines: true},
	"Grep": ruleSearchPath, "Glob": ruleSearchPath, "LS": ruleSearchPath,
	"WebFetch": ruleFetch,
	// OpenCode.
	"read": {kind: "file", key: "filePath", lines: true},
	"grep": ruleSearchPath, "glob": ruleSearchPath, "list": ruleSearchPath,
	"webfetch": ruleFetch,
	// SWE-agent.
	"open":        {kind: "file", key: "path"},
	"search_file": {kind: "search", key: "file"},
	"search_dir":  {kind: "search", key: "dir"},
	"find_file":   {kind: "search", key: "dir"},
}

// ToolSource names what a read, search or fetch call observed, from the
// tool's name and JSON input: a file with its line range, a searched path
// (cwd when a search names none) or a URL. A file read or fetch without
// its path or URL, and any other tool, gives nil.
func ToolSource(tool string, input json.RawMessage, cwd string) *events.SourceIdentity {
	r, ok := sourceTools[tool]
	if !ok {
		return nil
	}
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	v, _ := in[r.key].(string)
	switch r.kind {
	case "search":
		if v == "" && r.cwd {
			v = cwd
		}
		return &events.SourceIdentity{Kind: "search", Path: v}
	case "url":
		if v == "" {
			return nil
		}
		return &events.SourceIdentity{Kind: "url", URL: v}
	}
	if v == "" {
		return nil
	}
	s := &events.SourceIdentity{Kind: "file", Path: v}
	if r.lines {
		s.Offset, s.Limit = lineArg(in["offset"]), lineArg(in["limit"])
	}
	return s
}

// lineArg reads a whole, non-negative line number argument; anything else
// gives 0.
func lineArg(v any) int {
	f, ok := v.(float64)
	if !ok || f < 0 || f > 1<<31 || f != float64(int(f)) {
		return 0
	}
	return int(f)
}
