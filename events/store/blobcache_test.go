package store

import (
	"fmt"
	"testing"
)

func TestBlobCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newBlobCache(400)
	for i := range 5 {
		c.put(fmt.Sprint(i), make([]byte, 100))
	}
	if _, ok := c.get("0"); ok {
		t.Fatal("blob 0 still cached over the limit")
	}
	if _, ok := c.get("1"); !ok {
		t.Fatal("blob 1 evicted too early")
	}
	c.put("5", make([]byte, 100)) // evicts 2, the least recently used now
	if _, ok := c.get("2"); ok {
		t.Fatal("blob 2 still cached")
	}
	if _, ok := c.get("1"); !ok {
		t.Fatal("recently read blob 1 evicted")
	}
	got, _ := c.get("1")
	got[0] = 7
	if again, _ := c.get("1"); again[0] != 0 {
		t.Fatal("a caller's change reached the cache")
	}
	var nilCache *blobCache
	nilCache.put("x", []byte("x"))
	if _, ok := nilCache.get("x"); ok {
		t.Fatal("nil cache returned a blob")
	}
	if newBlobCache(0) != nil {
		t.Fatal("zero limit should disable the cache")
	}
}
