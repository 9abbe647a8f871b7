// Package jsonplain finds the bytes that stand for themselves inside a
// JSON string literal, eight at a time: the scan that the events fast
// decoder (a value without escapes is used as it is) and the proxy's
// unquote (plain runs are copied whole) both make over every string they
// read, defined once.
package jsonplain

import (
	"encoding/binary"
	"math/bits"
)

// Byte reports whether c stands for itself inside a JSON string literal
// and is ASCII: printable ASCII (0x20-0x7f) but for '"' and '\\'.
func Byte(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }

// Skip returns the index of the first byte of b at or after i that is not
// Byte, or len(b) when there is none.
func Skip(b []byte, i int) int {
	for i+8 <= len(b) {
		if m := notPlain8(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			// The lowest byte flagged is the first that is not plain.
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < len(b) && Byte(b[i]) {
		i++
	}
	return i
}

// Byte-wise tests on 8 bytes at once (a uint64 read little-endian).
const (
	ones  = 0x0101010101010101 // 0x01 in every byte
	highs = 0x8080808080808080 // 0x80 in every byte
)

// notPlain8 flags the bytes of w that are not Byte: the high bit of each
// such byte is set, maybe with some plain ones above the first. A byte
// below 0x20 shows in (w - 0x20 in every byte) &^ w as a high bit, and so
// does a zero byte of w ^ '"' or w ^ '\\'; bytes of 0x80 and above show
// by their own high bit. A subtraction borrows only out of a byte it
// flags, so it can flag plain bytes above one that is not, never below:
// the lowest byte flagged is the first that is not plain
// (TestNotPlain8First), and none is flagged when all eight are plain
// (TestPlain8).
func notPlain8(w uint64) uint64 {
	quote := w ^ ones*'"'
	bslash := w ^ ones*'\\'
	return (w | (w-ones*0x20)&^w | (quote-ones)&^quote | (bslash-ones)&^bslash) & highs
}
