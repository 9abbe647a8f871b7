package eligibility

import (
	"fmt"
	"hash/maphash"
	"testing"
)

// TestItemIndexMatchesMap checks the index against a map, across growth
// and with colliding hashes (a zero-entropy seed is not available, so
// collisions are forced by a tiny table before growth and by many ids).
func TestItemIndexMatchesMap(t *testing.T) {
	x := itemIndex{seed: maphash.MakeSeed()}
	var items itemList
	ref := map[string]*item{}
	for i := 0; i < 50000; i++ {
		id := fmt.Sprintf("id-%d", i*7919%100003)
		if i%3 == 0 {
			id = fmt.Sprintf("call_%x/input", i)
		}
		if got := x.get(&items, id); got != ref[id] {
			t.Fatalf("before add %q: got %v want %v", id, got, ref[id])
		}
		if ref[id] != nil {
			continue
		}
		it := items.add()
		it.id, it.idx = id, int32(items.n-1)
		x.add(x.hash(id), int(it.idx))
		ref[id] = it
		if i%97 == 0 {
			for k, v := range ref {
				if x.get(&items, k) != v {
					t.Fatalf("lookup %q after %d adds", k, items.n)
				}
				break
			}
		}
	}
	for k, v := range ref {
		if x.get(&items, k) != v {
			t.Fatalf("lookup %q", k)
		}
		if x.get(&items, k+"x") != nil {
			t.Fatalf("lookup %q found an absent id", k+"x")
		}
	}
	if x.n != len(ref) || 2*x.n > len(x.slots) {
		t.Fatalf("n %d slots %d", x.n, len(x.slots))
	}
	var empty itemIndex
	if empty.get(nil, "a") != nil {
		t.Fatal("empty index found an id")
	}
}

// TestItemIndexCollisions fills one table with ids forced onto equal
// hashes' probe chains by a small table, then checks every lookup.
func TestItemIndexCollisions(t *testing.T) {
	x := itemIndex{seed: maphash.MakeSeed()}
	var items itemList
	// Same 32-bit hash for different ids: simulate by adding slots by
	// hand with one hash value.
	for i := 0; i < 40; i++ {
		it := items.add()
		it.id, it.idx = fmt.Sprintf("c%d", i), int32(i)
		x.add(12345, i)
	}
	for i := range items.n {
		it := items.at(i)
		got := x.getHash(&items, it.id, 12345)
		if got != it {
			t.Fatalf("collision chain: %d: got %v", i, got)
		}
	}
	if x.getHash(&items, "nope", 12345) != nil {
		t.Fatal("found absent id on a collision chain")
	}
}
