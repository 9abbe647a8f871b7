package scheduler

// ruleCacheExpired (trigger cache_expired): a previous request exists but
// nothing of its prefix can be read now, so applying everything pending
// breaks nothing: the time since the previous request exceeds the TTL of
// the tier it used (5m or 1h; Anthropic refreshes the TTL on every hit, so
// the previous request's time is the one that counts), a host compaction
// replaced the context since, or the previous request cached nothing
// (below the minimum cacheable length, or it reported no cache use).
// CacheCost is 0.
func ruleCacheExpired(_ *Core, m moment) bool { return m.cs.prev >= 0 && !m.cs.warm }
