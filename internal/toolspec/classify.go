package toolspec

import (
	"encoding/json"

	"github.com/prunesched/prunesched/events"
)

// CallClass is the built-in classification of one tool call, as the
// eligibility core judges it under the default policy: the determinism
// class, what the call does, and for a content read of one file its path and
// line range. It puts the tool table (spec.go), argument extraction
// (args.go) and the shell classifier (shell.go) together for importers and
// analyze's shape detection, so they classify exactly as the core does.
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
	spec, known := Lookup(tool)
	_, parsed, _ := CanonicalJSON(input)
	args := ExtractArgs(spec, parsed)
	cc := CallClass{Class: spec.Class, Kind: spec.Kind.Name(), Known: known, Path: args.Path}
	rng := Range{}
	switch spec.Kind {
	case KindShell:
		sh := ClassifyShell(args.Command)
		cc.Command, cc.Program = args.Command, sh.Program
		cc.Class, cc.Kind = sh.Class, sh.Kind.Name()
		cc.ReadPath, rng = sh.ReadPath, sh.Range
		cc.Writes, cc.Unscoped = sh.Writes, sh.Unscoped
		if sh.ReadPath != "" {
			cc.Path = sh.ReadPath
		}
	case KindSWEStrReplace:
		if args.Sub == "view" {
			cc.Class, cc.Kind = events.DeterminismVersioned, KindRead.Name()
			cc.ReadPath, rng = args.Path, args.Range
		} else {
			cc.Class, cc.Kind = events.DeterminismSideEffect, KindWrite.Name()
		}
	case KindRead:
		cc.ReadPath, rng = args.Path, args.Range
	}
	if cc.Kind == KindWrite.Name() && spec.Kind != KindShell {
		if args.Path != "" {
			cc.Writes = append(cc.Writes, args.Path)
		}
		cc.Writes = append(cc.Writes, args.PatchPaths...)
		cc.Unscoped = len(cc.Writes) == 0
	}
	if !known {
		cc.Class, cc.Unscoped = events.DeterminismState, true
	}
	if cc.ReadPath != "" {
		cc.Offset, cc.Limit, cc.Full, cc.Tail, cc.Window = rng.Off, rng.Lim, rng.Full, rng.Tail, rng.Window
	}
	return cc
}

// ClassifyShellCommand classifies one shell command line as a shell tool's
// call with that command.
func ClassifyShellCommand(command string) CallClass {
	in, _ := json.Marshal(map[string]string{"command": command})
	return ClassifyCall("bash", in)
}

// ClassifyRun classifies a call as ClassifyCall does, and a Codex
// code-mode exec snippet that runs exactly one command (ExecCommands) as
// that command, known.
func ClassifyRun(tool string, input json.RawMessage) CallClass {
	if tool == "exec" {
		if cmds := ExecCommands(input); len(cmds) == 1 {
			cc := ClassifyShellCommand(cmds[0])
			cc.Known = true
			return cc
		}
	}
	return ClassifyCall(tool, input)
}
