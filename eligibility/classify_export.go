package eligibility

import (
	"encoding/json"

	"github.com/prunesched/prunesched/events"
)

// CallClass is the built-in classification of one tool call, as the core
// judges it under the default policy: the determinism class, what the call
// does, and for a content read of one file its path and line range. It
// exposes the tool table (determinism.go) and the shell classifier
// (shell.go) to importers and to analyze's shape detection, so they classify
// exactly as the core does instead of keeping a second copy.
type CallClass struct {
	// Class is the determinism class.
	Class events.Determinism
	// Kind is "read", "search", "test", "write", "plan", "web" or "other".
	Kind string
	// Known is false when the tool name is not in the built-in table.
	Known bool
	// Command is the shell command of a shell tool, "" otherwise.
	Command string
	// Program is the first program the shell command runs.
	Program string
	// Path is the file a read observes (a single read of one path), else
	// the path argument of the call, if any.
	Path string
	// ReadPath is set only for a content read of one file.
	ReadPath string
	// Offset and Limit are the read's line range (1-based offset; Limit 0
	// to the end); Full is a whole-file read, Tail the last Limit lines,
	// Window a viewer window of unknown extent.
	Offset, Limit      int
	Full, Tail, Window bool
	// Writes are the paths a side effect names; Unscoped means it may
	// touch any path.
	Writes   []string
	Unscoped bool
}

// ClassifyCall classifies a tool call by its name and JSON input, with the
// built-in tool table and, for shell tools, the shell classifier. It does not
// apply policy overrides.
func ClassifyCall(tool string, input json.RawMessage) CallClass {
	spec, known := lookupSpec(tool)
	_, parsed := canonicalJSON(input)
	args := extractArgs(spec, parsed)
	cc := CallClass{Class: spec.class, Kind: kindName(spec.kind), Known: known, Path: args.path}
	rng := readRange{}
	switch spec.kind {
	case kindShell:
		sh := classifyShell(args.command)
		cc.Command, cc.Program = args.command, sh.program
		cc.Class, cc.Kind = sh.class, kindName(sh.kind)
		cc.ReadPath, rng = sh.readPath, sh.rng
		cc.Writes, cc.Unscoped = sh.writes, sh.unscoped
		if sh.readPath != "" {
			cc.Path = sh.readPath
		}
	case kindSWEStrReplace:
		if args.sub == "view" {
			cc.Class, cc.Kind = events.DeterminismVersioned, kindName(kindRead)
			cc.ReadPath, rng = args.path, args.rng
		} else {
			cc.Class, cc.Kind = events.DeterminismSideEffect, kindName(kindWrite)
		}
	case kindRead:
		cc.ReadPath, rng = args.path, args.rng
	}
	if cc.Kind == kindName(kindWrite) && spec.kind != kindShell {
		if args.path != "" {
			cc.Writes = append(cc.Writes, args.path)
		}
		cc.Writes = append(cc.Writes, args.patchPaths...)
		cc.Unscoped = len(cc.Writes) == 0
	}
	if !known {
		cc.Class, cc.Unscoped = events.DeterminismState, true
	}
	if cc.ReadPath != "" {
		cc.Offset, cc.Limit, cc.Full, cc.Tail, cc.Window = rng.off, rng.lim, rng.full, rng.tail, rng.window
	}
	return cc
}

// ClassifyShellCommand classifies one shell command line as a shell tool's
// call with that command.
func ClassifyShellCommand(command string) CallClass {
	in, _ := json.Marshal(map[string]string{"command": command})
	return ClassifyCall("bash", in)
}

func kindName(k toolKind) string {
	switch k {
	case kindRead:
		return "read"
	case kindSearch:
		return "search"
	case kindTest:
		return "test"
	case kindWrite:
		return "write"
	case kindPlan:
		return "plan"
	case kindWeb:
		return "web"
	case kindShell:
		return "shell"
	case kindSWEStrReplace:
		return "write"
	}
	return "other"
}
