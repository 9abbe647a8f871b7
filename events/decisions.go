package events

// Decision is an eligibility outcome for one item.
type Decision string

// The four decisions. ABSTAIN is the honest "cannot establish safety".
const (
	Keep    Decision = "KEEP"
	Prune   Decision = "PRUNE"
	Defer   Decision = "DEFER"
	Abstain Decision = "ABSTAIN"
)

// Decisions lists every decision in a stable order.
var Decisions = []Decision{Keep, Prune, Defer, Abstain}

// Rung is the evidence level a prune stands on.
type Rung string

// The evidence ladder.
const (
	RungNone Rung = ""
	// L0: identical rendered copy.
	L0 Rung = "L0"
	// L1: same immutable or versioned source.
	L1 Rung = "L1"
	// L2: superseded observation.
	L2 Rung = "L2"
	// L3: completed-work residue.
	L3 Rung = "L3"
	// L4: predicted irrelevant (heuristic; off by default).
	L4 Rung = "L4"
)

// Rungs lists the ladder in order of increasing risk.
var Rungs = []Rung{L0, L1, L2, L3, L4}

func (d Decision) valid() bool {
	switch d {
	case Keep, Prune, Defer, Abstain:
		return true
	}
	return false
}

func (r Rung) valid() bool {
	switch r {
	case RungNone, L0, L1, L2, L3, L4:
		return true
	}
	return false
}

