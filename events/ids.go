package events

import (
	"strings"

	"github.com/google/uuid"
)

// idNamespace is the UUID namespace for derived event ids.
var idNamespace = uuid.MustParse("6f1d3c1e-4b2a-5d7e-9c0f-70727567e5c1")

// DerivedID returns a stable id for an event derived from its causes (for a
// mark: the session, item, decision and cause). Publishing it with Nats-Msg-Id
// means a crash and redo publishes no duplicate.
func DerivedID(kind string, parts ...string) string {
	return kind + "-" + uuid.NewSHA1(idNamespace, []byte(kind+"\x00"+strings.Join(parts, "\x00"))).String()
}

// NewID returns a fresh random event id, for events a person or adapter
// creates without a natural id.
func NewID() string { return uuid.NewString() }
