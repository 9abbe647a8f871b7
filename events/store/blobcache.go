package store

import (
	"container/list"
	"sync"
)

// blobCache is a least-recently-used cache of blobs bounded by their total
// size. Blobs are immutable (content-addressed), so it needs no
// invalidation. A nil *blobCache caches nothing.
type blobCache struct {
	mu    sync.Mutex
	limit int64
	size  int64
	order *list.List // of *blobEntry, most recent first
	byKey map[string]*list.Element
}

type blobEntry struct {
	hash string
	data []byte
}

// newBlobCache returns a cache of at most limit bytes, or nil when limit
// is not positive.
func newBlobCache(limit int64) *blobCache {
	if limit <= 0 {
		return nil
	}
	return &blobCache{limit: limit, order: list.New(), byKey: map[string]*list.Element{}}
}

// admits reports whether the cache keeps a blob of n bytes: at most a
// quarter of its limit.
func (c *blobCache) admits(n int64) bool { return c != nil && n <= c.limit/4 }

// get returns a copy of the cached blob, so callers may keep or modify it.
func (c *blobCache) get(hash string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[hash]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	data := el.Value.(*blobEntry).data
	return append(make([]byte, 0, len(data)), data...), true
}

// put caches a copy of data under hash, evicting the least recently used
// blobs beyond the limit. A blob larger than a quarter of the limit is not
// cached.
func (c *blobCache) put(hash string, data []byte) { cachePut(c, hash, data) }

// cachePut is put for data held as bytes or as a string: the data is
// copied only when it is cached.
func cachePut[T string | []byte](c *blobCache, hash string, data T) {
	if !c.admits(int64(len(data))) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[hash]; ok {
		c.order.MoveToFront(el)
		return
	}
	e := &blobEntry{hash: hash, data: append(make([]byte, 0, len(data)), data...)}
	c.byKey[hash] = c.order.PushFront(e)
	c.size += int64(len(data))
	for c.size > c.limit {
		last := c.order.Back()
		old := last.Value.(*blobEntry)
		c.order.Remove(last)
		delete(c.byKey, old.hash)
		c.size -= int64(len(old.data))
	}
}

// has reports whether hash is cached, without copying or reordering: a
// blob enters the cache only once it is known stored, so a cached hash
// needs no look-up before a put.
func (c *blobCache) has(hash string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.byKey[hash]
	return ok
}
