package events

import (
	"bytes"
	"testing"
	"unsafe"
)

// checkStrCache requires that c.get(b) is string(b) and keeps no
// reference to b.
func checkStrCache(t *testing.T, c *strCache, b []byte) string {
	t.Helper()
	want := string(b)
	got := c.get(b)
	if got != want {
		t.Fatalf("get(%q) = %q", b, got)
	}
	if len(b) > 0 && unsafe.StringData(got) == &b[0] {
		t.Fatalf("get(%q) returned the input's bytes", b)
	}
	return got
}

// TestStrCacheShares checks that equal short values come back as one
// string, long ones as copies, and that a value replaced in its slot is
// still returned right.
func TestStrCacheShares(t *testing.T) {
	var c strCache
	a := checkStrCache(t, &c, []byte("pipe00"))
	b := checkStrCache(t, &c, []byte("pipe00"))
	if unsafe.StringData(a) != unsafe.StringData(b) {
		t.Error("equal short values are not shared")
	}
	long := bytes.Repeat([]byte("x"), strCacheMax+1)
	l1, l2 := checkStrCache(t, &c, long), checkStrCache(t, &c, long)
	if unsafe.StringData(l1) == unsafe.StringData(l2) {
		t.Error("a value longer than strCacheMax is shared")
	}
	// Many values: every one right whatever the slot held before.
	for i := range 4 * strCacheSize {
		v := []byte{byte(i), byte(i >> 8), 'k', byte(i % 7)}
		checkStrCache(t, &c, v)
		checkStrCache(t, &c, append(v, "-and-a-longer-tail"...))
	}
	checkStrCache(t, &c, nil)
}

// TestDecoderSharesStrings checks that one Decoder returns the session of
// two events as one string.
func TestDecoderSharesStrings(t *testing.T) {
	var d Decoder
	var sessions []string
	for _, e := range fullEvents()[:2] {
		e.Session = "shared-session"
		b, err := Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		checkDecoder(t, &d, b)
		got, err := d.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, got.Session)
	}
	if unsafe.StringData(sessions[0]) != unsafe.StringData(sessions[1]) {
		t.Error("the session of two events is not shared")
	}
}

// FuzzStrCache requires that get returns every value unchanged, whatever
// the cache held before (the values of one input share it).
func FuzzStrCache(f *testing.F) {
	f.Add([]byte("pipe00\x00pipe00\x00sha256:00\x00Read"))
	f.Add([]byte("a\x00b\x00a\x00\x00"))
	var c strCache
	f.Fuzz(func(t *testing.T, in []byte) {
		for v := range bytes.SplitSeq(in, []byte{0}) {
			checkStrCache(t, &c, v)
		}
	})
}
