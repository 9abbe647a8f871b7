package events

import (
	"encoding/binary"
	"math/bits"
)

// strCache shares the short strings one Decoder decodes between the
// events it decodes: the session, tool, model and policy version of every
// event, a call id seen in its call and again in its result, the items
// and hashes marks cite again and again. A decoded value equal to the
// one in its slot is returned as that string instead of a new copy (no
// allocation, and what a projection keeps of both events is stored
// once); a different value replaces it. Direct-mapped: a look-up is one
// hash of at most 16 of the value's bytes and one comparison, and the
// cache never holds more than strCacheSize strings of at most
// strCacheMax bytes.
type strCache [strCacheSize]string

const (
	strCacheBits = 9
	strCacheSize = 1 << strCacheBits
	// strCacheMax is the longest value shared (a content hash,
	// "sha256:" and 64 hex digits, is 71 bytes); longer ones are copied
	// as before.
	strCacheMax = 96
)

// get returns b as a string, the cached one when it holds the same bytes.
func (c *strCache) get(b []byte) string {
	if len(b) == 0 || len(b) > strCacheMax {
		return string(b)
	}
	e := &c[strSlot(b)]
	if *e == string(b) {
		return *e
	}
	s := string(b)
	*e = s
	return s
}

// strSlot hashes b (1 to strCacheMax bytes) to a slot: its first and
// last 8 bytes (those that tell ids, hashes and names apart) and its
// length. Values that differ only in between share a slot and take
// turns in it.
func strSlot(b []byte) uint {
	n := len(b)
	var x uint64
	if n >= 8 {
		x = binary.LittleEndian.Uint64(b) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(b[n-8:]), 31)
	} else {
		for _, c := range b {
			x = x<<8 | uint64(c)
		}
	}
	x = (x ^ uint64(n)<<58) * 0x9E3779B97F4A7C15
	return uint(x >> (64 - strCacheBits))
}
