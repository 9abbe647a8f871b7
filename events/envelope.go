package events

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// SchemaVersion is the envelope version written by this build. Decoders
// accept only versions they know, so an old binary never misreads a new log.
const SchemaVersion = 1

// DefaultTenant is used when an event or request names no tenant.
const DefaultTenant = "default"

// Type names an event type. The set is closed: decoding an unknown type is an
// error.
type Type string

// The event types. Facts describe what happened in the agent session; marks,
// applications and restores are prunesched's own decisions about it.
const (
	TypeSessionStarted Type = "session_started"
	TypeMessage        Type = "message"
	TypeToolCall       Type = "tool_call"
	TypeToolResult     Type = "tool_result"
	TypeSubtaskOpened  Type = "subtask_opened"
	TypeSubtaskClosed  Type = "subtask_closed"
	TypePin            Type = "pin"
	TypeUnpin          Type = "unpin"
	TypeModelRequest   Type = "model_request"
	TypeMark           Type = "mark"
	TypeApplication    Type = "application"
	TypeRestore        Type = "restore"
	TypeHostCompaction Type = "host_compaction"
	TypePruneRequest   Type = "prune_request"
	TypeFlushRequest   Type = "flush_request"
)

// Types lists every known event type in a stable order.
var Types = []Type{
	TypeSessionStarted, TypeMessage, TypeToolCall, TypeToolResult,
	TypeSubtaskOpened, TypeSubtaskClosed, TypePin, TypeUnpin,
	TypeModelRequest, TypeMark, TypeApplication, TypeRestore,
	TypeHostCompaction, TypePruneRequest, TypeFlushRequest,
}

// Payload is the type-specific body of an event. Each event type has exactly
// one payload struct; consumers switch on the concrete type.
type Payload interface {
	// EventType is the Type this payload belongs to.
	EventType() Type
	// validate checks required fields and enumerations; the error names the
	// field relative to the payload ("data.<field>").
	validate() error
}

// Event is the envelope every record on the log carries. Time is the event's
// own timestamp (when it happened in the session), never the time it was
// processed: decisions derived from the log use it, not the wall clock.
type Event struct {
	V       int       `json:"v"`
	ID      string    `json:"id"`
	Type    Type      `json:"type"`
	Tenant  string    `json:"tenant,omitempty"`
	Session string    `json:"session"`
	Time    time.Time `json:"time"`
	Data    Payload   `json:"data"`

	// Seq is the stream sequence the event was read at; zero before it is
	// stored. It is never encoded.
	Seq uint64 `json:"-"`
}

// New builds an envelope around p with the current schema version.
func New(id, tenant, session string, at time.Time, p Payload) Event {
	return Event{V: SchemaVersion, ID: id, Type: p.EventType(), Tenant: tenant, Session: session, Time: at.UTC(), Data: p}
}

// TenantOrDefault returns the event's tenant, or DefaultTenant when empty.
func (e Event) TenantOrDefault() string {
	if e.Tenant == "" {
		return DefaultTenant
	}
	return e.Tenant
}

// IsFact reports whether the event describes the agent session itself (as
// opposed to a prunesched decision about it).
func (e Event) IsFact() bool { return KindOf(e.Type) == KindFact }

// validID reports whether s is a valid event or item id: it matches
// ^[A-Za-z0-9][A-Za-z0-9._:/@+=-]{0,199}$ (written out: the regexp was a
// large part of decoding; TestValidIDMatchesRegexp keeps them equal).
func validID(s string) bool {
	if len(s) == 0 || len(s) > 200 || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !idByte[s[i]] {
			return false
		}
	}
	return true
}

// idByte holds the bytes validID accepts after the first.
var idByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = isAlnum(byte(c)) || strings.IndexByte("._:/@+=-", byte(c)) >= 0
	}
	return t
}()

