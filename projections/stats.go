package projections

import (
	"context"
	"crypto/sha256"
	"sync"

	"github.com/prunesched/prunesched/events"
)

// Stats is the token and decision ledger of one session.
type Stats struct {
	// Items counts every item observed; RenderedItems those after the last
	// host compaction.
	Items         int `json:"items"`
	RenderedItems int `json:"rendered_items"`
	// ToolCalls counts every tool call item in the log (all main-thread
	// calls, host-compacted ones included: each was emitted by the model).
	ToolCalls int        `json:"tool_calls"`
	Tokens    TokenStats `json:"tokens"`
	// Decisions counts the latest mark per item by decision, Rungs the
	// latest PRUNE marks by rule (events.PruneRule: the rung, "errored" for
	// an errored input, "manual" for a person's prune).
	Decisions map[events.Decision]int `json:"decisions"`
	Rungs     map[string]int          `json:"rungs"`
	// Applied counts the latest marks an application applied; Pending the
	// latest PRUNE marks still waiting for the scheduler (a pending mark
	// changes nothing in the bundle).
	Applied int `json:"applied"`
	Pending int `json:"pending"`
	// PrunedItems render as our placeholder; HostPrunedItems as the host's;
	// HostCompactedItems are not rendered.
	PrunedItems        int `json:"pruned_items"`
	HostPrunedItems    int `json:"host_pruned_items"`
	HostCompactedItems int `json:"host_compacted_items"`
	// DanglingMarks counts application entries naming an unknown mark id
	// (ignored); UnresolvedItems applied marks or restores naming an unknown
	// item; StaleApplications applied PRUNE marks ignored because a restore
	// came after the mark, or because they target a thinking block;
	// DuplicateItems fact events repeating an item id (the first is kept).
	DanglingMarks     int `json:"dangling_marks"`
	UnresolvedItems   int `json:"unresolved_items"`
	StaleApplications int `json:"stale_applications"`
	DuplicateItems    int `json:"duplicate_items"`
}

// TokenStats are stored token counts, as the economics price them
// (Item.PricedTokens: the exact count where the fact records one beside
// the estimate a decision used); only placeholders are counted here.
// Framing (roles, block structure) is not counted. By definition
//
//	Rendered = Raw - HostCompacted - HostPruned + HostPlaceholder - Removed + Placeholder
//
// and Rendered equals the sum over the bundle's items of what each renders
// as (a test holds both).
type TokenStats struct {
	// Raw is the sum of stored counts of every item's original payload.
	Raw int `json:"raw"`
	// Rendered is what the bundle's items add up to.
	Rendered int `json:"rendered"`
	// Removed is the stored count of payloads our applied prunes replaced
	// (items already removed by the host are not ours).
	Removed int `json:"removed"`
	// Placeholder is the tokens of the placeholders that replaced them.
	Placeholder int `json:"placeholder"`
	// HostCompacted is the stored count of items before the last host
	// compaction; HostPruned of outputs the host cleared itself, and
	// HostPlaceholder the tokens of the host's placeholders for them.
	HostCompacted   int `json:"host_compacted"`
	HostPruned      int `json:"host_pruned"`
	HostPlaceholder int `json:"host_placeholder"`
}

// Stats computes the ledger. Payload counts are the stored ones; tc counts
// placeholders, once per distinct text (cached in the Session). blobs is
// not consulted (no payload is read) and may be nil.
func (s *Session) Stats(ctx context.Context, blobs BlobGetter, tc events.TokenCounter) (Stats, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Stats{
		Items:             len(s.items),
		Decisions:         map[events.Decision]int{},
		Rungs:             map[string]int{},
		DanglingMarks:     s.dangling,
		UnresolvedItems:   s.unresolved,
		StaleApplications: s.stale,
		DuplicateItems:    s.duplicates,
	}
	for _, it := range s.items {
		st.Tokens.Raw += it.PricedTokens()
		if it.Kind == ItemToolUse {
			st.ToolCalls++
		}
	}
	b := s.snapshotLocked()
	st.HostCompactedItems = b.hdr.HostCompacted.Items
	st.Tokens.HostCompacted = b.hdr.HostCompacted.Tokens
	st.RenderedItems = len(b.items)
	for _, bi := range b.items {
		n := bi.renderedTokens(s.tokens, tc)
		st.Tokens.Rendered += n
		switch {
		case bi.HostPruned:
			st.HostPrunedItems++
			st.Tokens.HostPruned += bi.PricedTokens()
			st.Tokens.HostPlaceholder += n
		case bi.Pruned:
			st.PrunedItems++
			st.Tokens.Removed += bi.PricedTokens()
			st.Tokens.Placeholder += n
		}
	}
	latest, order := s.latestMarks()
	for _, k := range order {
		ms := latest[k]
		st.Decisions[ms.m.Decision]++
		if ms.m.Decision == events.Prune {
			st.Rungs[events.PruneRule(ms.m.Rung, ms.m.Reason)]++
		}
		switch {
		case ms.app != nil:
			st.Applied++
		case ms.m.Decision == events.Prune:
			// Only an unapplied PRUNE waits on the scheduler; KEEP, DEFER
			// and ABSTAIN marks change nothing in the bundle.
			st.Pending++
		}
	}
	return st, ctx.Err()
}

// tokenCache counts placeholder texts once per distinct text, keyed by the
// text's SHA-256. It assumes one tokenizer per session.
type tokenCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]int
}

func newTokenCache() *tokenCache {
	return &tokenCache{m: map[[sha256.Size]byte]int{}}
}

// count returns tc's count of s, cached. A nil tc counts zero and caches
// nothing; a nil cache counts without caching.
func (c *tokenCache) count(s string, tc events.TokenCounter) int {
	if tc == nil {
		return 0
	}
	if c == nil {
		return tc.Count(s)
	}
	k := sha256.Sum256([]byte(s))
	c.mu.Lock()
	n, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return n
	}
	n = tc.Count(s)
	c.mu.Lock()
	c.m[k] = n
	c.mu.Unlock()
	return n
}
