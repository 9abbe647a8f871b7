package events

import (
	"testing"
	"unicode/utf8"
)

// plainSpanRef is plainSpan as it was before it read 8 bytes at a time:
// the reference FuzzPlainSpan compares it with.
func plainSpanRef(p *fastParser) (start, end int, ok bool) {
	if !p.lit(`"`) {
		return 0, 0, false
	}
	start = p.i
	b := p.b
	i := p.i
	for i < len(b) {
		c := b[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			i++
			continue
		}
		switch {
		case c == '"':
			p.i = i + 1
			return start, i, true
		case c == '\\':
			p.i = i
			return start, -1, true
		case c < 0x20:
			return 0, 0, false
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, 0, false
			}
			i += size
		}
	}
	return 0, 0, false
}

// FuzzPlainSpan compares plainSpan with the byte-at-a-time reference on
// the same input, from every start position: same result, same position.
func FuzzPlainSpan(f *testing.F) {
	f.Add([]byte(`"plain text that runs past eight bytes","next"`))
	f.Add([]byte(`"with \"escape\" after 8 bytes"`))
	f.Add([]byte("\"ctl \x01 and é and \xff\""))
	f.Add([]byte(`"sha256:c36ea965a724d84d8d4544d109e8cee7a4df547b6714842668ad3ede5b3de22b"`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := range b {
			p, q := fastParser{b: b, i: i}, fastParser{b: b, i: i}
			s1, e1, ok1 := p.plainSpan()
			s2, e2, ok2 := plainSpanRef(&q)
			if s1 != s2 || e1 != e2 || ok1 != ok2 || ok1 && p.i != q.i {
				t.Fatalf("at %d of %q: plainSpan = %d %d %v (i %d), reference %d %d %v (i %d)", i, b, s1, e1, ok1, p.i, s2, e2, ok2, q.i)
			}
		}
	})
}