// ValidToken reports whether s can be used as a tenant or session name:
// characters that are valid in a NATS subject token, ^[A-Za-z0-9_-]{1,128}$.
func ValidToken(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Validate checks the envelope and its payload. Errors name the field.
func (e Event) Validate() error {
	if e.V != SchemaVersion {
		return fieldErr("v", "unsupported schema version %d (want %d)", e.V, SchemaVersion)
	}
	if e.ID == "" {
		return fieldErr("id", "missing")
	}
	if !validID(e.ID) {
		return fieldErr("id", "invalid id %q", e.ID)
	}
	if e.Tenant != "" && !ValidToken(e.Tenant) {
		return fieldErr("tenant", "invalid %q: use letters, digits, '_' or '-'", e.Tenant)
	}
	if e.Session == "" {
		return fieldErr("session", "missing")
	}
	if !ValidToken(e.Session) {
		return fieldErr("session", "invalid %q: use letters, digits, '_' or '-'", e.Session)
	}
	if e.Time.IsZero() {
		return fieldErr("time", "missing")
	}
	if e.Data == nil {
		return fieldErr("data", "missing")
	}
	if e.Data.EventType() != e.Type {
		return fieldErr("type", "%q does not match payload %q", e.Type, e.Data.EventType())
	}
	return e.Data.validate()
}

// FieldError is a validation error naming the offending field.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("field %q: %s", e.Field, e.Msg) }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// dataErr prefixes a payload field with "data.".
func dataErr(field, format string, args ...any) error {
	return fieldErr("data."+field, format, args...)
}

type wireEvent struct {
	V       *int            `json:"v"`
	ID      string          `json:"id"`
	Type    Type            `json:"type"`
	Tenant  string          `json:"tenant,omitempty"`
	Session string          `json:"session"`
	Time    *time.Time      `json:"time"`
	Data    json.RawMessage `json:"data"`
}

// MarshalJSON encodes the envelope with its payload under "data".
func (e Event) MarshalJSON() ([]byte, error) {
	if e.Data == nil {
		return nil, fmt.Errorf("marshal event %s: no payload", e.ID)
	}
	data, err := json.Marshal(wireForm(e.Data))
	if err != nil {
		return nil, fmt.Errorf("marshal event %s payload: %w", e.ID, err)
	}
	v := e.V
	t := e.Time
	return json.Marshal(wireEvent{V: &v, ID: e.ID, Type: e.Type, Tenant: e.Tenant, Session: e.Session, Time: &t, Data: data})
}

// UnmarshalJSON decodes strictly: unknown fields, unknown types, missing or
// invalid fields are errors naming the field.
func (e *Event) UnmarshalJSON(b []byte) error {
	var w wireEvent
	if err := strictUnmarshal(b, &w); err != nil {
		return err
	}
	return e.fromWire(&w)
}

// decodeStrict is UnmarshalJSON for a whole input (Decode's fast path):
// b must hold one JSON value and nothing but white space around it.
func (e *Event) decodeStrict(b []byte) error {
	var w wireEvent
	if err := strictUnmarshalWhole(b, &w); err != nil {
		return err
	}
	return e.fromWire(&w)
}

func (e *Event) fromWire(w *wireEvent) error {
	if w.V == nil {
		return fieldErr("v", "missing")
	}
	if w.Type == "" {
		return fieldErr("type", "missing")
	}
	p, err := newPayload(w.Type)
	if err != nil {
		return err
	}
	if len(w.Data) == 0 || string(w.Data) == "null" {
		return fieldErr("data", "missing")
	}
	if err := strictUnmarshal(w.Data, p); err != nil {
		var fe *FieldError
		if asFieldError(err, &fe) {
			return fieldErr("data."+fe.Field, "%s", fe.Msg)
		}
		return fmt.Errorf("data: %w", err)
	}
	if err := fromWireForm(p); err != nil {
		return err
	}
	if w.Time == nil {
		return fieldErr("time", "missing")
	}
	*e = Event{V: *w.V, ID: w.ID, Type: w.Type, Tenant: w.Tenant, Session: w.Session, Time: w.Time.UTC(), Data: p}
	return e.Validate()
}

func newPayload(t Type) (Payload, error) {
	switch t {
	case TypeSessionStarted:
		return &SessionStarted{}, nil
	case TypeMessage:
		return &Message{}, nil
	case TypeToolCall:
		return &ToolCall{}, nil
	case TypeToolResult:
		return &ToolResult{}, nil
	case TypeSubtaskOpened:
		return &SubtaskOpened{}, nil
	case TypeSubtaskClosed:
		return &SubtaskClosed{}, nil
	case TypePin:
		return &Pin{}, nil
	case TypeUnpin:
		return &Unpin{}, nil
	case TypeModelRequest:
		return &ModelRequest{}, nil
	case TypeMark:
		return &Mark{}, nil
	case TypeApplication:
		return &Application{}, nil
	case TypeRestore:
		return &Restore{}, nil
	case TypeHostCompaction:
		return &HostCompaction{}, nil
	case TypePruneRequest:
		return &PruneRequest{}, nil
	case TypeFlushRequest:
		return &FlushRequest{}, nil
	}
	return nil, fieldErr("type", "unknown event type %q", t)
}
