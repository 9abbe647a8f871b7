package projections

import (
	"runtime"
	"sync/atomic"

	"github.com/prunesched/prunesched/events"
)

// Rendered fragments. A session's bundle changes little from one request
// to the next (a few items appended, a few pruned or restored), so each
// renderer caches what it wrote for every item, keyed by what determines
// those bytes, and stitches the cached fragments with the few new ones:
// the output is byte for byte what rendering from scratch writes (tests
// hold it after every event of a session). Fragments hang off the items
// (itemSlot, reached from BundleItem.slot), are immutable once stored and
// swapped atomically, so concurrent renders of one session are safe; the
// last one to store wins.

// Default render cache bounds (see RenderBudget).
const (
	DefaultRenderCacheSessionBytes = 32 << 20
	DefaultRenderCacheTotalBytes   = 256 << 20
)

// RenderBudget bounds the rendered fragments cached by the sessions that
// share it: per session and in total. A fragment that would exceed either
// is rendered but not kept. A projection worker gives all its sessions one
// budget (Session.SetRenderBudget); a session without one has its own,
// with the default bounds.
type RenderBudget struct {
	sessionBytes, totalBytes int64
	used                     atomic.Int64
}

// NewRenderBudget returns a budget of sessionBytes per session and
// totalBytes for all sessions sharing it.
func NewRenderBudget(sessionBytes, totalBytes int64) *RenderBudget {
	return &RenderBudget{sessionBytes: sessionBytes, totalBytes: totalBytes}
}

// Used returns the bytes the budget's sessions have cached.
func (b *RenderBudget) Used() int64 { return b.used.Load() }

// fragmentOverhead is what a cached fragment costs beside its bytes.
const fragmentOverhead = 96

// renderCache accounts one session's cached fragments against its budget.
type renderCache struct {
	budget *RenderBudget
	bytes  atomic.Int64
}

func newRenderCache(b *RenderBudget) *renderCache { return &renderCache{budget: b} }

// release returns the session's bytes to its budget when the session is
// collected.
func (c *renderCache) release(s *Session) {
	runtime.AddCleanup(s, func(c *renderCache) { c.budget.used.Add(-c.bytes.Load()) }, c)
}

// RenderCacheBytes returns the bytes of rendered fragments the session
// caches (part of its memory, for a projection's budget).
func (s *Session) RenderCacheBytes() int64 { return s.rc.bytes.Load() }

// itemSlot holds an item's cached fragments, one per format.
type itemSlot struct {
	anthropic, openai, text atomic.Pointer[fragment]
}

// fragment is one item's rendered bytes with the key they were rendered
// for. The key is either the item's content state (placeholder, pruned,
// residue: all the Anthropic and OpenAI forms depend on besides fields
// fixed at the item's creation) or its view generation (the text form,
// whose header shows marks and applications).
type fragment struct {
	ph      string
	pruned  bool
	residue *events.Residue
	spans   string // spanKey of the span references applied
	gen     uint64
	counted bool // text: tokens counted with a events.TokenCounter
	tokens  int  // text: the item's rendered token count
	b       []byte
}

// contentFragment is b keyed by bi's content state.
func (bi *BundleItem) contentFragment(b []byte) *fragment {
	return &fragment{ph: bi.Placeholder, pruned: bi.Pruned, residue: bi.Residue, spans: bi.spanKey, b: b}
}

// sameContent reports whether f was rendered for bi's content state.
func (f *fragment) sameContent(bi *BundleItem) bool {
	return f.ph == bi.Placeholder && f.pruned == bi.Pruned && f.residue == bi.Residue && f.spans == bi.spanKey
}

// fragmentFormat picks one format's fragment of an item.
type fragmentFormat func(*itemSlot) *atomic.Pointer[fragment]

func anthropicFragment(f *itemSlot) *atomic.Pointer[fragment] { return &f.anthropic }
func openaiFragment(f *itemSlot) *atomic.Pointer[fragment]    { return &f.openai }
func textFragment(f *itemSlot) *atomic.Pointer[fragment]      { return &f.text }

// cached returns bi's fragment in format f, or nil.
func (bi *BundleItem) cached(f fragmentFormat) *fragment {
	if bi.slot == nil {
		return nil
	}
	return f(bi.slot).Load()
}

// keep caches fr as bi's fragment in format f when the budgets allow.
func (c *renderCache) keep(bi *BundleItem, f fragmentFormat, fr *fragment) {
	if c == nil || bi.slot == nil {
		return
	}
	p := f(bi.slot)
	old := p.Load()
	delta := int64(len(fr.b) + fragmentOverhead)
	if old != nil {
		delta -= int64(len(old.b) + fragmentOverhead)
	}
	if delta > 0 && (c.bytes.Load()+delta > c.budget.sessionBytes || c.budget.used.Load()+delta > c.budget.totalBytes) {
		return
	}
	if p.CompareAndSwap(old, fr) {
		c.bytes.Add(delta)
		c.budget.used.Add(delta)
	}
}
