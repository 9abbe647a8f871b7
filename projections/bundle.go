package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/placeholder"
)

// DefaultMaxTokens is the max_tokens written into an Anthropic request when
// the bundle names none.
const DefaultMaxTokens = 8192

// Bundle is an immutable snapshot of what would be sent to the model: the
// rendered items in order with their rendering state. Items before the last
// host compaction are not in it (only counted in HostCompacted). Its slices
// and payloads must not be modified.
type Bundle struct {
	Tenant   string `json:"tenant"`
	Session  string `json:"session"`
	Provider string `json:"provider,omitempty"`
	// Model is from SessionStarted, overridden by the last ModelRequest
	// naming one.
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	// Items are the rendered items in log order.
	Items []BundleItem `json:"items"`
	// HostCompacted describes what the host's own compaction removed.
	HostCompacted HostCompacted `json:"host_compacted"`

	tokens *tokenCache
	rc     *renderCache // nil: nothing cached (a bundle built by hand)
}

// HostCompacted summarises the items before the last host compaction.
type HostCompacted struct {
	Host   string `json:"host,omitempty"`
	Items  int    `json:"items"`
	Tokens int    `json:"tokens"`
}

// BundleItem is one rendered item: its state, its payload, and the
// placeholder that stands in for the payload when it is pruned.
type BundleItem struct {
	Item
	Text      string          `json:"-"`
	Signature string          `json:"-"`
	Input     json.RawMessage `json:"-"`
	// Output is an inline output (tests, unprepared events); otherwise the
	// output is fetched by Hash.
	Output *string           `json:"-"`
	Error  *events.ToolError `json:"-"`
	// Placeholder replaces the payload when Pruned (ours) or HostPruned
	// (HostPlaceholder). A pruned tool input renders as the object
	// {"prunesched_pruned": Placeholder, residue fields}.
	Placeholder string `json:"placeholder,omitempty"`
	// Residue is the applied mark's residue of an errored call.
	Residue *events.Residue `json:"residue,omitempty"`
	// Spans are the applied span reference's runs (reason SPAN_REFERENCE):
	// the output renders with each run replaced by its reference line.
	// Placeholder is then empty.
	Spans []placeholder.Span `json:"spans,omitempty"`
	// spanSaved is the span reference's count (Mark.TokensEstimated) and
	// spanKey what its rendering depends on.
	spanSaved int
	spanKey   string

	// slot holds the item's cached rendered fragments and gen identifies
	// this view of the item (a new one whenever the session rebuilds it);
	// nil and 0 in a BundleItem built by hand, which renders uncached.
	slot *itemSlot
	gen  uint64
}

// Bundle returns an immutable snapshot of the session's rendered bundle.
// It copies every item out of the session's Snapshot; the render path
// uses Snapshot itself, which shares the unchanged items.
func (s *Session) Bundle() Bundle {
	return s.Snapshot().Bundle()
}

// Snapshot is an immutable snapshot of a session's rendered bundle, like
// Bundle, except that its items are shared with the session's earlier and
// later snapshots: taking one after a few events costs about the items
// that changed (and 8 bytes per item when any did), where a Bundle copies
// every item. Its renderings are the Bundle's, byte for byte, and reuse
// the fragments rendered for the unchanged items (see render_cache.go).
type Snapshot struct {
	hdr   Bundle // Items nil
	items []*BundleItem
}

// Snapshot returns an immutable snapshot of the session's rendered bundle.
func (s *Session) Snapshot() Snapshot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.snapshotLocked()
}

// Len is the number of rendered items.
func (sn Snapshot) Len() int { return len(sn.items) }

// Pruned returns copies of the snapshot's pruned items that carry a
// placeholder or span references (Spans), in bundle order: what a proxy
// splices into a client's own request, without copying the other items.
func (sn Snapshot) Pruned() []BundleItem {
	var out []BundleItem
	for _, bi := range sn.items {
		if bi.Pruned && (bi.Placeholder != "" || len(bi.Spans) > 0) {
			out = append(out, *bi)
		}
	}
	return out
}

// Bundle returns the snapshot as a Bundle (copying its items).
func (sn Snapshot) Bundle() Bundle {
	b := sn.hdr
	b.Items = make([]BundleItem, len(sn.items))
	for i, bi := range sn.items {
		b.Items[i] = *bi
	}
	return b
}

// RenderAnthropic is RenderAnthropic of the snapshot's bundle.
func (sn Snapshot) RenderAnthropic(ctx context.Context, blobs BlobGetter, tc events.TokenCounter) ([]byte, error) {
	return renderAnthropic(ctx, nil, &sn.hdr, itemList{ptrs: sn.items}, blobs)
}

