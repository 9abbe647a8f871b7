package eligibility

import "github.com/prunesched/prunesched/events"

// slabs is where a core's small records come from, a chunk at a time:
// one allocation where there were dozens (each was 60-100 ns of the
// core's time per record, garbage collector included). Everything handed
// out is fresh (zero) and handed out once; a chunk lives as long as
// anything in it, which for these records (kept by their items, or
// emitted and kept as an item's last mark) is about as long as the core.
type slabs struct {
	calls    []call
	ph       []phCache
	verdicts []verdict
	props    []verdicts // items' proposals
	marks    []events.Mark
	recs     []events.Recoverability
	ev       []events.Evidence
	out      []events.Event
}

// Chunk sizes, in records, each chosen so that a chunk fills one of the
// allocator's size classes with little left over (16 calls of 408 bytes
// are 6,528 bytes, a class), and small: a core's last, partly used
// chunks are memory every session keeps (about 10 KiB in all). A record
// that grows wastes a little more until its count is chosen again.
const (
	callChunk     = 16 // 6,528 bytes
	phChunk       = 16 // 1,280 bytes
	verdictChunk  = 32 // 4,096 bytes
	propsChunk    = 32 // 2,048 bytes
	markChunk     = 16 // 3,328 of 3,456 bytes
	recChunk      = 40 // 3,200 bytes
	evidenceChunk = 40 // 3,200 bytes
	eventChunk    = 17 // 2,040 of 2,048 bytes
)

// next returns a fresh record from *slab, allocating chunk more when it is
// empty.
func next[T any](slab *[]T, chunk int) *T {
	if len(*slab) == 0 {
		*slab = make([]T, chunk)
	}
	p := &(*slab)[0]
	*slab = (*slab)[1:]
	return p
}

// nextN returns n fresh records from *slab, with length 0 and capacity n
// (appending past n copies, so never into a neighbour's records); a run
// longer than a quarter chunk gets its own array; nil when n is 0.
func nextN[T any](slab *[]T, n, chunk int) []T {
	switch {
	case n == 0:
		return nil
	case n > chunk/4:
		return make([]T, 0, n)
	case len(*slab) < n:
		*slab = make([]T, chunk)
	}
	s := (*slab)[:0:n]
	*slab = (*slab)[n:]
	return s
}
