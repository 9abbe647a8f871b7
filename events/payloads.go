package events

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Role is who authored a message item.
type Role string

// Message roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// MessageKind distinguishes visible text from model reasoning blocks.
type MessageKind string

// Message kinds. Thinking blocks are rendered back verbatim with their
// signature and are never pruned.
const (
	KindText     MessageKind = "text"
	KindThinking MessageKind = "thinking"
)

// Determinism is a tool's determinism class: whether two identical calls can
// be assumed to observe the same thing.
type Determinism string

// Determinism classes (see the eligibility package for how each is used).
const (
	DeterminismUnknown    Determinism = ""
	DeterminismPure       Determinism = "pure"
	DeterminismVersioned  Determinism = "versioned"
	DeterminismState      Determinism = "state"
	DeterminismSideEffect Determinism = "side_effect"
)

func (d Determinism) valid() bool {
	switch d {
	case DeterminismUnknown, DeterminismPure, DeterminismVersioned, DeterminismState, DeterminismSideEffect:
		return true
	}
	return false
}

// SessionStarted opens a session and says where it came from.
type SessionStarted struct {
	// Format is the source format ("native", "claude-code", "opencode", ...).
	Format string `json:"format"`
	// SourcePath is the file the session was imported from, if any.
	SourcePath string `json:"source_path,omitempty"`
	// SourceID is the session id the source used (Claude Code sessionId,
	// OpenCode ses_...).
	SourceID string `json:"source_id,omitempty"`
	Agent    string `json:"agent,omitempty"`
	CWD      string `json:"cwd,omitempty"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	Title    string `json:"title,omitempty"`
}

// EventType implements Payload.
func (*SessionStarted) EventType() Type { return TypeSessionStarted }

func (p *SessionStarted) validate() error {
	if p.Format == "" {
		return dataErr("format", "missing")
	}
	return nil
}

// Message is one text item: a system prompt, a user message, assistant text
// or an assistant thinking block.
type Message struct {
	// Item is the item id, unique within the session. Importers use the id
	// the source gave the message so a user can find it in the original.
	Item string      `json:"item"`
	Role Role        `json:"role" enum:"knownRoles"`
	Kind MessageKind `json:"kind,omitempty" enum:"knownKinds"`
	Text string      `json:"text"`
	// Signature is the provider's signature of a thinking block.
	Signature string `json:"signature,omitempty"`
	// Tokens is the item's token count, filled once when the event enters
	// the log: the count decisions use.
	Tokens int `json:"tokens,omitempty"`
	// TokensExact is the tokenizer's count when Tokens is an estimate
	// (the live proxy decides on events.EstimateTokens and counts exactly
	// after forwarding); omitted when Tokens is exact. The economics price
	// the item with it (PricedTokens), decisions keep using Tokens.
	TokensExact int `json:"tokens_exact,omitempty"`
	// Meta marks harness-injected content (reminders, hook output).
	Meta bool `json:"meta,omitempty"`
}

// EventType implements Payload.
func (*Message) EventType() Type { return TypeMessage }

func (p *Message) validate() error {
	if err := validItem("item", p.Item); err != nil {
		return err
	}
	switch p.Role {
	case RoleSystem, RoleUser, RoleAssistant:
	case "":
		return dataErr("role", "missing")
	default:
		return dataErr("role", "bad value %q (want system, user or assistant)", p.Role)
	}
	switch p.Kind {
	case "", KindText:
	case KindThinking:
		if p.Role != RoleAssistant {
			return dataErr("kind", "thinking is only valid for role assistant")
		}
	default:
		return dataErr("kind", "bad value %q (want text or thinking)", p.Kind)
	}
	if err := validExact("tokens", p.Tokens, p.TokensExact); err != nil {
		return err
	}
	if !utf8.ValidString(p.Text) {
		return dataErr("text", "not valid UTF-8; text is stored byte-exact, never replaced (tool output may be any bytes)")
	}
	return nil
}

// ToolCall is the model's request to run a tool. Its input is an item of its
// own (id CallItem(call_id) by convention of the importers).
type ToolCall struct {
	Item   string `json:"item"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Input is the tool's arguments as a JSON value (usually an object).
	Input json.RawMessage `json:"input" fastdecode:"fToolCallInput"`
	// InputTokens is filled once when the event enters the log: the count
	// decisions use.
	InputTokens int `json:"input_tokens,omitempty"`
	// InputTokensExact is the tokenizer's count when InputTokens is an
	// estimate, as Message.TokensExact.
	InputTokensExact int `json:"input_tokens_exact,omitempty"`
}

// EventType implements Payload.
func (*ToolCall) EventType() Type { return TypeToolCall }

