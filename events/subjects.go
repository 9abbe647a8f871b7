package events

import (
	"fmt"
	"strings"
)

// SubjectPrefix is the first token of every prunesched subject.
const SubjectPrefix = "ps"

// StreamName is the one JetStream stream holding every session's events.
const StreamName = "PRUNESCHED"

// SubjectKind is the last token of a session subject. The set is small and
// fixed on purpose: the server keeps per-subject state in memory.
type SubjectKind string

// Subject kinds: facts about the session, eligibility marks, scheduler
// applications.
const (
	KindFact  SubjectKind = "fact"
	KindMark  SubjectKind = "mark"
	KindApply SubjectKind = "apply"
)

// KindOf returns the subject kind an event type is published on.
func KindOf(t Type) SubjectKind {
	switch t {
	case TypeMark:
		return KindMark
	case TypeApplication:
		return KindApply
	}
	return KindFact
}

// Subject returns the subject an event is published on:
// ps.<tenant>.<session>.<kind>.
func Subject(tenant, session string, kind SubjectKind) string {
	if tenant == "" {
		tenant = DefaultTenant
	}
	return SubjectPrefix + "." + tenant + "." + session + "." + string(kind)
}

// SubjectOf returns the subject for e.
func SubjectOf(e Event) string { return Subject(e.TenantOrDefault(), e.Session, KindOf(e.Type)) }

// SessionFilter matches every subject of one session.
func SessionFilter(tenant, session string) string {
	if tenant == "" {
		tenant = DefaultTenant
	}
	return SubjectPrefix + "." + tenant + "." + session + ".*"
}

// KindFilter matches one kind across all tenants and sessions.
func KindFilter(kind SubjectKind) string { return SubjectPrefix + ".*.*." + string(kind) }

// ParseSubject splits a session subject into its tokens.
func ParseSubject(subject string) (tenant, session string, kind SubjectKind, err error) {
	parts := strings.Split(subject, ".")
	if len(parts) != 4 || parts[0] != SubjectPrefix {
		return "", "", "", fmt.Errorf("subject %q: want %s.<tenant>.<session>.<kind>", subject, SubjectPrefix)
	}
	switch SubjectKind(parts[3]) {
	case KindFact, KindMark, KindApply:
	default:
		return "", "", "", fmt.Errorf("subject %q: unknown kind %q", subject, parts[3])
	}
	return parts[1], parts[2], SubjectKind(parts[3]), nil
}

// MsgID is the Nats-Msg-Id an event is published with. Event ids are only
// unique within a session, so the tenant and session are part of it.
func MsgID(e Event) string { return e.TenantOrDefault() + "." + e.Session + "." + e.ID }
