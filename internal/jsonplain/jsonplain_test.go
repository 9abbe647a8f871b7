package jsonplain

import (
	"encoding/binary"
	"math/bits"
	"testing"
)

func checkPlain8(t *testing.T, b [8]byte) {
	want := true
	for _, c := range b {
		want = want && Byte(c)
	}
	if got := notPlain8(binary.LittleEndian.Uint64(b[:])) == 0; got != want {
		t.Fatalf("all of %q plain: %v, want %v", b, got, want)
	}
}

// TestPlain8 checks that notPlain8 flags nothing exactly when all eight
// bytes are plain, with each byte value in each position among plain
// bytes, and next to every other byte value.
func TestPlain8(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			b := [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
			b[pos] = byte(c)
			checkPlain8(t, b)
			for d := range 256 {
				b[(pos+1)%8] = byte(d)
				checkPlain8(t, b)
			}
		}
	}
}

// TestNotPlain8First checks that notPlain8's lowest flagged byte is the
// first byte Byte refuses, with each byte value in each position among
// plain bytes and before every other byte value.
func TestNotPlain8First(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			b := [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
			b[pos] = byte(c)
			for d := range 256 {
				b[(pos+1)%8] = byte(d)
				want := 8
				for i, x := range b {
					if !Byte(x) {
						want = i
						break
					}
				}
				m := notPlain8(binary.LittleEndian.Uint64(b[:]))
				if got := bits.TrailingZeros64(m) >> 3; got != want {
					t.Fatalf("notPlain8(%q): first flagged byte %d, want %d", b, got, want)
				}
			}
		}
	}
}

// TestNotPlain8Fills checks the eight-bytes-at-a-time test against the
// byte-at-a-time one for every byte value at every position, among
// plain bytes each of its own kind.
func TestNotPlain8Fills(t *testing.T) {
	for _, fill := range []byte{'a', ' ', '~', '!', '#', '[', ']'} {
		for pos := range 8 {
			for c := range 256 {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(c)
				x := binary.LittleEndian.Uint64(w[:])
				if got, want := notPlain8(x) != 0, !Byte(byte(c)); got != want {
					t.Fatalf("notPlain8(%q) != 0: %v, want %v", w, got, want)
				}
			}
		}
	}
}

// skipRef is Skip one byte at a time: the reference FuzzSkip compares
// it with.
func skipRef(b []byte, i int) int {
	for i < len(b) && Byte(b[i]) {
		i++
	}
	return i
}

// FuzzSkip compares Skip with the byte-at-a-time reference from every
// start position.
func FuzzSkip(f *testing.F) {
	f.Add([]byte(`plain text that runs past eight bytes","next"`))
	f.Add([]byte(`with \"escape\" after 8 bytes`))
	f.Add([]byte("ctl \x01 and é and \xff"))
	f.Add([]byte(`sha256:c36ea965a724d84d8d4544d109e8cee7a4df547b6714842668ad3ede5b3de22b`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := 0; i <= len(b); i++ {
			if got, want := Skip(b, i), skipRef(b, i); got != want {
				t.Fatalf("Skip(%q, %d) = %d, want %d", b, i, got, want)
			}
		}
	})
}
