package projections

import (
	"fmt"
	"strings"
	"testing"
)

// checkStrTable inserts keys into a strTable and a Go map side by side and
// requires that they agree after every insert: what insert reports, the
// entry indexes (insertion order), get on every key seen so far, and on
// keys never inserted.
func checkStrTable(t *testing.T, keys []string) {
	t.Helper()
	var tab strTable[int]
	ref := map[string]int{} // key -> entry index
	var order []string
	for n, k := range keys {
		i, added := tab.insert(k, n)
		want, dup := ref[k]
		if added == dup {
			t.Fatalf("insert %q (#%d): added %v, want %v", k, n, added, !dup)
		}
		if !dup {
			want = len(order)
			ref[k] = want
			order = append(order, k)
		}
		if i != want {
			t.Fatalf("insert %q (#%d): entry %d, want %d", k, n, i, want)
		}
		if tab.len() != len(ref) {
			t.Fatalf("len %d, want %d", tab.len(), len(ref))
		}
	}
	for k, e := range ref {
		if got := tab.find(k); got != e {
			t.Fatalf("find %q: %d, want %d", k, got, e)
		}
		if v, ok := tab.get(k); !ok || tab.key(e) != k || v != *tab.val(e) {
			t.Fatalf("get %q: %v %v", k, v, ok)
		}
	}
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

// FuzzStrTable checks strTable against a Go map on keys split from the
// input (repeats included).
func FuzzStrTable(f *testing.F) {
	f.Add("a,b,a,c,,d,b")
	f.Add(strings.Repeat("k,", 40))
	f.Fuzz(func(t *testing.T, in string) {
		checkStrTable(t, strings.Split(in, ","))
	})
}
