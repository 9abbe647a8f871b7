package policy

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
)

// Eligibility configures the eligibility core. The zero value with
// setDefaults applied is the shipped policy; every field documents its
// default.
type Eligibility struct {
	// KeepCopy says which of two copies of one observation (L0 identical
	// copies, L1 one source version) stays in context: "first" (the
	// earliest copy still in context; the newcomer, never sent, goes at no
	// cache cost, and falls back to "last" when the earliest copy is pruned
	// or gone) or "last" (the newest, as DCP does). Default "first".
	KeepCopy string `yaml:"keep_copy,omitempty" json:"keep_copy,omitempty"`
	// Tools overrides the determinism class of a tool by name:
	// pure, versioned, state or side_effect. It wins over the built-in
	// defaults and over a class an importer wrote on the tool result.
	// Default: none (built-in defaults for Claude Code, OpenCode, SWE-agent
	// and mini-swe-agent tool names; unknown tools are state).
	Tools map[string]string `yaml:"tools,omitempty" json:"tools,omitempty"`
	// ProtectedTools are tool names whose inputs and outputs are never
	// pruned automatically. Default: none beyond the property-derived
	// protections.
	ProtectedTools []string `yaml:"protected_tools,omitempty" json:"protected_tools,omitempty"`
	// ProtectedFiles are glob patterns (path.Match, also matched against the
	// base name) of files whose observations are never pruned. Default none.
	ProtectedFiles []string `yaml:"protected_files,omitempty" json:"protected_files,omitempty"`
	// ProjectRuleFiles are the project-rule files whose reads are never
	// pruned. A pattern without "/" matches the base name; one with "/"
	// matches the end of the path. Default DefaultProjectRuleFiles.
	ProjectRuleFiles []string `yaml:"project_rule_files,omitempty" json:"project_rule_files,omitempty"`
	// ProtectRecentTurns is how many model requests an item stays protected
	// after it enters the log (a turn is one model request). 0 disables.
	// Default 2.
	ProtectRecentTurns *int `yaml:"protect_recent_turns,omitempty" json:"protect_recent_turns,omitempty"`
	// ErrorHorizonRequests is how many model requests after a failed call its
	// large input waits before it may be pruned. Default 4 (as DCP).
	ErrorHorizonRequests *int `yaml:"error_horizon_requests,omitempty" json:"error_horizon_requests,omitempty"`
	// ErroredInputMinTokens: a failed call's input smaller than this is not
	// pruned. Default 200.
	ErroredInputMinTokens *int `yaml:"errored_input_min_tokens,omitempty" json:"errored_input_min_tokens,omitempty"`
	// MinPruneTokens: items smaller than this are not worth a placeholder.
	// Default 0 (prune whatever is proven redundant and nets a saving).
	MinPruneTokens int `yaml:"min_prune_tokens,omitempty" json:"min_prune_tokens,omitempty"`
	// Rungs is the set of evidence rungs that may propose a decision: any of
	// L0, L1, L2, L3. A rung left out proposes nothing (no PRUNE, DEFER or
	// ABSTAIN), so the core falls through to the next rung's evidence. It
	// does not govern errored inputs (see ErroredInputs) nor L4 (see L4).
	// Default [L0, L1, L2]: L3 is opt-in (see DefaultRungs). Used by the
	// Context Lab to run the spec's conditions (B: [L0, L1]; D: [L0, L1, L2]).
	Rungs []string `yaml:"rungs,omitempty" json:"rungs,omitempty"`
	// ErroredInputs turns on errored-input pruning (the large input of a
	// failed call, past the error horizon, with its residue kept). Default
	// true.
	ErroredInputs *bool `yaml:"errored_inputs,omitempty" json:"errored_inputs,omitempty"`
	// L4 turns on the predicted-irrelevant rung (a heuristic). Default false.
	L4 bool `yaml:"l4,omitempty" json:"l4,omitempty"`
	// L4MinAgeRequests is how many model requests a tool output must have
	// been in context, unreferenced, before L4 may predict it irrelevant.
	// Default 10.
	L4MinAgeRequests int `yaml:"l4_min_age_requests,omitempty" json:"l4_min_age_requests,omitempty"`
	// SpanRefs turns span references (L1 span, reason SPAN_REFERENCE) on
	// or off: a tool output's lines that repeat a contiguous run of at
	// least SpanMinLines lines of an earlier tool output still in context
	// are rendered as one reference line naming that output, both line
	// ranges and the run's hash; the rest stays verbatim. Default true:
	// the Context Lab's D row found no false prune with them, the same
	// recall, and more saved.
	SpanRefs *bool `yaml:"span_refs,omitempty" json:"span_refs,omitempty"`
	// SpanMinLines is the shortest run of repeated lines a span reference
	// replaces. Default DefaultSpanMinLines (8).
	SpanMinLines int `yaml:"span_min_lines,omitempty" json:"span_min_lines,omitempty"`
	// Recoverable is the opt-in recoverable policy (reason
	// COLD_RECOVERABLE): tool outputs that have gone cold leave the
	// context, recoverable by handle (context_recover), not proven
	// redundant. Default: off (nil, the same policy version as
	// enabled: false).
	Recoverable *Recoverable `yaml:"recoverable,omitempty" json:"recoverable,omitempty"`
}

