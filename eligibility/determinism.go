package eligibility

import (
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

// Determinism classes decide whether two identical invocations can be taken
// for the same observation:
//
//   - pure: the output depends only on the arguments (a clock-free
//     transformation). Identical calls are identical observations.
//   - versioned: the output depends on the arguments and on one source (a file)
//     at a version. Two observations agree when the source version provably did
//     not change between them, or when their bytes are identical (the bytes are
//     the source content).
//   - state: the output depends on state the log cannot version (a tree listing,
//     git status, a test run, a query, the clock, the web). Identical calls are
//     the same observation only when no state change is recorded or possible
//     between them.
//   - side_effect: the call changes the world (edit, write, apply_patch, a
//     command that writes). Its output is never deduplicated, and the call
//     itself is a state change for every later observation.
//
// Precedence: a policy override (eligibility.tools) wins, then the class an
// importer wrote on the tool result (ToolResult.Determinism), then the
// built-in table below, then the shell classifier for shell tools. An unknown
// tool is judged as state and counted as a possible write of anything.

// toolKind is what a tool does beyond its class, for the rungs that need it.
type toolKind uint8

const (
	kindOther         toolKind = iota
	kindRead                   // reads one file (versioned by source)
	kindSearch                 // searches a tree (state)
	kindTest                   // runs tests (state)
	kindWrite                  // writes files (side effect)
	kindPlan                   // plan/todo state: changes nothing in the workspace
	kindShell                  // shell command: classified per command
	kindSWEStrReplace          // SWE-agent/OpenHands str_replace_editor: per sub-command
	kindWeb                    // fetches the web (state)
)

// toolSpec is the built-in description of a tool name.
type toolSpec struct {
	class events.Determinism
	kind  toolKind
	// window is true for reads that show a window, never the whole file
	// (SWE-agent open/goto).
	window bool
	// unscoped is true for side effects that may touch any path (subagents,
	// submit).
	unscoped bool
	// planList names the argument holding the whole plan of a plan tool
	// whose every call replaces the plan (TodoWrite, todowrite:
	// "todos"; update_plan: "plan"); "" for plan tools that change one
	// task (TaskCreate, TaskUpdate).
	planList string
}

var (
	specRead   = toolSpec{class: events.DeterminismVersioned, kind: kindRead}
	specWindow = toolSpec{class: events.DeterminismVersioned, kind: kindRead, window: true}
	specSearch = toolSpec{class: events.DeterminismState, kind: kindSearch}
	specState  = toolSpec{class: events.DeterminismState}
	specWeb    = toolSpec{class: events.DeterminismState, kind: kindWeb}
	specWrite  = toolSpec{class: events.DeterminismSideEffect, kind: kindWrite}
	specAny    = toolSpec{class: events.DeterminismSideEffect, unscoped: true}
	specPlan   = toolSpec{class: events.DeterminismSideEffect, kind: kindPlan}
	specTodos  = toolSpec{class: events.DeterminismSideEffect, kind: kindPlan, planList: "todos"}
	specSteps  = toolSpec{class: events.DeterminismSideEffect, kind: kindPlan, planList: "plan"}
	specShell  = toolSpec{class: events.DeterminismSideEffect, kind: kindShell}
	specSRE    = toolSpec{class: events.DeterminismSideEffect, kind: kindSWEStrReplace}
	specPure   = toolSpec{class: events.DeterminismPure}
)

// defaultTools are the built-in classes of the tool names of Claude Code,
// OpenCode, SWE-agent, mini-swe-agent, OpenHands and Codex CLI. Lookup is
// exact first, then by lower-cased name.
var defaultTools = map[string]toolSpec{
	// Claude Code.
	"Read": specRead, "NotebookRead": specRead,
	"Grep": specSearch, "Glob": specSearch, "LS": specSearch,
	"Bash": specShell, "BashOutput": specState, "KillShell": specAny, "KillBash": specAny,
	"Edit": specWrite, "MultiEdit": specWrite, "Write": specWrite, "NotebookEdit": specWrite,
	"WebFetch": specWeb, "WebSearch": specWeb,
	"TodoWrite": specTodos, "TodoRead": specState, "TaskCreate": specPlan, "TaskUpdate": specPlan,
	"TaskList": specState, "TaskGet": specState,
	"Task": specAny, "Agent": specAny, "ExitPlanMode": specPure, "Skill": specState,
	"SlashCommand": specState, "LSP": specState,
	// OpenCode (lower-case names; "edit" is shared with SWE-agent).
	"read": specRead, "grep": specSearch, "glob": specSearch, "list": specSearch,
	"bash": specShell, "edit": specWrite, "write": specWrite, "patch": specWrite,
	"multiedit": specWrite, "apply_patch": specWrite, "webfetch": specWeb,
	"websearch": specWeb, "codesearch": specWeb, "todowrite": specTodos,
	"todoread": specState, "task": specAny, "lsp_diagnostics": specState,
	"lsp_hover": specState, "skill": specState,
	// SWE-agent.
	"open": specWindow, "goto": specState, "scroll_up": specState,
	"scroll_down": specState, "search_file": specSearch, "search_dir": specSearch,
	"find_file": specSearch, "create": specWrite, "submit": specAny,
	"insert": specWrite, "filemap": specRead,
	"str_replace_editor": specSRE, "str_replace_based_edit_tool": specSRE,
	// OpenHands and Codex CLI.
	"execute_bash": specShell, "shell": specShell, "shell_command": specShell,
	"exec_command": specShell, "local_shell": specShell, "update_plan": specSteps,
	"think": specPure, "finish": specPure, "view_image": specRead, "web_search": specWeb,
}

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

// spec returns the built-in spec of a tool name and whether it is known.
func lookupSpec(tool string) (toolSpec, bool) {
	if s, ok := defaultTools[tool]; ok {
		return s, true
	}
	if s, ok := defaultTools[strings.ToLower(tool)]; ok {
		return s, true
	}
	return toolSpec{class: events.DeterminismState}, false
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
