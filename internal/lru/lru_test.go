package lru

import (
	"fmt"
	"testing"
)

func keys[K comparable, V any](c *Cache[K, V]) string {
	s := ""
	for e := c.root.next; e != &c.root; e = e.next {
		s += fmt.Sprint(e.key)
	}
	return s
}

func TestCache(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ops     func(c *Cache[string, int]) []int
		order   string // most recent first
		cost    int64
		evicted string
	}{
		{"add in order", func(c *Cache[string, int]) []int { c.Add("a", 1, 1); c.Add("b", 2, 1); return c.Add("c", 3, 1) }, "cba", 3, "[]"},
		{"over the limit evicts the oldest", func(c *Cache[string, int]) []int {
			c.Add("a", 1, 2)
			c.Add("b", 2, 2)
			return c.Add("c", 3, 2)
		}, "cb", 4, "[1]"},
		{"get refreshes", func(c *Cache[string, int]) []int {
			c.Add("a", 1, 2)
			c.Add("b", 2, 2)
			c.Get("a")
			return c.Add("c", 3, 2)
		}, "ca", 4, "[2]"},
		{"peek does not refresh", func(c *Cache[string, int]) []int {
			c.Add("a", 1, 2)
			c.Add("b", 2, 2)
			c.Peek("a")
			return c.Add("c", 3, 2)
		}, "cb", 4, "[1]"},
		{"replace keeps one entry", func(c *Cache[string, int]) []int { c.Add("a", 1, 1); return c.Add("a", 9, 3) }, "a", 3, "[]"},
		{"grow evicts others, never the grown", func(c *Cache[string, int]) []int {
			c.Add("a", 1, 1)
			c.Add("b", 2, 1)
			c.Add("c", 3, 1)
			return c.Grow("c", 10)
		}, "c", 11, "[1 2]"},
		{"grow stops at the grown when it is the oldest", func(c *Cache[string, int]) []int {
			c.Add("a", 1, 1)
			c.Add("b", 2, 1)
			return c.Grow("a", 10)
		}, "ba", 12, "[]"},
		{"an entry over the limit alone stays", func(c *Cache[string, int]) []int { return c.Add("a", 1, 99) }, "a", 99, "[]"},
		{"remove", func(c *Cache[string, int]) []int { c.Add("a", 1, 1); c.Add("b", 2, 1); c.Remove("a"); return nil }, "b", 1, "[]"},
		{"clear", func(c *Cache[string, int]) []int { c.Add("a", 1, 1); c.Clear(); return nil }, "", 0, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New[string, int](5)
			ev := tc.ops(c)
			if got := keys(c); got != tc.order || c.Cost() != tc.cost || fmt.Sprint(ev) != tc.evicted && !(ev == nil && tc.evicted == "[]") || c.Len() != len(tc.order) {
				t.Fatalf("order %q cost %d evicted %v len %d; want %q %d %s", got, c.Cost(), ev, c.Len(), tc.order, tc.cost, tc.evicted)
			}
		})
	}
	c := New[int, int](0)
	for i := range 100 {
		c.Add(i, i, 1000)
	}
	if k, _, _ := c.Oldest(); c.Len() != 100 || k != 0 {
		t.Fatalf("an unbounded cache evicted: len %d oldest %d", c.Len(), k)
	}
}
