package events

// Reason is an enumerated reason code carried by marks, certificates and
// metrics. The list is closed and documented: add a code here, with its
// description, before using it anywhere.
type Reason string

// Reason codes.
const (
	// Prunes.
	ReasonDuplicateOutput  Reason = "DUPLICATE_OUTPUT"
	ReasonSameSource       Reason = "SAME_SOURCE_VERSION"
	ReasonSpanReference    Reason = "SPAN_REFERENCE"
	ReasonSuperseded       Reason = "SUPERSEDED"
	ReasonErroredInput     Reason = "ERRORED_INPUT"
	ReasonCompletedResidue Reason = "COMPLETED_RESIDUE"
	ReasonPredicted        Reason = "PREDICTED_IRRELEVANT"
	ReasonColdRecoverable  Reason = "COLD_RECOVERABLE"
	ReasonManualPrune      Reason = "MANUAL_PRUNE"
	ReasonAgentRequest     Reason = "AGENT_REQUEST"
	// Keeps.
	ReasonSurvivingCopy  Reason = "SURVIVING_COPY"
	ReasonUnique         Reason = "UNIQUE"
	ReasonPinned         Reason = "PINNED"
	ReasonUserMessage    Reason = "USER_MESSAGE"
	ReasonSystemPrompt   Reason = "SYSTEM_PROMPT"
	ReasonProjectRule    Reason = "PROJECT_RULE"
	ReasonActivePlan     Reason = "ACTIVE_PLAN"
	ReasonUnresolved     Reason = "UNRESOLVED_ERROR"
	ReasonUniqueEvidence Reason = "UNIQUE_EVIDENCE"
	ReasonRecentTurn     Reason = "RECENT_TURN"
	ReasonProtectedTool  Reason = "PROTECTED_TOOL"
	ReasonProtectedFile  Reason = "PROTECTED_FILE"
	ReasonRestored       Reason = "RESTORED"
	ReasonNoSaving       Reason = "NO_SAVING"
	// Defers.
	ReasonHorizon          Reason = "WAITING_HORIZON"
	ReasonAwaitConsequence Reason = "AWAITING_CONSEQUENCE"
	// Abstentions.
	ReasonStateChanged      Reason = "STATE_MAY_HAVE_CHANGED"
	ReasonDifferentOutput   Reason = "SAME_CALL_DIFFERENT_OUTPUT"
	ReasonUnverifiedClosure Reason = "UNVERIFIED_CLOSURE"
	ReasonNoConsequence     Reason = "CONSEQUENCE_NOT_RECORDED"
	ReasonNeedsJudgement    Reason = "NEEDS_SEMANTIC_JUDGEMENT"
	ReasonUnknownTool       Reason = "UNKNOWN_DETERMINISM"
	// Added by the eligibility core.
	ReasonExplainsFailure Reason = "INPUT_EXPLAINS_FAILURE"
)

// ReasonInfo documents a reason code.
type ReasonInfo struct {
	Code        Reason   `json:"code"`
	Decision    Decision `json:"decision"`
	Description string   `json:"description"`
}