func (p *ToolCall) validate() error {
	if err := validItem("item", p.Item); err != nil {
		return err
	}
	if p.CallID == "" {
		return dataErr("call_id", "missing")
	}
	if p.Tool == "" {
		return dataErr("tool", "missing")
	}
	if len(p.Input) == 0 {
		return dataErr("input", "missing (use {} for no arguments)")
	}
	if !json.Valid(p.Input) {
		return dataErr("input", "not valid JSON")
	}
	if err := validExact("input_tokens", p.InputTokens, p.InputTokensExact); err != nil {
		return err
	}
	return nil
}

// ToolError describes a failed tool call.
type ToolError struct {
	// Type is a short class of error ("exit_code", "not_found",
	// "invalid_parameter", "rejected", ...), as known.
	Type    string `json:"type,omitempty"`
	Message string `json:"message"`
}

// ContentRef is a content address: the payload itself lives in the blob
// store under Hash, so identical outputs are stored once and L0 comparison is
// a hash comparison.
type ContentRef struct {
	// Hash is "sha256:" followed by 64 lowercase hex digits.
	Hash  string `json:"hash"`
	Bytes int    `json:"bytes"`
	// Tokens is the output's token count: the count decisions use.
	Tokens int `json:"tokens"`
	// TokensExact is the tokenizer's count when Tokens is an estimate,
	// as Message.TokensExact.
	TokensExact int `json:"tokens_exact,omitempty"`
}

// PricedTokens is the one rule for the token count the economics price
// (costs, token savings, ledgers, reports): the exact count where the
// fact records one (its decision count was an estimate), else the
// decision count. Decisions (eligibility, the scheduler, placeholders)
// use the decision count alone, so a replay decides as the proxy did.
func PricedTokens(decision, exact int) int {
	if exact > 0 {
		return exact
	}
	return decision
}

// validExact checks a decision count (field) and the exact count beside
// it: neither negative, and an exact count only beside the estimate it
// corrects.
func validExact(field string, decision, exact int) error {
	if decision < 0 {
		return dataErr(field, "negative")
	}
	if exact < 0 {
		return dataErr(field+"_exact", "negative")
	}
	if exact > 0 && decision == 0 {
		return dataErr(field+"_exact", "set without %s (the estimate it corrects)", field)
	}
	return nil
}

// EstimateTokens is the bytes/4 token estimate (rounded up) used where no
// stored count exists (inline payloads in tests and input forms, error-only
// results, a tokenizer that failed). It is the one definition the cores and
// the tokenizer share, so they agree on every such count.
func EstimateTokens(bytes int) int { return (bytes + 3) / 4 }

// SourceIdentity names what a tool observed, as far as it is known.
type SourceIdentity struct {
	// Kind is "file", "url", "search", "command" or "other".
	Kind string `json:"kind" enum:"knownSources"`
	Path string `json:"path,omitempty"`
	URL  string `json:"url,omitempty"`
	// Version is a source version where known (commit, etag, mtime).
	Version string `json:"version,omitempty"`
	// ContentHash is the hash of the observed source content where known.
	ContentHash string `json:"content_hash,omitempty"`
	// Offset and Limit describe a partial read (lines), zero when whole.
	Offset int `json:"offset,omitempty"`
	Limit  int `json:"limit,omitempty"`
}

// ToolResult is a tool's output. In the native JSONL format a person writes
// the output inline in Output; when the event enters the log the output moves
// to the blob store and only OutputRef is kept.
type ToolResult struct {
	Item   string `json:"item"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool,omitempty"`
	// IsError is true when the call failed.
	IsError bool       `json:"is_error,omitempty"`
	Error   *ToolError `json:"error,omitempty"`
	// Output is the inline output (input form only): any bytes, kept
	// byte-exact. Output that is not valid UTF-8 travels in JSON as
	// OutputBase64.
	Output *string `json:"output,omitempty"`
	// OutputBase64 is the JSON form of an Output that is not valid UTF-8
	// (JSON strings cannot carry such bytes; encoding/json would replace
	// them with U+FFFD). Decoding moves it into Output and encoding writes
	// it in Output's place; Go code reads and sets Output only.
	OutputBase64 []byte `json:"output_base64,omitempty" fastdecode:"fOutputBase64"`
	// OutputRef is the content address of the output (stored form).
	OutputRef   *ContentRef     `json:"output_ref,omitempty" fastdecode:"fResultOutputRef"`
	Source      *SourceIdentity `json:"source,omitempty"`
	Determinism Determinism     `json:"determinism,omitempty" enum:"knownDeterminism"`
	ExitCode    *int            `json:"exit_code,omitempty"`
	// HostPruned is true when the agent host itself had already removed the
	// output from the model's context (OpenCode's time.compacted).
	HostPruned bool `json:"host_pruned,omitempty"`
}

// EventType implements Payload.
func (*ToolResult) EventType() Type { return TypeToolResult }