// Recoverable configures the opt-in recoverable policy. A successful tool
// output is cold once it is older than HorizonRequests model requests and
// no distinctive term of it (package terms) has appeared in the agent's
// messages or tool inputs for QuietRequests model requests; a cold output
// of at least MinTokens tokens is pruned (L4 COLD_RECOVERABLE) where no
// protection stands. Age is never enough on its own. A zero field means
// its default.
type Recoverable struct {
	// Enabled turns the policy on. Default false.
	Enabled bool `yaml:"enabled" json:"enabled"`
	// HorizonRequests is how many model requests an output must have been
	// in the log before it can be cold. Default
	// DefaultRecoverableHorizonRequests.
	HorizonRequests int `yaml:"horizon_requests,omitempty" json:"horizon_requests,omitempty"`
	// QuietRequests is how many model requests must have passed since the
	// agent last used one of the output's distinctive terms (or since the
	// output entered, when it never did). Default
	// DefaultRecoverableQuietRequests.
	QuietRequests int `yaml:"quiet_requests,omitempty" json:"quiet_requests,omitempty"`
	// MinTokens is the smallest output the policy removes: below it a
	// recovery, should it be needed, costs more than the removal saves.
	// Default DefaultRecoverableMinTokens.
	MinTokens int `yaml:"min_tokens,omitempty" json:"min_tokens,omitempty"`
	// CommonTermItems: a distinctive term already in this many other items
	// of the context (messages, tool inputs and outputs since the last host
	// compaction) when an output arrives is too common to show a use of
	// that output, so the output's quiet stretch does not watch it.
	// Default DefaultRecoverableCommonTermItems.
	CommonTermItems int `yaml:"common_term_items,omitempty" json:"common_term_items,omitempty"`
}

// Defaults of the recoverable policy's fields, tuned on the 8 shared
// Claude Code traces with analyze --compare (docs/cli.md): the lowest cost
// with recoveries of a grid over horizon 5-40, quiet 3-20 and min_tokens
// 300-3000; then common_term_items (3-7, with quiet 8-10 and min_tokens
// 450-600) the best on the worse of two halves of the traces split by
// file name. The horizon equals the quiet stretch, which is counted from
// the output's entry when the agent never used its terms.
const (
	DefaultRecoverableHorizonRequests = 10
	DefaultRecoverableQuietRequests   = 10
	DefaultRecoverableMinTokens       = 600
	DefaultRecoverableCommonTermItems = 4
)

// RecoverableOn returns the effective recoverable policy and whether it
// is enabled. The result has every default filled in.
func (e *Eligibility) RecoverableOn() (Recoverable, bool) {
	if e.Recoverable == nil || !e.Recoverable.Enabled {
		return Recoverable{}, false
	}
	r := *e.Recoverable
	r.setDefaults()
	return r, true
}

func (r *Recoverable) setDefaults() {
	if r.HorizonRequests == 0 {
		r.HorizonRequests = DefaultRecoverableHorizonRequests
	}
	if r.QuietRequests == 0 {
		r.QuietRequests = DefaultRecoverableQuietRequests
	}
	if r.MinTokens == 0 {
		r.MinTokens = DefaultRecoverableMinTokens
	}
	if r.CommonTermItems == 0 {
		r.CommonTermItems = DefaultRecoverableCommonTermItems
	}
}

