package store

import (
	"context"
	"fmt"
	"sync"
)

// MemBlobs is an in-memory content-addressed blob store: the log's blob
// bucket for code that runs without a server (the offline comparison, the
// lab's fixtures, the Examples). It is safe for concurrent use and holds
// everything it is given until dropped; it is not a cache.
type MemBlobs struct {
	mu sync.RWMutex
	m  map[string][]byte
}

// NewMemBlobs returns an empty store.
func NewMemBlobs() *MemBlobs { return &MemBlobs{m: map[string][]byte{}} }

// PutBlob stores a copy of data under hash (events.BlobPutter); a hash
// already held keeps its first data.
func (b *MemBlobs) PutBlob(_ context.Context, hash string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[hash]; !ok {
		b.m[hash] = append([]byte(nil), data...)
	}
	return nil
}

// GetBlob returns the payload stored under hash (projections.BlobGetter);
// callers must not modify it.
func (b *MemBlobs) GetBlob(_ context.Context, hash string) ([]byte, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	d, ok := b.m[hash]
	if !ok {
		return nil, fmt.Errorf("blob %s: not found", hash)
	}
	return d, nil
}