// AppendAnthropic appends RenderAnthropic's bytes to dst, so a server can
// render every request into a reused buffer: at 2,000 items a rendering
// is about 1.4 MB, and a fresh one per request was a large part of the
// render path's allocation and GC work.
func (sn Snapshot) AppendAnthropic(ctx context.Context, dst []byte, blobs BlobGetter) ([]byte, error) {
	return renderAnthropic(ctx, dst, &sn.hdr, itemList{ptrs: sn.items}, blobs)
}

// RenderOpenAI is RenderOpenAI of the snapshot's bundle.
func (sn Snapshot) RenderOpenAI(ctx context.Context, blobs BlobGetter, tc events.TokenCounter) ([]byte, error) {
	return renderOpenAI(ctx, &sn.hdr, itemList{ptrs: sn.items}, blobs)
}

// RenderText is RenderText of the snapshot's bundle.
func (sn Snapshot) RenderText(ctx context.Context, blobs BlobGetter, tc events.TokenCounter) ([]byte, error) {
	return renderText(ctx, &sn.hdr, itemList{ptrs: sn.items}, blobs, tc)
}

// itemList is a bundle's items, as values (a Bundle) or shared pointers
// (a Snapshot), for the renderers.
type itemList struct {
	vals []BundleItem
	ptrs []*BundleItem
}

func (l itemList) len() int {
	if l.ptrs != nil {
		return len(l.ptrs)
	}
	return len(l.vals)
}

func (l itemList) at(i int) *BundleItem {
	if l.ptrs != nil {
		return l.ptrs[i]
	}
	return &l.vals[i]
}

// snapshot is the items built by the last Snapshot: items[j] renders
// s.items[base+j]. Snapshots handed out share the array up to their length
// (capacity cut to it), so items are only ever appended past every handed
// out length; a changed item makes a new array (copy on write) holding a
// new BundleItem for it. BundleItems are never modified once built.
type snapshot struct {
	base  int
	items []*BundleItem
	gen   uint64 // last BundleItem generation given out
}

// snapshotLocked builds the snapshot: items dirtied since the last call
// (Session.dirty) are rebuilt, new items appended; a host compaction starts
// over. Callers hold s.mu at least for reading.
func (s *Session) snapshotLocked() Snapshot {
	h := Bundle{
		Tenant: s.tenant, Session: s.session, Provider: s.provider, Model: s.model,
		MaxTokens: DefaultMaxTokens, tokens: s.tokens, rc: s.rc,
	}
	h.HostCompacted = HostCompacted{Host: s.compactionHost, Items: s.hcItems, Tokens: s.hcTokens}
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	sn := &s.snap
	n := len(s.items) - s.compactedBefore
	var latest map[string]*markState
	build := func(j int) *BundleItem {
		if latest == nil {
			latest, _ = s.latestMarks()
		}
		sn.gen++
		bi := s.bundleItem(s.items[sn.base+j], latest, sn.gen)
		return &bi
	}
	if sn.base != s.compactedBefore {
		sn.base, sn.items = s.compactedBefore, nil
	}
	if len(s.dirty) > 0 {
		var items []*BundleItem
		for _, i := range s.dirty {
			s.items[i].dirty = false
			j := i - sn.base
			if j < 0 || j >= len(sn.items) {
				continue
			}
			if items == nil {
				items = make([]*BundleItem, len(sn.items), n+n/4+16)
				copy(items, sn.items)
			}
			items[j] = build(j)
		}
		s.dirty = s.dirty[:0]
		if items != nil {
			sn.items = items
		}
	}
	if sn.items == nil {
		sn.items = make([]*BundleItem, 0, n+n/4+16)
	}
	for j := len(sn.items); j < n; j++ {
		sn.items = append(sn.items, build(j))
	}
	return Snapshot{hdr: h, items: sn.items[:n:n]}
}

// bundleItem is item it as rendered, with generation gen.
func (s *Session) bundleItem(it *itemState, latest map[string]*markState, gen uint64) BundleItem {
	rare := it.rareOf()
	bi := BundleItem{
		Item: s.itemView(it, latest), Text: it.text, Signature: rare.signature,
		Input: it.input, Output: it.output, Error: rare.errInfo,
		slot: &it.slot, gen: gen,
	}
	switch {
	case it.HostPruned:
		bi.Placeholder = HostPlaceholder
	case bi.Pruned && isSpanMark(it.applied.mark.m):
		if bi.Spans = s.spansOf(it); bi.Spans == nil {
			bi.Pruned = false // the reference no longer applies: whole
			break
		}
		bi.spanSaved, bi.spanKey = it.applied.mark.m.TokensEstimated, spanKey(bi.Spans)
	case bi.Pruned:
		bi.Placeholder = s.placeholderFor(it)
		bi.Residue = it.applied.mark.m.Residue
	}
	return bi
}