func (r *Recoverable) validate() error {
	if r.HorizonRequests < 0 {
		return fmt.Errorf("horizon_requests: must be >= 0")
	}
	if r.QuietRequests < 0 {
		return fmt.Errorf("quiet_requests: must be >= 0")
	}
	if r.MinTokens < 0 {
		return fmt.Errorf("min_tokens: must be >= 0")
	}
	if r.CommonTermItems < 0 {
		return fmt.Errorf("common_term_items: must be >= 0")
	}
	return nil
}

// Determinism classes accepted in Eligibility.Tools.
const (
	ClassPure       = "pure"
	ClassVersioned  = "versioned"
	ClassState      = "state"
	ClassSideEffect = "side_effect"
)

// DefaultProjectRuleFiles are the project-rule files of the common agent
// hosts.
var DefaultProjectRuleFiles = []string{
	"CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "AGENT.md", "GEMINI.md",
	"CONVENTIONS.md", ".cursorrules", ".cursor/rules/*", ".windsurfrules",
	".clinerules", ".github/copilot-instructions.md", ".aider.conf.yml",
}

// Shipped defaults of the eligibility fields that are pointers (so that an
// explicit 0 in the policy file is kept).
const (
	DefaultProtectRecentTurns    = 2
	DefaultErrorHorizonRequests  = 4
	DefaultErroredInputMinTokens = 200
	DefaultL4MinAgeRequests      = 10
	DefaultSpanMinLines          = 8
)

func intPtr(v int) *int { return &v }

// DefaultRungs is the default value of Eligibility.Rungs: the proof rungs
// L0-L2. L3 (completed-work residue) is opt-in: the Context Lab showed a
// verified, consequence-recorded subtask can still hold the only copy of a
// constraint (5 false prunes in its default run, none with L0-L2), and
// precision comes before recall.
func DefaultRungs() []string { return []string{"L0", "L1", "L2"} }

