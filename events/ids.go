package events

import (
	"crypto/sha1"

	"github.com/google/uuid"
)

// idNamespace is the UUID namespace for derived event ids.
var idNamespace = uuid.MustParse("6f1d3c1e-4b2a-5d7e-9c0f-70727567e5c1")

// DerivedID returns a stable id for an event derived from its causes (for a
// mark: the session, item, decision and cause). Publishing it with Nats-Msg-Id
// means a crash and redo publishes no duplicate.
//
// The id is kind + "-" + the version 5 (SHA-1, RFC 4122) UUID of
// kind + "\x00" + parts joined by "\x00" in idNamespace: byte for byte what
// uuid.NewSHA1(idNamespace, ...).String() gives, computed without the
// intermediate strings (the hash input is built in a stack buffer when it is
// small, and the UUID is formatted by hand).
func DerivedID(kind string, parts ...string) string {
	var in [256]byte
	b := append(in[:0], idNamespace[:]...)
	b = append(b, kind...)
	b = append(b, 0)
	for i, p := range parts {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, p...)
	}
	sum := sha1.Sum(b)
	sum[6] = (sum[6] & 0x0f) | 0x50 // version 5
	sum[8] = (sum[8] & 0x3f) | 0x80 // RFC 4122 variant

	var out [128]byte
	o := append(out[:0], kind...)
	o = append(o, '-')
	for i := 0; i < 16; i++ {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			o = append(o, '-')
		}
		o = append(o, hexDigits[sum[i]>>4], hexDigits[sum[i]&0x0f])
	}
	return string(o)
}

const hexDigits = "0123456789abcdef"

// NewID returns a fresh random event id, for events a person or adapter
// creates without a natural id.
func NewID() string { return uuid.NewString() }