// placeholderFor returns the placeholder of an item with an applied PRUNE,
// built once per placeholderKey. Callers hold s.mu at least for reading;
// the per-item cache is guarded by s.derived.mu.
func (s *Session) placeholderFor(it *itemState) string {
	key := placeholderKey{applied: it.applied, tool: it.Tool, input: -1, survIdx: -1, cwd: s.cwd}
	if c := s.byCall.at(it.CallID); c != nil && it.Kind == ItemToolResult {
		key.input = c.input
	}
	if sv := s.survivorOf(it); sv != nil {
		key.survIdx = sv.Index
		if sv.pruned() {
			key.survivor = sv.applied
			key.next = s.survivorOf(sv)
		}
	}
	s.derived.mu.Lock()
	defer s.derived.mu.Unlock()
	if c := it.ph; c != nil && c.key == key && c.ph != "" {
		return c.ph
	}
	if it.ph == nil {
		it.ph = new(cachedPlaceholder)
	}
	it.ph.ph, it.ph.key = s.buildPlaceholder(it), key
	return it.ph.ph
}

// buildPlaceholder builds the placeholder of an item with an applied PRUNE.
// Items are named by their handles (placeholder.Handle of Item.Index); the
// count is the one the certificate records (Mark.TokensEstimated).
func (s *Session) buildPlaceholder(it *itemState) string {
	m := it.applied.mark.m
	p := PlaceholderSpec{
		Item: placeholder.Handle(it.Index), Role: it.Role, Tool: it.Tool,
		Rung: m.Rung, Reason: m.Reason, Tokens: m.TokensEstimated, Residue: m.Residue,
	}
	switch it.Kind {
	case ItemToolUse:
		// A pruned input renders as an object carrying the residue's fields
		// beside the placeholder, so the placeholder does not repeat them.
		p.Part = partInput
		p.Residue = nil
	case ItemToolResult:
		p.Part = partOutput
	}
	p.Source = s.sourceOf(it)
	if sv := s.survivorOf(it); sv != nil {
		p.Survivor = placeholder.Handle(sv.Index)
		if sv.pruned() {
			// The copy this item deferred to was removed since: say so,
			// with why, rather than point at a placeholder as if it held
			// the content.
			sm := sv.applied.mark.m
			p.SurvivorRemoved = strings.TrimSpace(string(sm.Rung) + " " + string(sm.Reason))
			if next := s.survivorOf(sv); next != nil && next != it {
				p.SurvivorNext = placeholder.Handle(next.Index)
			}
		}
	} else if id := s.survivorID(it); id != "" {
		p.Survivor = id // not in this session's items: its id is all we have
	}
	return Placeholder(p)
}

// maxTokens returns the bundle's max_tokens or the default.
func (b *Bundle) maxTokens() int {
	if b.MaxTokens > 0 {
		return b.MaxTokens
	}
	return DefaultMaxTokens
}

// content returns what a rendered item shows: the placeholder when pruned
// or host-pruned, otherwise its text, input or output (fetched by content
// address unless inline). Pruned payloads are never fetched.
func (bi *BundleItem) content(ctx context.Context, blobs BlobGetter) (string, error) {
	if bi.Placeholder != "" && bi.Kind != ItemToolUse {
		return bi.Placeholder, nil
	}
	switch bi.Kind {
	case ItemText, ItemThinking:
		return bi.Text, nil
	case ItemToolUse:
		return string(bi.wireInput()), nil
	}
	out, err := bi.output(ctx, blobs)
	if err != nil {
		return "", err
	}
	r, _ := bi.RenderSpans(out)
	return r, nil
}

// output is a tool output's own bytes: inline, or fetched by content
// address ("" when it has neither).
func (bi *BundleItem) output(ctx context.Context, blobs BlobGetter) (string, error) {
	if bi.Output != nil {
		return *bi.Output, nil
	}
	if bi.Hash == "" {
		return "", nil
	}
	if blobs == nil {
		return "", fmt.Errorf("output of item %s (%s): no blob store", bi.ID, bi.Hash)
	}
	data, err := blobs.GetBlob(ctx, bi.Hash)
	if err != nil {
		return "", fmt.Errorf("output of item %s (%s): %w", bi.ID, bi.Hash, err)
	}
	return string(data), nil
}

