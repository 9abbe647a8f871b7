package projections

import (
	"cmp"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/prunesched/prunesched/events"
)

// BlobGetter fetches a payload by content address.
type BlobGetter interface {
	GetBlob(ctx context.Context, hash string) ([]byte, error)
}

// ItemKind is the shape of an item in the rendered bundle.
type ItemKind string

// Item kinds.
const (
	// ItemText is a system, user or assistant text message.
	ItemText ItemKind = "text"
	// ItemThinking is an assistant thinking block (never rendered pruned).
	ItemThinking ItemKind = "thinking"
	// ItemToolUse is a tool call's input.
	ItemToolUse ItemKind = "tool_use"
	// ItemToolResult is a tool call's output.
	ItemToolResult ItemKind = "tool_result"
)

// Mark parts, as in events.Mark.Part.
const (
	partInput  = "input"
	partOutput = "output"
)

// Session is the projection of one session, fed every event (facts, marks,
// applications) in log order. It is safe for concurrent use: one writer
// (Observe) and any number of readers.
type Session struct {
	mu      sync.RWMutex
	tenant  string
	session string

	pos int // events observed (log position of the next one)
	// seen holds the event ids observed, each referring to where its id
	// is kept (see eventRef): the item a fact brought, the mark, or
	// otherIDs for the other events.
	seen     idxTable
	otherIDs []string

	items []*itemState
	// byItem holds the item ids: an id's reference is its item's index.
	byItem idxTable
	byCall strTable[*callRef] // call id -> its input and output items

	markOrder []*markState // marks in log order

	// inputMarks holds the items named by part "input" marks: the only
	// marks whose ledger key changes when an item or call is seen later.
	// resolveEpoch counts such changes (see latestMarks).
	inputMarks   map[string]struct{}
	resolveEpoch int

	compactedBefore int    // items[:compactedBefore] were removed by the host
	compactionHost  string // host of the last HostCompaction

	provider, model string
	// requests counts the model requests observed (items record it when
	// they enter: their age in requests).
	requests int
	cwd      string // the session's working directory (placeholders name paths relative to it)

	// format, agent and title are from SessionStarted; started is the
	// earliest event time observed.
	format, agent, title string
	// firstUser is the first line of the first user message (TitleLine):
	// the title of a session whose start names none.
	firstUser string
	started   time.Time

	dangling   int // application entries naming an unknown mark id
	unresolved int // applied marks or restores naming an unknown item
	stale      int // applied PRUNE marks ignored (older than a restore, or a thinking block)
	duplicates int // fact events repeating an item id already seen

	tokens *tokenCache

	// hcItems and hcTokens count items[:compactedBefore] (set at the host
	// compaction).
	hcItems, hcTokens int

	// dirty lists the items whose rendered view may have changed since the
	// last snapshot (each once: itemState.dirty; a host compaction starts
	// the snapshot over instead). refs maps an item id to the items whose
	// applied mark names it as the surviving copy: their placeholders
	// depend on its state. Observe writes both under mu; snapshotLocked
	// consumes dirty under mu (read) and snapMu.
	dirty []int
	refs  map[string][]int

	// snapMu guards snap, the bundle items built by the last snapshot,
	// shared with the next for the items not dirtied since (see
	// snapshotLocked).
	snapMu sync.Mutex
	snap   snapshot

	// rc accounts the rendered fragments cached for this session's items.
	rc *renderCache

	// derived caches what readers recompute from the state above, valid
	// while pos (bumped by every observed event) has not moved. Readers
	// hold mu for reading only, so the cache has its own lock.
	derived derivedCache
}

// derivedCache is the read side's cache (see Session.derived).
type derivedCache struct {
	mu          sync.Mutex
	latestPos   int // pos the latest marks were computed at; -1 none
	latest      map[string]*markState
	latestOrder []string
	// latestMarks is how many of markOrder latest holds, latestEpoch the
	// resolveEpoch it was computed at: while the epoch holds, later marks
	// are folded in without recomputing.
	latestMarks int
	latestEpoch int
}

type callRef struct {
	input, output int // indices in items, -1 when not seen
	// earlier holds the call's earlier result items when several share
	// the call id (their placeholders quote the input too).
	earlier []int
}