// Evidence is one thing a decision consulted.
type Evidence struct {
	// Kind says what was compared ("content_hash", "canonical_args",
	// "source_version", "subsumption", "verification", "protection", ...).
	Kind string `json:"kind" enum:"knownEvidence"`
	// Item is the other item consulted, if any (the surviving copy).
	Item   string `json:"item,omitempty"`
	Hash   string `json:"hash,omitempty"`
	Value  string `json:"value,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Recoverability says how a pruned item can be brought back.
type Recoverability struct {
	// Log is the event id that holds the original in the log.
	Log string `json:"log"`
	// Blob is the content address of the original payload, if any.
	Blob string `json:"blob,omitempty"`
	// Source is "path@version" when the source itself is still available.
	Source string `json:"source,omitempty"`
	// Survivor is the item that still holds an identical copy in context.
	Survivor string `json:"survivor,omitempty"`
	// Command is how a person recovers it.
	Command string `json:"command,omitempty"`
}

// Residue is what survives of a pruned errored call.
type Residue struct {
	Tool         string `json:"tool"`
	ErrorType    string `json:"error_type,omitempty"`
	ErrorMessage string `json:"error_message"`
	// Skeleton is the argument skeleton: keys, sizes and paths, no bulk.
	Skeleton string `json:"skeleton,omitempty"`
}

// Mark is an eligibility decision recorded as an event, with its
// certificate. The latest mark for an item wins.
type Mark struct {
	Item     string   `json:"item"`
	Decision Decision `json:"decision" enum:"knownDecisions"`
	Rung     Rung     `json:"rung,omitempty" enum:"knownRungs"`
	Reason   Reason   `json:"reason" enum:"knownReasons"`
	// Part is "output" or "input": which half of a tool call the mark
	// removes ("" for message items).
	Part     string     `json:"part,omitempty" enum:"knownParts"`
	Evidence []Evidence `json:"evidence,omitempty" fastdecode:"fMarkEvidence"`
	// Recoverability is set on PRUNE marks.
	Recoverability *Recoverability `json:"recoverability,omitempty" fastdecode:"fMarkRecoverability"`
	// Protection lists the protection reasons in force (empty if none).
	Protection []Reason `json:"protection,omitempty" enum:"knownReasons"`
	Residue    *Residue `json:"residue,omitempty"`
	// TokensEstimated is the estimated tokens removed net of the placeholder.
	TokensEstimated int `json:"tokens_estimated"`
	// Cause is the id of the fact event that led to this decision, and
	// CauseIndex its position among the session's facts (0-based). The
	// scheduler considers a mark at a request only if CauseIndex is before
	// the request, so decisions do not depend on publish interleaving.
	Cause         string `json:"cause"`
	CauseIndex    int    `json:"cause_index"`
	PolicyVersion string `json:"policy_version"`
	// By is "eligibility", "agent" (a mark made on the agent's request,
	// ByAgent) or the person who made a manual decision.
	By string `json:"by,omitempty" enum:"knownBy"`
}

// EventType implements Payload.
func (*Mark) EventType() Type { return TypeMark }

func (p *Mark) validate() error {
	if err := validItem("item", p.Item); err != nil {
		return err
	}
	if p.Decision == "" {
		return dataErr("decision", "missing")
	}
	if !p.Decision.valid() {
		return dataErr("decision", "bad value %q (want KEEP, PRUNE, DEFER or ABSTAIN)", p.Decision)
	}
	if !p.Rung.valid() {
		return dataErr("rung", "bad value %q (want L0..L4)", p.Rung)
	}
	if p.Decision == Prune && p.Rung == RungNone && p.Reason != ReasonManualPrune && p.Reason != ReasonErroredInput && p.Reason != ReasonAgentRequest {
		return dataErr("rung", "a PRUNE needs a rung (only MANUAL_PRUNE, AGENT_REQUEST and ERRORED_INPUT have none)")
	}
	if p.Reason == "" {
		return dataErr("reason", "missing")
	}
	if !p.Reason.Known() {
		return dataErr("reason", "unknown reason code %q", p.Reason)
	}
	switch p.Part {
	case "", "output", "input":
	default:
		return dataErr("part", "bad value %q (want output or input)", p.Part)
	}
	if p.Cause == "" {
		return dataErr("cause", "missing")
	}
	if p.CauseIndex < 0 {
		return dataErr("cause_index", "negative")
	}
	if p.PolicyVersion == "" {
		return dataErr("policy_version", "missing")
	}
	for i, r := range p.Protection {
		if !r.Known() {
			return dataErr("protection", "[%d] unknown reason code %q", i, r)
		}
	}
	return nil
}

// Application is the scheduler's act of putting marks into effect.
type Application struct {
	// Request is the model request the application was decided for.
	Request string `json:"request"`
	// Marks are the ids of the mark events applied; Items their items.
	Marks []string `json:"marks" fastdecode:"fAppMarks"`
	Items []string `json:"items" fastdecode:"fAppItems"`
	// Trigger names the rule that allowed the application now.
	Trigger Trigger `json:"trigger" enum:"knownTriggers"`
	// FirstDivergence is the token offset of the first change against the
	// previously rendered bundle.
	FirstDivergence int `json:"first_divergence"`
	// MutationRadius is the cached tokens after the first divergence.
	MutationRadius    int `json:"mutation_radius"`
	TokensRemoved     int `json:"tokens_removed"`
	PlaceholderTokens int `json:"placeholder_tokens"`
	// CacheCost is the priced cost of the cache break (USD).
	CacheCost float64 `json:"cache_cost"`
	// ExpectedSaving is the expected saving over the configured horizon (USD).
	ExpectedSaving float64 `json:"expected_saving"`
	// AfterIndex is the number of session facts the decision saw.
	AfterIndex    int    `json:"after_index"`
	PolicyVersion string `json:"policy_version"`
}

// EventType implements Payload.
func (*Application) EventType() Type { return TypeApplication }

func (p *Application) validate() error {
	if p.Request == "" {
		return dataErr("request", "missing")
	}
	if len(p.Marks) == 0 {
		return dataErr("marks", "missing")
	}
	if len(p.Items) != len(p.Marks) {
		return dataErr("items", "must have one item per mark")
	}
	if !p.Trigger.Known() {
		return dataErr("trigger", "unknown trigger %q", p.Trigger)
	}
	if p.PolicyVersion == "" {
		return dataErr("policy_version", "missing")
	}
	return nil
}

// Trigger names the timing rule behind an application.
type Trigger string

// Triggers.
const (
	TriggerNextRequest  Trigger = "next_request"
	TriggerCacheExpired Trigger = "cache_expired"
	TriggerNeverSent    Trigger = "never_sent"
	TriggerSubtask      Trigger = "subtask_boundary"
	TriggerPressure     Trigger = "pressure"
	TriggerBreakEven    Trigger = "break_even"
	TriggerManual       Trigger = "manual_flush"
	TriggerImmediate    Trigger = "immediate"
)

// Triggers lists every trigger.
var Triggers = []Trigger{TriggerNextRequest, TriggerCacheExpired, TriggerNeverSent, TriggerSubtask, TriggerPressure, TriggerBreakEven, TriggerManual, TriggerImmediate}

// Known reports whether t is a known trigger.
func (t Trigger) Known() bool {
	for _, k := range Triggers {
		if k == t {
			return true
		}
	}
	return false
}