func (p *ToolResult) validate() error {
	if err := validItem("item", p.Item); err != nil {
		return err
	}
	if p.CallID == "" {
		return dataErr("call_id", "missing")
	}
	if p.OutputBase64 != nil {
		return dataErr("output_base64", "set output (output_base64 is only its JSON form)")
	}
	if p.Output == nil && p.OutputRef == nil {
		return dataErr("output", "missing (give output text, or output_ref)")
	}
	if p.Error != nil && !utf8.ValidString(p.Error.Message) {
		return dataErr("error.message", "not valid UTF-8; text is stored byte-exact, never replaced")
	}
	if p.Output != nil && p.OutputRef != nil {
		return dataErr("output", "give output or output_ref, not both")
	}
	if p.OutputRef != nil {
		if err := p.OutputRef.validate("output_ref"); err != nil {
			return err
		}
	}
	if p.Error != nil && !p.IsError {
		return dataErr("is_error", "must be true when error is set")
	}
	if p.Source != nil {
		switch p.Source.Kind {
		case "file", "url", "search", "command", "other":
		case "":
			return dataErr("source.kind", "missing")
		default:
			return dataErr("source.kind", "bad value %q (want file, url, search, command or other)", p.Source.Kind)
		}
		if p.Source.Offset < 0 || p.Source.Limit < 0 {
			return dataErr("source.offset", "negative")
		}
	}
	if !p.Determinism.valid() {
		return dataErr("determinism", "bad value %q (want pure, versioned, state or side_effect)", p.Determinism)
	}
	return nil
}

func (r *ContentRef) validate(field string) error {
	if !ValidHash(r.Hash) {
		return dataErr(field+".hash", "bad value %q (want sha256:<64 hex>)", r.Hash)
	}
	if r.Bytes < 0 {
		return dataErr(field+".bytes", "negative")
	}
	// The field's name is built only for an error (this runs for every
	// tool result decoded).
	if r.Tokens < 0 || r.TokensExact != 0 {
		return validExact(field+".tokens", r.Tokens, r.TokensExact)
	}
	return nil
}

// Verification says what verified a subtask's closure.
type Verification struct {
	// Kind is "test_run" (a passing run recorded in the log), "check" (another
	// outside check), "user" or "agent" (the agent's own say-so: weakest).
	Kind string `json:"kind" enum:"knownVerifiers"`
	// Item is the item holding the evidence (for example the passing run's
	// tool result).
	Item   string `json:"item,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// SubtaskOpened starts a unit of work.
type SubtaskOpened struct {
	Subtask string `json:"subtask"`
	Title   string `json:"title,omitempty"`
}

// EventType implements Payload.
func (*SubtaskOpened) EventType() Type { return TypeSubtaskOpened }

func (p *SubtaskOpened) validate() error {
	return validItem("subtask", p.Subtask)
}

// SubtaskClosed ends a unit of work and records what verified the closure.
type SubtaskClosed struct {
	Subtask    string        `json:"subtask"`
	VerifiedBy *Verification `json:"verified_by,omitempty"`
	// Consequence names the items where the subtask's outcome is recorded
	// (a decision, an extracted identifier), if any.
	Consequence []string `json:"consequence,omitempty"`
}

// EventType implements Payload.
func (*SubtaskClosed) EventType() Type { return TypeSubtaskClosed }

func (p *SubtaskClosed) validate() error {
	if err := validItem("subtask", p.Subtask); err != nil {
		return err
	}
	if p.VerifiedBy != nil {
		switch p.VerifiedBy.Kind {
		case "test_run", "check", "user", "agent":
		default:
			return dataErr("verified_by.kind", "bad value %q (want test_run, check, user or agent)", p.VerifiedBy.Kind)
		}
	}
	return nil
}

// Pin protects an item from pruning until unpinned.
type Pin struct {
	Item   string `json:"item"`
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// EventType implements Payload.
func (*Pin) EventType() Type { return TypePin }

func (p *Pin) validate() error { return validItem("item", p.Item) }

// Unpin lifts a Pin.
type Unpin struct {
	Item string `json:"item"`
	By   string `json:"by,omitempty"`
}

// EventType implements Payload.
func (*Unpin) EventType() Type { return TypeUnpin }

func (p *Unpin) validate() error { return validItem("item", p.Item) }

// Usage is what a provider reported for one request.
type Usage struct {
	InputTokens      int `json:"input_tokens"`
	CacheReadTokens  int `json:"cache_read_tokens"`
	CacheWriteTokens int `json:"cache_write_tokens"`
	// CacheWrite1hTokens is the part of CacheWriteTokens written at the
	// one-hour TTL tier (Anthropic).
	CacheWrite1hTokens int `json:"cache_write_1h_tokens,omitempty"`
	OutputTokens       int `json:"output_tokens"`
}

// ModelRequest records a request dispatched to the model. The envelope time
// is the dispatch time; the scheduler decides applications at this time.
type ModelRequest struct {
	Request  string `json:"request"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Usage is nil when the provider's report is not known.
	Usage *Usage `json:"usage,omitempty"`
	// CacheTTL is the cache tier the client asked for ("5m", "1h"), if known.
	CacheTTL string `json:"cache_ttl,omitempty"`
	SourceID string `json:"source_id,omitempty"`
}