// itemState is one item with its payload and its rendering state. It
// holds Item's fields but for the three a view computes (Pruned, Applied,
// LatestMark; see itemView), so that a rebuild allocates and the GC scans
// less per item (a projection holds one per fact; TestItemViewFields
// keeps the two in step). Positions and counts of events fit in an int32:
// a session's events are fewer than 2^30 (idxTable's references).
type itemState struct {
	ID, Event   string
	Kind        ItemKind
	Role        events.Role
	Tool        string
	CallID      string
	Hash        string
	Index       int
	Tokens      int
	TokensExact int

	text   string
	input  json.RawMessage
	output *string
	// rare holds what few items have (nil for the others).
	rare    *itemRare
	applied *applied // last applied mark (PRUNE or KEEP) in effect

	// ph caches the placeholder last built for the item (see
	// placeholderFor): only items pruned and rendered have one, so it
	// lives apart from the item state.
	ph *cachedPlaceholder

	// slot holds the item's rendered fragments (see render_cache.go).
	slot itemSlot

	restoreAt int32 // log position of the last restore, -1 when none
	req       int32 // model requests observed before the item entered

	IsError, Meta, Pinned, HostPruned, HostCompacted, Restored bool

	// dirty is true while the item is listed in Session.dirty.
	dirty bool
}

// itemRare is the part of an item's payload that few items have: a
// thinking block's signature, a failed call's error, a result's source.
type itemRare struct {
	signature string
	errInfo   *events.ToolError
	source    *events.SourceIdentity
}

// rareOf returns it's rare part, the zero value when it has none.
func (it *itemState) rareOf() itemRare {
	if it.rare == nil {
		return itemRare{}
	}
	return *it.rare
}

// setRare sets it's rare part, allocated only when not all zero (a
// copy: &r would move r to the heap on every call).
func (it *itemState) setRare(r itemRare) {
	if r != (itemRare{}) {
		it.rare = new(itemRare)
		*it.rare = r
	}
}

// PricedTokens is the count the economics price the item at, as
// Item.PricedTokens.
func (it *itemState) PricedTokens() int { return events.PricedTokens(it.Tokens, it.TokensExact) }

// cachedPlaceholder is an item's placeholder with the key it was built
// for.
type cachedPlaceholder struct {
	key placeholderKey
	ph  string
}

// placeholderKey is what an item's placeholder depends on that can change
// after the item is created: the applied mark, the tool name (a result
// seen before its call learns it later), the call's input item, and the
// render state of the surviving copy it names.
type placeholderKey struct {
	applied *applied
	tool    string
	input   int
	// survivor is the applied mark of the item named as the surviving
	// copy: when that item is pruned later, the placeholder must say so.
	survivor *applied
	// next is the item the removed survivor deferred to, once it exists
	// (the placeholder names it).
	next *itemState
	// survIdx is the survivor's position (-1 while it is not an item yet:
	// the placeholder names it by id until then, by handle after), and cwd
	// the directory paths are shown relative to.
	survIdx int
	cwd     string
}

// applied links an applied mark with the application that applied it.
type applied struct {
	mark *markState
	app  *appState
}

type markState struct {
	id   string
	pos  int
	time time.Time
	m    *events.Mark
	app  *appState // first application that applied it
}

type appState struct {
	id   string
	pos  int
	time time.Time
	a    *events.Application
}

// NewSession returns an empty projection of one session. An empty tenant
// means events.DefaultTenant.
func NewSession(tenant, session string) *Session {
	if tenant == "" {
		tenant = events.DefaultTenant
	}
	s := &Session{
		tenant:  tenant,
		session: session,
		refs:    map[string][]int{},

		inputMarks: map[string]struct{}{},
		tokens:     newTokenCache(),
		rc:         newRenderCache(NewRenderBudget(DefaultRenderCacheSessionBytes, DefaultRenderCacheSessionBytes)),
		derived:    derivedCache{latestPos: -1},
	}
	s.rc.release(s)
	return s
}

// SetRenderBudget makes the session cache its rendered fragments within b,
// shared with other sessions (a projection worker's). Call it before the
// session is rendered.
func (s *Session) SetRenderBudget(b *RenderBudget) {
	s.rc = newRenderCache(b)
	s.rc.release(s)
}

// Tenant returns the session's tenant.
func (s *Session) Tenant() string { return s.tenant }

// ID returns the session id.
func (s *Session) ID() string { return s.session }

// Observe feeds one event. It is idempotent on the event id: a redelivered
// event is ignored. Events of another tenant or session are ignored too.
func (s *Session) Observe(ev events.Event) {
	if ev.Session != s.session || ev.TenantOrDefault() != s.tenant || ev.Data == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// One look-up: the spot it found takes the id once observe has put
	// the event where its id is kept (nothing enters seen meanwhile).
	r, spot := s.seen.probe(ev.ID, s.eventID)
	if r >= 0 {
		return
	}
	pos := s.pos
	s.pos++
	if !ev.Time.IsZero() && (s.started.IsZero() || ev.Time.Before(s.started)) {
		s.started = ev.Time
	}
	r = s.observe(ev, pos)
	if r < 0 {
		r = eventRef(len(s.otherIDs), refOther)
		s.otherIDs = append(s.otherIDs, ev.ID)
	}
	s.seen.add(spot, r)
}