// normalizeRungs sorts and de-duplicates the valid entries of Rungs and
// turns the full default set into nil, so that an explicit default and an
// omitted field give the same policy version. Invalid entries are kept for
// validate to report.
func (e *Eligibility) normalizeRungs() {
	if e.Rungs == nil {
		return
	}
	seen := map[string]bool{}
	out := []string{}
	for _, r := range e.Rungs {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	sort.Strings(out)
	if strings.Join(out, ",") == strings.Join(DefaultRungs(), ",") {
		out = nil
	}
	e.Rungs = out
}

// SpanMin is the effective SpanMinLines: DefaultSpanMinLines when unset
// (0 stays in the file so the default policy's version does not change),
// and never below 2 (a one-line run is not worth a reference line).
func (e *Eligibility) SpanMin() int {
	switch {
	case e.SpanMinLines == 0:
		return DefaultSpanMinLines
	case e.SpanMinLines < 2:
		return 2
	}
	return e.SpanMinLines
}

func (e *Eligibility) setDefaults() {
	if e.KeepCopy == "" {
		e.KeepCopy = "first"
	}
	if e.ProjectRuleFiles == nil {
		e.ProjectRuleFiles = append([]string(nil), DefaultProjectRuleFiles...)
	}
	if e.ProtectRecentTurns == nil {
		e.ProtectRecentTurns = intPtr(DefaultProtectRecentTurns)
	}
	if e.ErrorHorizonRequests == nil {
		e.ErrorHorizonRequests = intPtr(DefaultErrorHorizonRequests)
	}
	if e.ErroredInputMinTokens == nil {
		e.ErroredInputMinTokens = intPtr(DefaultErroredInputMinTokens)
	}
	if e.L4MinAgeRequests == 0 {
		e.L4MinAgeRequests = DefaultL4MinAgeRequests
	}
	e.normalizeRungs()
	if e.ErroredInputs != nil && *e.ErroredInputs {
		e.ErroredInputs = nil // the default: same version as omitted
	}
	if e.SpanRefs != nil && *e.SpanRefs {
		e.SpanRefs = nil // the default: same version as omitted
	}
	if r := e.Recoverable; r != nil {
		if !r.Enabled && *r == (Recoverable{}) {
			e.Recoverable = nil // the default: same version as omitted
		} else if r.Enabled {
			d := *r // a copy: policies are copied by value and share the pointer
			d.setDefaults()
			e.Recoverable = &d
		}
	}
}

func (e *Eligibility) validate() error {
	switch e.KeepCopy {
	case "last", "first":
	default:
		return fmt.Errorf("keep_copy: bad value %q (want last or first)", e.KeepCopy)
	}
	names := make([]string, 0, len(e.Tools))
	for n := range e.Tools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		switch e.Tools[n] {
		case ClassPure, ClassVersioned, ClassState, ClassSideEffect:
		default:
			return fmt.Errorf("tools.%s: bad value %q (want pure, versioned, state or side_effect)", n, e.Tools[n])
		}
	}
	for i, p := range e.ProtectedFiles {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("protected_files[%d]: bad pattern %q: %v", i, p, err)
		}
	}
	for i, p := range e.ProjectRuleFiles {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("project_rule_files[%d]: bad pattern %q: %v", i, p, err)
		}
	}
	if e.ProtectRecentTurns != nil && *e.ProtectRecentTurns < 0 {
		return fmt.Errorf("protect_recent_turns: must be >= 0")
	}
	if e.ErrorHorizonRequests != nil && *e.ErrorHorizonRequests < 0 {
		return fmt.Errorf("error_horizon_requests: must be >= 0")
	}
	if e.ErroredInputMinTokens != nil && *e.ErroredInputMinTokens < 0 {
		return fmt.Errorf("errored_input_min_tokens: must be >= 0")
	}
	if e.SpanMinLines < 0 {
		return fmt.Errorf("span_min_lines: must be >= 0")
	}
	if e.MinPruneTokens < 0 {
		return fmt.Errorf("min_prune_tokens: must be >= 0")
	}
	if e.L4MinAgeRequests < 0 {
		return fmt.Errorf("l4_min_age_requests: must be >= 0")
	}
	if r := e.Recoverable; r != nil {
		if err := r.validate(); err != nil {
			return fmt.Errorf("recoverable.%w", err)
		}
	}
	if e.Rungs != nil && len(e.Rungs) == 0 {
		return fmt.Errorf("rungs: empty (list at least one of L0, L1, L2, L3, or omit it for all)")
	}
	for i, r := range e.Rungs {
		switch r {
		case "L0", "L1", "L2", "L3":
		default:
			return fmt.Errorf("rungs[%d]: bad value %q (want L0, L1, L2 or L3)", i, r)
		}
	}
	return nil
}

// RungEnabled reports whether rung r ("L0".."L3") may propose decisions.
// L4 is governed by the L4 field, not by Rungs.
func (e *Eligibility) RungEnabled(r string) bool {
	if e.Rungs == nil {
		return r == "L4" && e.L4 || slices.Contains(DefaultRungs(), r)
	}
	if r == "L4" {
		return e.L4
	}
	for _, x := range e.Rungs {
		if x == r {
			return true
		}
	}
	return false
}

// SpanRefsEnabled returns the effective span_refs.
func (e *Eligibility) SpanRefsEnabled() bool {
	return e.SpanRefs == nil || *e.SpanRefs
}

// ErroredEnabled returns the effective errored_inputs.
func (e *Eligibility) ErroredEnabled() bool {
	return e.ErroredInputs == nil || *e.ErroredInputs
}

// RecentTurns returns the effective protect_recent_turns.
func (e *Eligibility) RecentTurns() int {
	if e.ProtectRecentTurns == nil {
		return DefaultProtectRecentTurns
	}
	return *e.ProtectRecentTurns
}

// ErrorHorizon returns the effective error_horizon_requests.
func (e *Eligibility) ErrorHorizon() int {
	if e.ErrorHorizonRequests == nil {
		return DefaultErrorHorizonRequests
	}
	return *e.ErrorHorizonRequests
}

// ErroredMinTokens returns the effective errored_input_min_tokens.
func (e *Eligibility) ErroredMinTokens() int {
	if e.ErroredInputMinTokens == nil {
		return DefaultErroredInputMinTokens
	}
	return *e.ErroredInputMinTokens
}