// ReasonTable is the documented list of reason codes, used by code,
// certificates, metrics and docs alike.
var ReasonTable = []ReasonInfo{
	{ReasonDuplicateOutput, Prune, "L0: byte-identical output of the same tool with the same canonical arguments; another copy stays in context (the earliest, or the newest under keep_copy last)"},
	{ReasonSameSource, Prune, "L1: same immutable or versioned source at the same version or content hash, nothing recorded between that could change it"},
	{ReasonSpanReference, Prune, "L1 span (on by default, eligibility.span_refs): runs of at least span_min_lines lines that repeat a contiguous run of an earlier tool output still in context (byte for byte, or a numbered read's lines renumbered) are rendered as a reference (earlier item, line ranges, sha256 of the run); the rest of the output stays verbatim. The evidence names the earlier item and each run; the reference falls when that item is pruned or leaves the context"},
	{ReasonSuperseded, Prune, "L2: a newer observation provably subsumes this one; the subsumption check is in the evidence"},
	{ReasonErroredInput, Prune, "errored input (no rung; \"errored\" in summaries): the large input of a failed call, past the error horizon; the residue (tool, error type and message, argument skeleton) stays"},
	{ReasonCompletedResidue, Prune, "L3: work whose closure an outside check verified and whose consequence is recorded elsewhere in context"},
	{ReasonPredicted, Prune, "L4: predicted irrelevant by a heuristic (off by default)"},
	{ReasonColdRecoverable, Prune, "L4, the opt-in recoverable policy (eligibility.recoverable, off by default): a successful tool output older than horizon_requests model requests none of whose distinctive terms (those in fewer than common_term_items other items of the context) the agent has used for quiet_requests model requests, with every protection clear; recoverable, not proven redundant: the model fetches it back with context_recover"},
	{ReasonManualPrune, Prune, "a person asked for this item to be pruned"},
	{ReasonAgentRequest, Prune, "the agent asked for this item to be removed (context_prune) and no protection stood in the way: not proven redundant; the model recovers it with context_recover"},
	{ReasonSurvivingCopy, Keep, "the copy that stays when its duplicates are pruned"},
	{ReasonUnique, Keep, "no evidence that the item is redundant"},
	{ReasonPinned, Keep, "pinned by a person"},
	{ReasonUserMessage, Keep, "user messages are protected"},
	{ReasonSystemPrompt, Keep, "the system prompt is protected"},
	{ReasonProjectRule, Keep, "project-rule file (CLAUDE.md, AGENTS.md, .cursorrules, ...)"},
	{ReasonActivePlan, Keep, "active plan or todo state"},
	{ReasonUnresolved, Keep, "a failure with no later success on the same target"},
	{ReasonUniqueEvidence, Keep, "content found nowhere else in context and not recoverable from its source"},
	{ReasonRecentTurn, Keep, "inside the protected window of recent turns"},
	{ReasonProtectedTool, Keep, "output of a tool the policy protects"},
	{ReasonProtectedFile, Keep, "observation of a file matching a protected pattern"},
	{ReasonRestored, Keep, "restored by a person after a prune"},
	{ReasonNoSaving, Keep, "the agent asked for a removal that would save nothing: the placeholder is as large as the item"},
	{ReasonHorizon, Defer, "eligible once the error horizon has passed"},
	{ReasonAwaitConsequence, Defer, "eligible once the work's consequence is recorded elsewhere"},
	{ReasonStateChanged, Abstain, "state-dependent observation with a recorded or possible state change since the other copy"},
	{ReasonDifferentOutput, Abstain, "same call, different output: not a duplicate"},
	{ReasonUnverifiedClosure, Abstain, "work marked done without an outside check recorded in the log"},
	{ReasonNoConsequence, Abstain, "completed work whose consequence is not recorded elsewhere"},
	{ReasonNeedsJudgement, Abstain, "removal would need semantic judgement"},
	{ReasonUnknownTool, Abstain, "tool determinism class unknown"},
	{ReasonExplainsFailure, Keep, "the input of a failed call explains the failure: the error message quotes it or points into it (line, column, offset)"},
}

var reasonSet = func() map[Reason]ReasonInfo {
	m := make(map[Reason]ReasonInfo, len(ReasonTable))
	for _, r := range ReasonTable {
		m[r.Code] = r
	}
	return m
}()

// Known reports whether r is a documented reason code.
func (r Reason) Known() bool { _, ok := reasonSet[r]; return ok }

// Info returns the documentation of r.
func (r Reason) Info() (ReasonInfo, bool) { i, ok := reasonSet[r]; return i, ok }

// ByAgent is the By of a PruneRequest the model made through the
// context_prune tool: eligibility judges it like a rung proposal, every
// protection applying, not like a person's manual prune. A person's By is
// any other name.
const ByAgent = "agent"

// Control modes: who decided a removal (the spec's three).
const (
	ControlRule   = "rule"
	ControlAgent  = "agent"
	ControlPerson = "person"
)

// Control is the control mode behind a mark: "person" for a person's
// manual prune, pin or restore, "agent" for a mark eligibility made on the
// agent's request (accepted or refused), "rule" for the evidence ladder.
func Control(m *Mark) string {
	switch {
	case m.By == ByAgent:
		return ControlAgent
	case m.Reason == ReasonManualPrune || m.Reason == ReasonPinned || m.Reason == ReasonRestored:
		return ControlPerson
	}
	return ControlRule
}

// PruneRule is the one label of the rule behind a PRUNE, wherever prunes
// are counted or shown by rule (analyze's summary, the stats projection,
// docs/results.md): the rung (L0 to L4) for a prune on the evidence ladder,
// "errored" for the errored-input rule (reason ERRORED_INPUT, which carries
// no rung: the failed attempt's residue stays, the error message too), and
// "manual" for a person's prune, "agent" for one the agent asked for.
// Errored-input marks of logs written when
// they carried L3 are labelled "errored" too.
func PruneRule(r Rung, why Reason) string {
	switch {
	case why == ReasonErroredInput:
		return "errored"
	case why == ReasonAgentRequest:
		return "agent"
	case why == ReasonManualPrune || r == RungNone:
		return "manual"
	}
	return string(r)
}
