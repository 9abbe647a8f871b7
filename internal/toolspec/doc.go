// Package toolspec is what prunesched knows about agent tools, apart from
// any policy: the built-in determinism class and kind of each tool name of
// the supported agents (spec.go), the arguments a call was given (args.go:
// path, URL, shell command, line range, patch targets), the shell-command
// classifier (shell.go), the commands of Codex code-mode exec snippets
// (exec.go), and the canonical forms calls are compared in (canonical JSON,
// cleaned paths). ClassifyCall puts them together for one call.
//
// The eligibility core, the importers, projections and analyze all read
// tools through it, so each tool and each comparison rule is described
// once, and a trace importer needs no part of the eligibility core.
//
// It must not: import any prunesched package but events (it is a leaf the
// cores and the importers share); apply policy (the policy's class
// overrides are the eligibility core's); do I/O or read the clock. Every
// function is a pure function of its arguments.
package toolspec