// An event's reference in Session.seen: the position of what keeps its
// id (shifted left by 2) and which list that is.
const (
	refItem  = iota // s.items: a fact that brought an item (Item.Event)
	refMark         // s.markOrder
	refOther        // s.otherIDs
)

// eventRef returns the seen reference of position i in list kind.
func eventRef(i, kind int) int { return i<<2 | kind }

// eventID returns the id of the event with seen reference r.
func (s *Session) eventID(r int) string {
	switch i := r >> 2; r & 3 {
	case refItem:
		return s.items[i].Event
	case refMark:
		return s.markOrder[i].id
	default:
		return s.otherIDs[i]
	}
}

// itemID returns the id of item i (the key of its byItem reference).
func (s *Session) itemID(i int) string { return s.items[i].ID }

// observe applies an event not observed before, at log position pos, and
// returns its seen reference when an item or mark keeps its id, else -1.
func (s *Session) observe(ev events.Event, pos int) int {
	n := len(s.items)
	switch p := ev.Data.(type) {
	case *events.SessionStarted:
		s.format = p.Format
		if p.Agent != "" {
			s.agent = p.Agent
		}
		if p.Title != "" {
			s.title = p.Title
		}
		if p.CWD != "" {
			s.cwd = p.CWD
		}
		if p.Provider != "" {
			s.provider = p.Provider
		}
		if p.Model != "" {
			s.model = p.Model
		}
	case *events.ModelRequest:
		s.requests++
		if p.Provider != "" {
			s.provider = p.Provider
		}
		if p.Model != "" {
			s.model = p.Model
		}
	case *events.Message:
		kind := ItemText
		if p.Kind == events.KindThinking {
			kind = ItemThinking
		}
		it := s.newItem(ev, p.Item, kind, p.Role)
		if it == nil {
			return -1
		}
		it.Tokens, it.TokensExact = p.Tokens, p.TokensExact
		it.Meta = p.Meta
		it.text = p.Text
		if s.firstUser == "" && p.Role == events.RoleUser && !p.Meta {
			s.firstUser = TitleLine(p.Text)
		}
		it.setRare(itemRare{signature: p.Signature})
	case *events.ToolCall:
		it := s.newItem(ev, p.Item, ItemToolUse, events.RoleAssistant)
		if it == nil {
			return -1
		}
		it.Tool = p.Tool
		it.CallID = p.CallID
		it.Tokens, it.TokensExact = p.InputTokens, p.InputTokensExact
		it.input = p.Input
		c := s.call(p.CallID)
		// Marks on the result's input now resolve to this item, not to an
		// earlier call item of the same call id.
		s.touch(c.input)
		c.input = it.Index
		// A result seen before its call takes the tool name from it (and
		// its placeholder now quotes the arguments).
		if r := c.output; r >= 0 {
			if s.items[r].Tool == "" {
				s.items[r].Tool = p.Tool
			}
			s.touch(r)
		}
		for _, r := range c.earlier {
			s.touch(r)
		}
		// Part "input" marks on the call's results now file under this item.
		if c.output >= 0 {
			s.resolved(s.items[c.output].ID)
		}
		for _, r := range c.earlier {
			s.resolved(s.items[r].ID)
		}
	case *events.ToolResult:
		it := s.newItem(ev, p.Item, ItemToolResult, events.RoleUser)
		if it == nil {
			return -1
		}
		it.Tool = p.Tool
		it.CallID = p.CallID
		it.IsError = p.IsError
		it.HostPruned = p.HostPruned
		it.setRare(itemRare{errInfo: p.Error, source: p.Source})
		it.output = p.Output
		if p.OutputRef != nil {
			it.Tokens, it.TokensExact = p.OutputRef.Tokens, p.OutputRef.TokensExact
			it.Hash = p.OutputRef.Hash
		}
		c := s.call(p.CallID)
		if c.output >= 0 {
			c.earlier = append(c.earlier, c.output)
		}
		c.output = it.Index
		if it.Tool == "" && c.input >= 0 {
			it.Tool = s.items[c.input].Tool
		}
		// Marks on this result's input made before it was seen now
		// resolve to the call's input item.
		s.touch(c.input)
	case *events.HostCompaction:
		s.compactedBefore = len(s.items)
		s.compactionHost = p.Host
		s.hcItems, s.hcTokens = 0, 0
		for _, it := range s.items {
			it.HostCompacted = true
			s.hcItems++
			s.hcTokens += it.PricedTokens()
		}
	case *events.Pin:
		if i, ok := s.itemIndex(p.Item); ok {
			s.items[i].Pinned = true
			s.touch(i)
		}
	case *events.Unpin:
		if i, ok := s.itemIndex(p.Item); ok {
			s.items[i].Pinned = false
			s.touch(i)
		}
	case *events.Restore:
		i, ok := s.itemIndex(p.Item)
		if !ok {
			s.unresolved++
			return -1
		}
		it := s.items[i]
		it.applied = nil
		it.restoreAt = int32(pos)
		it.Restored = true
		s.touchApplied(it)
	case *events.Mark:
		ms := &markState{id: ev.ID, pos: pos, time: ev.Time, m: p}
		s.markOrder = append(s.markOrder, ms)
		if p.Part == partInput {
			s.inputMarks[p.Item] = struct{}{}
		}
		s.touchMarked(p)
		return eventRef(len(s.markOrder)-1, refMark)
	case *events.Application:
		s.apply(&appState{id: ev.ID, pos: pos, time: ev.Time, a: p})
	}
	if len(s.items) > n { // a fact brought item n
		return eventRef(n, refItem)
	}
	return -1
}

