package store

import (
	"sync"

	"github.com/prunesched/prunesched/internal/lru"
)

// blobCache is a least-recently-used cache of blobs bounded by their total
// size. Blobs are immutable (content-addressed), so it needs no
// invalidation. A nil *blobCache caches nothing.
type blobCache struct {
	mu    sync.Mutex
	blobs *lru.Cache[string, []byte] // cost: bytes
}

// newBlobCache returns a cache of at most limit bytes, or nil when limit
// is not positive.
func newBlobCache(limit int64) *blobCache {
	if limit <= 0 {
		return nil
	}
	return &blobCache{blobs: lru.New[string, []byte](limit)}
}

// admits reports whether the cache keeps a blob of n bytes: at most a
// quarter of its limit.
func (c *blobCache) admits(n int64) bool { return c != nil && n <= c.blobs.Limit()/4 }

// get returns a copy of the cached blob, so callers may keep or modify it.
func (c *blobCache) get(hash string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	data, ok := c.blobs.Get(hash)
	if !ok {
		return nil, false
	}
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
	if _, ok := c.blobs.Get(hash); ok {
		return
	}
	c.blobs.Add(hash, append(make([]byte, 0, len(data)), data...), int64(len(data)))
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
	_, ok := c.blobs.Peek(hash)
	return ok
}