// SpanSaved is what the item's applied span references keep out of the
// context, as their mark counted it (Mark.TokensEstimated); 0 without
// Spans.
func (bi *BundleItem) SpanSaved() int {
	if len(bi.Spans) == 0 {
		return 0
	}
	return bi.spanSaved
}

// RenderSpans is the rule for an output with span references: out with
// each of the item's runs (Spans) replaced by its reference line and true,
// or out whole and false when the item has none or they do not match out
// (placeholder.ApplySpans: a run elsewhere or past the end, or lines that
// do not hash to the run's hash). A rendering of the log and the proxy's
// splice into a client's own output both follow it, so what is sent is
// what the log renders.
func (bi *BundleItem) RenderSpans(out string) (string, bool) {
	if len(bi.Spans) == 0 {
		return out, false
	}
	r, err := placeholder.ApplySpans(out, bi.Spans)
	if err != nil {
		return out, false
	}
	return r, true
}

// renderedTokens is what the item costs in the rendered bundle: the stored
// count as priced (Item.PricedTokens), or the placeholder's count (counted
// once per distinct text). An input prune is counted as the rendered input
// object.
func (bi *BundleItem) renderedTokens(cache *tokenCache, tc events.TokenCounter) int {
	if len(bi.Spans) > 0 {
		// The certificate's count: the runs minus their reference lines.
		return max(bi.PricedTokens()-bi.spanSaved, 0)
	}
	if bi.Placeholder == "" {
		return bi.PricedTokens()
	}
	if bi.Pruned && bi.Kind == ItemToolUse {
		b, _ := marshalJSON(prunedInput(bi))
		return cache.count(string(b), tc)
	}
	return cache.count(bi.Placeholder, tc)
}

// prunedInputObject is a pruned tool input: still a valid object, carrying
// the placeholder and the residue's fields.
type prunedInputObject struct {
	Pruned       string `json:"prunesched_pruned"`
	Tool         string `json:"tool,omitempty"`
	ErrorType    string `json:"error_type,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
	Skeleton     string `json:"skeleton,omitempty"`
}

func prunedInput(bi *BundleItem) prunedInputObject {
	o := prunedInputObject{Pruned: bi.Placeholder}
	if r := bi.Residue; r != nil {
		o.Tool, o.ErrorType = r.Tool, r.ErrorType
		o.ErrorMessage = truncUTF8(r.ErrorMessage, residueMsgBytes)
		o.Skeleton = truncUTF8(r.Skeleton, residueSkelBytes)
	}
	return o
}

// wireInput is a tool_use input as sent: the recorded arguments, or the
// pruned object.
func (bi *BundleItem) wireInput() json.RawMessage {
	if bi.Pruned {
		b, _ := marshalJSON(prunedInput(bi))
		return b
	}
	if len(bi.Input) == 0 {
		return json.RawMessage("{}")
	}
	return bi.Input
}

// survivorID is the item a pruned item's mark names as holding its content
// (the recoverability survivor, else the first other item in the evidence),
// or "".
func (s *Session) survivorID(it *itemState) string {
	if it.applied == nil {
		return ""
	}
	m := it.applied.mark.m
	if r := m.Recoverability; r != nil && r.Survivor != "" {
		return r.Survivor
	}
	if m.Rung == events.RungNone {
		return ""
	}
	for _, e := range m.Evidence {
		if e.Item != "" && e.Item != it.ID {
			return e.Item
		}
	}
	return ""
}

// survivorOf is the item named by survivorID, when the session holds it.
func (s *Session) survivorOf(it *itemState) *itemState {
	id := s.survivorID(it)
	if id == "" {
		return nil
	}
	i, ok := s.itemIndex(id)
	if !ok {
		return nil
	}
	return s.items[i]
}

// RenderedText is the item's content as the bundle renders it: the
// placeholder of a pruned item, an output with its span references
// applied, a tool input as sent. The later-use signal compares it with
// Original.
func (bi *BundleItem) RenderedText(ctx context.Context, blobs BlobGetter) (string, error) {
	return bi.content(ctx, blobs)
}

// Original is the item's own content, whatever renders in its place: a
// message's text, a tool input's arguments, a tool output's bytes.
func (bi *BundleItem) Original(ctx context.Context, blobs BlobGetter) (string, error) {
	switch bi.Kind {
	case ItemText, ItemThinking:
		return bi.Text, nil
	case ItemToolUse:
		return string(bi.Input), nil
	}
	return bi.output(ctx, blobs)
}
