package projections

import (
	"fmt"
	"strings"
	"testing"
)

// mapModel is the Go map the tables are checked against: each key's entry
// index, and the keys in insertion order.
type mapModel struct {
	ref   map[string]int
	order []string
}

// insert enters key k (the n-th inserted) and checks what a table's insert
// returned: the entry index got, whether it was added, the table's length.
func (m *mapModel) insert(t *testing.T, k string, n, got int, added bool, length int) {
	t.Helper()
	want, dup := m.ref[k]
	if added == dup {
		t.Fatalf("insert %q (#%d): added %v, want %v", k, n, added, !dup)
	}
	if !dup {
		want = len(m.order)
		m.ref[k] = want
		m.order = append(m.order, k)
	}
	if got != want || length != len(m.order) {
		t.Fatalf("insert %q (#%d): entry %d, want %d; len %d, want %d", k, n, got, want, length, len(m.order))
	}
}

// checkStrTable inserts keys into a strTable and a Go map side by side and
// requires that they agree after every insert: what insert reports, the
// entry indexes (insertion order), get on every key seen so far, and on
// keys never inserted.
func checkStrTable(t *testing.T, keys []string) {
	t.Helper()
	var tab strTable[int]
	m := mapModel{ref: map[string]int{}}
	for n, k := range keys {
		i, added := tab.insert(k, n)
		m.insert(t, k, n, i, added, tab.len())
	}
	ref := m.ref
	for k, e := range ref {
		if got := tab.find(k); got != e {
			t.Fatalf("find %q: %d, want %d", k, got, e)
		}
		if v, ok := tab.get(k); !ok || tab.key(e) != k || v != *tab.val(e) {
			t.Fatalf("get %q: %v %v", k, v, ok)
		}
	}
	checkIdxTable(t, keys)
	for _, k := range []string{"", "absent", strings.Repeat("x", 300)} {
		if _, in := ref[k]; in {
			continue
		}
		if got := tab.find(k); got != -1 {
			t.Fatalf("find %q (never inserted): %d", k, got)
		}
		if _, ok := tab.get(k); ok {
			t.Fatalf("get %q (never inserted) found it", k)
		}
		if v := tab.at(k); v != 0 {
			t.Fatalf("at %q (never inserted): %d", k, v)
		}
	}
}

// checkIdxTable inserts keys into an idxTable that refers to a slice of
// the keys, through both insert and probe then add, beside a Go map, and
// requires that they agree after every insert and on every key at the
// end, including keys never inserted.
func checkIdxTable(t *testing.T, keys []string) {
	t.Helper()
	var tab idxTable
	// The model's order holds the keys, where the table's references point.
	m := mapModel{ref: map[string]int{}}
	keyOf := func(r int) string { return m.order[r] }
	for n, k := range keys {
		var r int
		var added bool
		if n%2 == 0 {
			r, added = tab.insert(k, len(m.order), keyOf)
		} else {
			var sp idxSpot
			if r, sp = tab.probe(k, keyOf); r < 0 {
				r, added = len(m.order), true
				tab.add(sp, r)
			}
		}
		m.insert(t, k, n, r, added, tab.len())
	}
	ref := m.ref
	for k, r := range ref {
		if got := tab.find(k, keyOf); got != r {
			t.Fatalf("idx find %q: %d, want %d", k, got, r)
		}
	}
	for _, k := range []string{"", "absent", strings.Repeat("x", 300)} {
		if _, in := ref[k]; !in && tab.find(k, keyOf) != -1 {
			t.Fatalf("idx find %q (never inserted) found it", k)
		}
	}
}

func TestIdxTableZeroValue(t *testing.T) {
	var tab idxTable
	keyOf := func(int) string { panic("no keys") }
	if tab.len() != 0 || tab.find("x", keyOf) != -1 || tab.find("", keyOf) != -1 {
		t.Fatal("zero table is not empty")
	}
}

func TestStrTableAgreesWithMap(t *testing.T) {
	var keys []string
	for i := range 5000 {
		keys = append(keys, fmt.Sprintf("pipe%02d-e%06d", i%16, i))
		if i%7 == 0 { // repeats, near and far
			keys = append(keys, keys[i/2])
		}
	}
	keys = append(keys, "", "", "a", "a")
	checkStrTable(t, keys)
}

func TestStrTableZeroValue(t *testing.T) {
	var tab strTable[*callRef]
	if tab.len() != 0 || tab.find("x") != -1 || tab.at("x") != nil {
		t.Fatal("zero table is not empty")
	}
	if _, ok := tab.get(""); ok {
		t.Fatal("zero table has the empty key")
	}
}

// FuzzStrTable checks strTable and idxTable against a Go map on keys split from the
// input (repeats included).
func FuzzStrTable(f *testing.F) {
	f.Add("a,b,a,c,,d,b")
	f.Add(strings.Repeat("k,", 40))
	f.Fuzz(func(t *testing.T, in string) {
		checkStrTable(t, strings.Split(in, ","))
	})
}
