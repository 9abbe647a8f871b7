package scheduler

// The cost model of one application while the cache is warm.
//
// Let w be the price of a token that misses the cache (cache write, or
// plain input under automatic caching), r the cache-read price, P the
// prefix cached by the previous request, D the first divergence, R =
// max(0, P-D) the mutation radius and n the tokens removed net of
// placeholders. Compared with sending the request unchanged:
//
//	unchanged: P*r + (N-P)*w
//	applied:   min(D,P)*r + (N-n-min(D,P))*w
//	difference = R*(w-r) - n*w
//
// The new suffix written since the last request is written either way and
// cancels out. So the break costs R*(w-r) now, and the application saves
// n*w now (the removed tokens are not re-written) plus n*r on each later
// request that would have read them from cache. The alternative to
// applying now is applying at the next free point (cache expiry, host
// compaction), expected after H requests (policy.Scheduler.Horizon: the
// requests of the session's current warm run, bounded, unless
// horizon_requests fixes it), where it breaks nothing. Applying now wins iff
//
//	R*(w-r) < n*(w + H*r)
//
// With Anthropic 5m prices (w = 1.25, r = 0.1 times input) and H = 5 that
// is R < 1.52 n: only cuts near the end of the cached prefix pay.

// breakCost is the priced cache break (USD) of a mutation radius.
func breakCost(pr pricing, radius int) float64 {
	return usd(radius, pr.write()-pr.read())
}

// expectedSaving is the saving (USD) of removing net tokens now rather
// than after horizon more requests.
func expectedSaving(pr pricing, net, horizon int) float64 {
	return usd(net, pr.write()) + float64(horizon)*usd(net, pr.read())
}
