package toolspec

import (
	"slices"
	"strings"

	"github.com/prunesched/prunesched/events"
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
// The built-in table below gives each known tool name its class; shell
// tools are classified per command (shell.go). An unknown tool is judged as
// state and counted as a possible write of anything. Policy overrides are
// the eligibility core's to apply.

// Kind is what a tool does beyond its class, for the rungs that need it.
type Kind uint8

// The kinds of tools.
const (
	KindOther         Kind = iota
	KindRead               // reads one file (versioned by source)
	KindSearch             // searches a tree (state)
	KindTest               // runs tests (state)
	KindWrite              // writes files (side effect)
	KindPlan               // plan/todo state: changes nothing in the workspace
	KindShell              // shell command: classified per command
	KindSWEStrReplace      // SWE-agent/OpenHands str_replace_editor: per sub-command
	KindWeb                // fetches the web (state)
)

// Name is the kind as CallClass reports it: "read", "search", "test",
// "write", "plan", "web", "shell" or "other" (str_replace_editor counts as
// "write").
func (k Kind) Name() string {
	switch k {
	case KindRead:
		return "read"
	case KindSearch:
		return "search"
	case KindTest:
		return "test"
	case KindWrite:
		return "write"
	case KindPlan:
		return "plan"
	case KindWeb:
		return "web"
	case KindShell:
		return "shell"
	case KindSWEStrReplace:
		return "write"
	}
	return "other"
}

// Spec is the built-in description of a tool name.
type Spec struct {
	// Class is the tool's determinism class (for shell tools and
	// str_replace_editor the class of the riskiest call; each call is
	// classified on its own).
	Class events.Determinism
	// Kind is what the tool does.
	Kind Kind
	// Window is true for reads that show a window, never the whole file
	// (SWE-agent open/goto).
	Window bool
	// Unscoped is true for side effects that may touch any path (subagents,
	// submit).
	Unscoped bool
	// PlanList names the argument holding the whole plan of a plan tool
	// whose every call replaces the plan (TodoWrite, todowrite:
	// "todos"; update_plan: "plan"); "" for plan tools that change one
	// task (TaskCreate, TaskUpdate).
	PlanList string
}

var (
	specRead   = Spec{Class: events.DeterminismVersioned, Kind: KindRead}
	specWindow = Spec{Class: events.DeterminismVersioned, Kind: KindRead, Window: true}
	specSearch = Spec{Class: events.DeterminismState, Kind: KindSearch}
	specState  = Spec{Class: events.DeterminismState}
	specWeb    = Spec{Class: events.DeterminismState, Kind: KindWeb}
	specWrite  = Spec{Class: events.DeterminismSideEffect, Kind: KindWrite}
	specAny    = Spec{Class: events.DeterminismSideEffect, Unscoped: true}
	specPlan   = Spec{Class: events.DeterminismSideEffect, Kind: KindPlan}
	specTodos  = Spec{Class: events.DeterminismSideEffect, Kind: KindPlan, PlanList: "todos"}
	specSteps  = Spec{Class: events.DeterminismSideEffect, Kind: KindPlan, PlanList: "plan"}
	specShell  = Spec{Class: events.DeterminismSideEffect, Kind: KindShell}
	specSRE    = Spec{Class: events.DeterminismSideEffect, Kind: KindSWEStrReplace}
	specPure   = Spec{Class: events.DeterminismPure}
)

// defaultTools are the built-in classes of the tool names of Claude Code,
// OpenCode, SWE-agent, mini-swe-agent, OpenHands and Codex CLI. Lookup is
// exact first, then by lower-cased name.
var defaultTools = map[string]Spec{
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

// Lookup returns the built-in spec of a tool name and whether it is known
// (exact name first, then lower-cased). An unknown tool gets the state
// class.
func Lookup(tool string) (Spec, bool) {
	if s, ok := defaultTools[tool]; ok {
		return s, true
	}
	if s, ok := defaultTools[strings.ToLower(tool)]; ok {
		return s, true
	}
	return Spec{Class: events.DeterminismState}, false
}

// dangerOrder lists the classes from harmless to risky.
var dangerOrder = [...]events.Determinism{events.DeterminismPure, events.DeterminismVersioned, events.DeterminismState, events.DeterminismSideEffect}

// danger is a class's place in dangerOrder (0 for an unknown class, as
// pure): four comparisons, no map.
func danger(d events.Determinism) int { return max(slices.Index(dangerOrder[:], d), 0) }

// MaxClass returns the riskier of two classes (pure < versioned < state <
// side_effect): what a comparison of two observations must assume.
func MaxClass(a, b events.Determinism) events.Determinism {
	if danger(b) > danger(a) {
		return b
	}
	return a
}