// newItem appends an item, or returns nil when its id was already seen.
func (s *Session) newItem(ev events.Event, id string, kind ItemKind, role events.Role) *itemState {
	if _, added := s.byItem.insert(id, len(s.items), s.itemID); !added {
		s.duplicates++
		return nil
	}
	// One allocation per item, in the 256-byte size class
	// (TestItemStateSize), not slabs of 33: the collector marks small
	// objects a span at a time, and a live rebuild spent less in GC
	// without the 8 KiB slabs (docs/performance.md, ninth round).
	it := &itemState{
		Index: len(s.items), ID: id, Event: ev.ID, Kind: kind, Role: role,
		restoreAt: -1,
		req:       int32(s.requests),
	}
	s.items = append(s.items, it)
	s.resolved(id)
	// Placeholders naming this item as the survivor name it by handle only
	// once it exists, and so do those saying "since removed, see <it>".
	for _, j := range s.refs[id] {
		s.touch(j)
		s.touchDependents(s.items[j].ID)
	}
	return it
}

// resolved notes that part "input" marks naming item id may file under
// another key from now on.
func (s *Session) resolved(id string) {
	if _, ok := s.inputMarks[id]; ok {
		s.resolveEpoch++
	}
}

// touch lists item i (ignored when negative) as dirty: its rendered view
// may have changed since the last snapshot.
func (s *Session) touch(i int) {
	if i < 0 {
		return
	}
	it := s.items[i]
	if it.dirty {
		return
	}
	it.dirty = true
	s.dirty = append(s.dirty, i)
}

// touchDependents dirties the items whose placeholder names id as the
// surviving copy.
func (s *Session) touchDependents(id string) {
	for _, j := range s.refs[id] {
		s.touch(j)
	}
}

// touchApplied dirties an item whose applied mark changed, and the items
// whose placeholder depends on its state.
func (s *Session) touchApplied(it *itemState) {
	s.touch(it.Index)
	s.touchDependents(it.ID)
}

// touchMarked dirties the item whose latest mark m may now be (as
// latestMarks files it).
func (s *Session) touchMarked(m *events.Mark) {
	if i := s.target(m); i >= 0 {
		s.touch(i)
		return
	}
	if i, ok := s.itemIndex(s.targetKey(m)); ok {
		s.touch(i)
	}
}

// itemIndex returns the index of item id in s.items, and whether it is
// there.
func (s *Session) itemIndex(id string) (int, bool) {
	i := s.byItem.find(id, s.itemID)
	return i, i >= 0
}

func (s *Session) call(id string) *callRef {
	i, added := s.byCall.insert(id, nil)
	c := s.byCall.val(i)
	if added {
		*c = &callRef{input: -1, output: -1}
	}
	return *c
}

// apply puts an application's marks into effect. Entries naming an unknown
// mark are ignored and counted as dangling; Application.Items is redundant
// with the marks and not consulted.
func (s *Session) apply(app *appState) {
	for _, id := range app.a.Marks {
		ms := s.markNamed(id)
		if ms == nil {
			s.dangling++
			continue
		}
		if ms.app == nil {
			ms.app = app
			// The item's latest mark may now show as applied.
			s.touchMarked(ms.m)
		}
		i := s.target(ms.m)
		if i < 0 {
			s.unresolved++
			continue
		}
		it := s.items[i]
		switch ms.m.Decision {
		case events.Prune:
			if ms.pos < int(it.restoreAt) || it.Kind == ItemThinking {
				s.stale++
				continue
			}
			it.applied = &applied{mark: ms, app: app}
		case events.Keep:
			it.applied = &applied{mark: ms, app: app}
		}
		s.touchApplied(it)
		if id := s.survivorID(it); id != "" {
			if r := s.refs[id]; len(r) == 0 || r[len(r)-1] != i {
				s.refs[id] = append(r, i)
			}
		}
	}
}

