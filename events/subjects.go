package events

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// SubjectPrefix is the first token of every prunesched subject.
const SubjectPrefix = "ps"

// StreamName is the one JetStream stream holding every session's events.
const StreamName = "PRUNESCHED"

// DefaultPartitions is the number of session partitions the stream is
// created with when nothing else is configured. A partition is the unit one
// worker owns: every event of one session lands in the same partition.
const DefaultPartitions = 8

// MaxPartitions bounds the partition count (each partition is one durable
// consumer per worker kind).
const MaxPartitions = 1024

// SubjectKind is the fourth token of a session subject. The set is small
// and fixed on purpose: the server keeps per-subject state in memory.
type SubjectKind string

// Subject kinds: facts about the session, eligibility marks, scheduler
// applications.
const (
	KindFact  SubjectKind = "fact"
	KindMark  SubjectKind = "mark"
	KindApply SubjectKind = "apply"
)

// Subject layout. Writers publish on the publish subject
//
//	ps.<tenant>.<session>.<kind>
//
// and the stream's subject transform (see SubjectTransform) stores every
// event on
//
//	ps.<tenant>.<session>.<kind>.<partition>
//
// where partition = Partition(tenant, session, n), computed by the server
// (partition(n,1,2): FNV-1a of tenant and session). All events of one
// session share a partition, so a consumer filtered on ps.*.*.fact.<p> sees
// whole sessions, and one worker per partition processes each session once.

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

func tenantOr(tenant string) string {
	if tenant == "" {
		return DefaultTenant
	}
	return tenant
}

// Subject returns the publish subject of a session's events of one kind:
// ps.<tenant>.<session>.<kind>. The stream stores them on
// StoredSubject (the same plus the partition token).
func Subject(tenant, session string, kind SubjectKind) string {
	return SubjectPrefix + "." + tenantOr(tenant) + "." + session + "." + string(kind)
}

// SubjectOf returns the publish subject for e.
func SubjectOf(e Event) string { return Subject(e.TenantOrDefault(), e.Session, KindOf(e.Type)) }

// StoredSubject returns the subject the stream stores a session's events of
// one kind on when it has partition p: ps.<tenant>.<session>.<kind>.<p>.
func StoredSubject(tenant, session string, kind SubjectKind, partition int) string {
	return Subject(tenant, session, kind) + "." + strconv.Itoa(partition)
}

// Partition returns the partition of a session among n, exactly as the
// stream's subject transform partition(n,1,2) computes it: FNV-1a (32 bit)
// of the tenant token followed by the session token, modulo n.
func Partition(tenant, session string, n int) int {
	if n <= 0 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(tenantOr(tenant)))
	_, _ = h.Write([]byte(session))
	return int(h.Sum32() % uint32(n))
}

// SubjectTransform returns the stream subject transform that adds the
// partition token: source ps.*.*.* and destination
// ps.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}.{{partition(n,1,2)}}.
func SubjectTransform(n int) (source, destination string) {
	return SubjectPrefix + ".*.*.*",
		fmt.Sprintf("%s.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}.{{partition(%d,1,2)}}", SubjectPrefix, n)
}

// PartitionsOfTransform returns n when destination is SubjectTransform(n)'s
// destination, and false otherwise.
func PartitionsOfTransform(destination string) (int, bool) {
	for _, part := range strings.Split(destination, "{{") {
		if rest, ok := strings.CutPrefix(part, "partition("); ok {
			num, _, ok := strings.Cut(rest, ",")
			if !ok {
				return 0, false
			}
			n, err := strconv.Atoi(num)
			if err != nil || n < 1 {
				return 0, false
			}
			if _, want := SubjectTransform(n); want != destination {
				return 0, false
			}
			return n, true
		}
	}
	return 0, false
}

// SessionFilter matches every stored subject of one session (every kind,
// its partition): ps.<tenant>.<session>.>.
func SessionFilter(tenant, session string) string {
	return SubjectPrefix + "." + tenantOr(tenant) + "." + session + ".>"
}

// KindFilter matches one kind across all tenants, sessions and partitions:
// ps.*.*.<kind>.*.
func KindFilter(kind SubjectKind) string { return SubjectPrefix + ".*.*." + string(kind) + ".*" }

// PartitionFilter matches one kind of every session in partition p:
// ps.*.*.<kind>.<p>.
func PartitionFilter(kind SubjectKind, partition int) string {
	return SubjectPrefix + ".*.*." + string(kind) + "." + strconv.Itoa(partition)
}

// ParseSubject splits a session subject into its tokens. It accepts the
// stored form (with the partition token) and the publish form (without).
func ParseSubject(subject string) (tenant, session string, kind SubjectKind, err error) {
	tenant, session, kind, _, err = ParseStoredSubject(subject)
	return tenant, session, kind, err
}

// ParseStoredSubject is ParseSubject that also returns the partition token
// (-1 for a subject in the publish form).
func ParseStoredSubject(subject string) (tenant, session string, kind SubjectKind, partition int, err error) {
	parts := strings.Split(subject, ".")
	if (len(parts) != 4 && len(parts) != 5) || parts[0] != SubjectPrefix {
		return "", "", "", 0, fmt.Errorf("subject %q: want %s.<tenant>.<session>.<kind>[.<partition>]", subject, SubjectPrefix)
	}
	switch SubjectKind(parts[3]) {
	case KindFact, KindMark, KindApply:
	default:
		return "", "", "", 0, fmt.Errorf("subject %q: unknown kind %q", subject, parts[3])
	}
	partition = -1
	if len(parts) == 5 {
		p, perr := strconv.Atoi(parts[4])
		if perr != nil || p < 0 || strconv.Itoa(p) != parts[4] {
			return "", "", "", 0, fmt.Errorf("subject %q: bad partition %q", subject, parts[4])
		}
		partition = p
	}
	return parts[1], parts[2], SubjectKind(parts[3]), partition, nil
}

// MsgID is the Nats-Msg-Id an event is published with. Event ids are only
// unique within a session, so the tenant and session are part of it.
func MsgID(e Event) string { return e.TenantOrDefault() + "." + e.Session + "." + e.ID }
