package store

import (
	"fmt"
	"testing"

	"github.com/prunesched/prunesched/internal/testutil"
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
	if _, ok := c.sessions.Peek("b"); ok {
		t.Error("b, least recently used, was kept")
	}
	if _, ok := c.sessions.Peek("a"); !ok {
		t.Error("a, recently used, was evicted")
	}
	testutil.Equal(t, c.sessions.Cost(), 5)
	big := fill("d", 9) // over the bound on its own: kept, the rest go
	testutil.Equal(t, c.sessions.Len(), 1)
	held, _ := c.sessions.Peek("d")
	testutil.True(t, held == big, "the growing session was evicted")
	testutil.Equal(t, c.sessions.Cost(), 9)
}
