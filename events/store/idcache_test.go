package store

import (
	"fmt"
	"github.com/prunesched/prunesched/internal/testutil"
	"testing"
)

// TestIDCacheEvictsWholeSessions: over its bound the cache drops the least
// recently used sessions, never the one growing, and counts what it holds.
func TestIDCacheEvictsWholeSessions(t *testing.T) {
	c := newIDCache(5)
	fill := func(key string, n int) *sessionIDs {
		s := c.get(key)
		for i := range n {
			s.ids[fmt.Sprint(i)] = idEntry{seq: uint64(i + 1)}
		}
		c.grew(s, n)
		return s
	}
	fill("a", 2)
	fill("b", 2)
	c.get("a") // a is now more recent than b
	fill("c", 3)
	if _, ok := c.sessions["b"]; ok {
		t.Error("b, least recently used, was kept")
	}
	if _, ok := c.sessions["a"]; !ok {
		t.Error("a, recently used, was evicted")
	}
	testutil.Equal(t, c.n, 5)
	big := fill("d", 9) // over the bound on its own: kept, the rest go
	testutil.Equal(t, len(c.sessions), 1)
	testutil.True(t, c.sessions["d"] == big, "the growing session was evicted")
	testutil.Equal(t, c.n, 9)
}