// markNamed returns the state of the mark with event id id, nil when no
// mark observed has it.
func (s *Session) markNamed(id string) *markState {
	if r := s.seen.find(id, s.eventID); r >= 0 && r&3 == refMark {
		return s.markOrder[r>>2]
	}
	return nil
}

// target resolves the item a mark acts on: a mark on a tool result with
// part "input" acts on the call's input item; a mark naming an input item
// acts on it whatever its part says. It returns -1 when unknown.
func (s *Session) target(m *events.Mark) int {
	i, ok := s.itemIndex(m.Item)
	if !ok {
		return -1
	}
	it := s.items[i]
	if it.Kind == ItemToolResult && m.Part == partInput {
		if c := s.byCall.at(it.CallID); c != nil && c.input >= 0 {
			return c.input
		}
		return -1
	}
	return i
}

// targetKey is the item id a mark is filed under in the ledger: the
// resolved item, or the mark's own item (and part) when unknown.
func (s *Session) targetKey(m *events.Mark) string {
	if i := s.target(m); i >= 0 {
		return s.items[i].ID
	}
	if m.Part == partInput {
		return m.Item + "#input"
	}
	return m.Item
}

// latestMarks returns the latest mark per target key, and the keys in the
// order of first appearance. They are computed once per state of the
// session (caller holds mu, at least for reading) and shared: callers must
// not modify them.
func (s *Session) latestMarks() (map[string]*markState, []string) {
	d := &s.derived
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.latestPos == s.pos:
	case d.latest != nil && d.latestEpoch == s.resolveEpoch:
		// Every mark folded in so far files under the same key as then:
		// fold in the new ones. Readers holding the map or the order hold
		// s.mu for reading, so s.pos cannot have moved under them.
		for _, ms := range s.markOrder[d.latestMarks:] {
			k := s.targetKey(ms.m)
			if _, ok := d.latest[k]; !ok {
				d.latestOrder = append(d.latestOrder, k)
			}
			d.latest[k] = ms
		}
	default:
		d.latest, d.latestOrder = s.computeLatestMarks()
	}
	d.latestPos, d.latestMarks, d.latestEpoch = s.pos, len(s.markOrder), s.resolveEpoch
	return d.latest, d.latestOrder
}

func (s *Session) computeLatestMarks() (map[string]*markState, []string) {
	latest := make(map[string]*markState, len(s.markOrder))
	var order []string
	for _, ms := range s.markOrder {
		k := s.targetKey(ms.m)
		if _, ok := latest[k]; !ok {
			order = append(order, k)
		}
		latest[k] = ms
	}
	return latest, order
}

// pruned reports whether the item renders as our placeholder.
func (it *itemState) pruned() bool {
	return it.applied != nil && it.applied.mark.m.Decision == events.Prune && !it.HostCompacted && !it.HostPruned
}

// SessionInfo describes a session for listings: where it came from, when it
// started, its size and what was pruned.
type SessionInfo struct {
	Session string `json:"session"`
	// Format, Agent and Title are from the session_started event (Agent
	// defaults to the format; Title to the first line of the first user
	// message, TitleLine).
	Format  string    `json:"format,omitempty"`
	Agent   string    `json:"agent,omitempty"`
	Title   string    `json:"title,omitempty"`
	Started time.Time `json:"started"`
	Items   int       `json:"items"`
	// Prunes counts the latest PRUNE marks, Applied those an application
	// put into effect.
	Prunes  int `json:"prunes"`
	Applied int `json:"applied"`
}

// Info returns the session's SessionInfo.
func (s *Session) Info() SessionInfo {
	ds := s.Decisions()
	s.mu.RLock()
	defer s.mu.RUnlock()
	in := SessionInfo{Session: s.session, Format: s.format, Agent: s.agent, Title: cmp.Or(s.title, s.firstUser), Started: s.started, Items: len(s.items)}
	if in.Agent == "" {
		in.Agent = s.format
	}
	for _, d := range ds {
		if d.Decision == events.Prune {
			in.Prunes++
			if d.Applied {
				in.Applied++
			}
		}
	}
	return in
}