// EventType implements Payload.
func (*ModelRequest) EventType() Type { return TypeModelRequest }

func (p *ModelRequest) validate() error {
	if err := validItem("request", p.Request); err != nil {
		return err
	}
	if u := p.Usage; u != nil {
		if u.InputTokens < 0 || u.CacheReadTokens < 0 || u.CacheWriteTokens < 0 || u.OutputTokens < 0 || u.CacheWrite1hTokens < 0 {
			return dataErr("usage", "negative token count")
		}
	}
	switch p.CacheTTL {
	case "", "5m", "1h":
	default:
		return dataErr("cache_ttl", "bad value %q (want 5m or 1h)", p.CacheTTL)
	}
	return nil
}

// Restore brings a pruned item back into the rendered bundle.
type Restore struct {
	Item   string `json:"item"`
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// EventType implements Payload.
func (*Restore) EventType() Type { return TypeRestore }

func (p *Restore) validate() error { return validItem("item", p.Item) }

// validItem checks an item id: the same syntax as an event id.
func validItem(field, v string) error {
	if v == "" {
		return dataErr(field, "missing")
	}
	if !validID(v) {
		return dataErr(field, "invalid id %q", v)
	}
	return nil
}

// ValidHash reports whether h is a well-formed content address.
func ValidHash(h string) bool {
	hex, ok := strings.CutPrefix(h, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for i := range len(hex) {
		if c := hex[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// CallInputItem is the conventional item id of a tool call's input, derived
// from the call id so both halves of a call are found from the source's id.
func CallInputItem(callID string) string { return callID + "/input" }

// String renders a short description for logs.
func (p *ToolCall) String() string { return fmt.Sprintf("%s(%s)", p.Tool, p.CallID) }

// HostCompaction records that the agent host itself replaced the context
// before this point (Claude Code's compact_boundary). Items before it are no
// longer in the model's context: projections stop rendering them and
// eligibility stops judging them. The host's summary, if any, follows as an
// ordinary message.
type HostCompaction struct {
	Host     string `json:"host"`
	SourceID string `json:"source_id,omitempty"`
	// PreTokens is what the host reported as the context size before it.
	PreTokens int `json:"pre_tokens,omitempty"`
}

// EventType implements Payload.
func (*HostCompaction) EventType() Type { return TypeHostCompaction }

func (p *HostCompaction) validate() error {
	if p.Host == "" {
		return dataErr("host", "missing")
	}
	return nil
}

// PruneRequest is a person asking for an item to be pruned. Eligibility turns
// it into a PRUNE mark with reason MANUAL_PRUNE (unless the item is pinned).
// With By ByAgent it is the model's request (the context_prune tool): a
// proposal that eligibility judges with every protection, answering with a
// PRUNE AGENT_REQUEST or a KEEP naming the protection, always as a mark
// caused by this fact.
type PruneRequest struct {
	Item   string `json:"item"`
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// EventType implements Payload.
func (*PruneRequest) EventType() Type { return TypePruneRequest }

func (p *PruneRequest) validate() error { return validItem("item", p.Item) }

// FlushRequest is a person (or an adapter) asking the timing scheduler to
// apply everything pending at the next model request, whatever the cache
// break costs (trigger manual_flush). It is a fact so that a replay of the
// log reproduces the flush.
type FlushRequest struct {
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// EventType implements Payload.
func (*FlushRequest) EventType() Type { return TypeFlushRequest }

func (p *FlushRequest) validate() error { return nil }

// wireForm returns p as it is written in JSON: a tool result whose inline
// output is not valid UTF-8 carries it as output_base64 instead.
func wireForm(p Payload) Payload {
	tr, ok := p.(*ToolResult)
	if !ok || tr.Output == nil || utf8.ValidString(*tr.Output) {
		return p
	}
	cp := *tr
	cp.OutputBase64 = []byte(*tr.Output)
	cp.Output = nil
	return &cp
}

// fromWireForm undoes wireForm on a decoded payload.
func fromWireForm(p Payload) error {
	tr, ok := p.(*ToolResult)
	if !ok || tr.OutputBase64 == nil {
		return nil
	}
	if tr.Output != nil {
		return dataErr("output_base64", "give output or output_base64, not both")
	}
	out := string(tr.OutputBase64)
	tr.Output, tr.OutputBase64 = &out, nil
	return nil
}
