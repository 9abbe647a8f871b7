// Package lru is the module's one least-recently-used cache: entries with a
// cost (bytes, facts), bounded by their total cost, oldest out first.
//
// It does no locking (its users hold their own lock, often over more state
// than the cache) and never evicts on its own schedule: eviction happens in
// Add and Grow, or when the user asks (RemoveOldest).
package lru

// Cache maps keys to values in order of use. The zero value is not usable;
// call New.
type Cache[K comparable, V any] struct {
	limit int64
	cost  int64
	items map[K]*entry[K, V]
	// root is the sentinel of a ring: root.next is the most recently used,
	// root.prev the least.
	root entry[K, V]
}

type entry[K comparable, V any] struct {
	prev, next *entry[K, V]
	key        K
	val        V
	cost       int64
}

// New returns a cache that holds entries while their total cost is at most
// limit (a limit of 0 or less bounds nothing).
func New[K comparable, V any](limit int64) *Cache[K, V] {
	c := &Cache[K, V]{limit: limit, items: map[K]*entry[K, V]{}}
	c.root.next, c.root.prev = &c.root, &c.root
	return c
}

func (c *Cache[K, V]) unlink(e *entry[K, V]) {
	e.prev.next, e.next.prev = e.next, e.prev
}

func (c *Cache[K, V]) pushFront(e *entry[K, V]) {
	e.prev, e.next = &c.root, c.root.next
	c.root.next.prev = e
	c.root.next = e
}

// Get returns the value of k and makes it the most recently used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	e, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.unlink(e)
	c.pushFront(e)
	return e.val, true
}

// Peek returns the value of k without changing the order.
func (c *Cache[K, V]) Peek(k K) (V, bool) {
	e, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	return e.val, true
}

// Add stores v under k at cost as the most recently used (replacing an
// entry of k), then evicts the least recently used other entries while
// over the limit, and returns the entries evicted, oldest first.
func (c *Cache[K, V]) Add(k K, v V, cost int64) (evicted []V) {
	if e, ok := c.items[k]; ok {
		c.cost += cost - e.cost
		e.val, e.cost = v, cost
		c.unlink(e)
		c.pushFront(e)
	} else {
		e := &entry[K, V]{key: k, val: v, cost: cost}
		c.items[k] = e
		c.pushFront(e)
		c.cost += cost
	}
	return c.evictOver(k)
}

// Grow adds delta to the cost of k (absent: nothing) without changing the
// order, then evicts the least recently used entries while over the limit,
// stopping when k is the oldest left (never k itself).
func (c *Cache[K, V]) Grow(k K, delta int64) (evicted []V) {
	e, ok := c.items[k]
	if !ok {
		return nil
	}
	e.cost += delta
	c.cost += delta
	return c.evictOver(k)
}

// evictOver evicts the least recently used entries while over the limit,
// stopping at keep.
func (c *Cache[K, V]) evictOver(keep K) (evicted []V) {
	for c.limit > 0 && c.cost > c.limit {
		last := c.root.prev
		if last == &c.root || last.key == keep {
			break
		}
		c.remove(last)
		evicted = append(evicted, last.val)
	}
	return evicted
}

func (c *Cache[K, V]) remove(e *entry[K, V]) {
	c.unlink(e)
	delete(c.items, e.key)
	c.cost -= e.cost
}

// Remove drops k and reports whether it was held.
func (c *Cache[K, V]) Remove(k K) bool {
	e, ok := c.items[k]
	if ok {
		c.remove(e)
	}
	return ok
}

// Oldest returns the least recently used entry.
func (c *Cache[K, V]) Oldest() (k K, v V, ok bool) {
	if last := c.root.prev; last != &c.root {
		return last.key, last.val, true
	}
	return k, v, false
}

// Newest returns the most recently used entry.
func (c *Cache[K, V]) Newest() (k K, v V, ok bool) {
	if first := c.root.next; first != &c.root {
		return first.key, first.val, true
	}
	return k, v, false
}

// Len is the number of entries held.
func (c *Cache[K, V]) Len() int { return len(c.items) }

// Cost is the total cost of the entries held.
func (c *Cache[K, V]) Cost() int64 { return c.cost }

// Limit is the bound given to New.
func (c *Cache[K, V]) Limit() int64 { return c.limit }

// Clear drops every entry.
func (c *Cache[K, V]) Clear() {
	clear(c.items)
	c.root.next, c.root.prev = &c.root, &c.root
	c.cost = 0
}
