package projections

import (
	"encoding/json"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/placeholder"
)

// ContextItem is one item as the model's context tools see it (the
// proxy's answers to context_list, context_prune and context_recover):
// its handle's index, what it is, what it read, its size, its age and its
// state. Mark is the latest mark of the item (shared with the projection:
// read only).
type ContextItem struct {
	Index  int
	ID     string
	Kind   ItemKind
	Role   events.Role
	Tool   string
	Source string
	Tokens int
	// Age is the number of model requests recorded since the item entered.
	Age           int
	Pinned        bool
	Pruned        bool
	HostPruned    bool
	HostCompacted bool
	// Applied is the applied mark in effect (PRUNE or KEEP), if any; Mark
	// the latest mark, applied or pending.
	Applied *events.Mark
	Mark    *events.Mark
}

// ContextItems returns every item in log order as the context tools see
// it. Sources are named as placeholders name them.
func (s *Session) ContextItems() []ContextItem {
	s.mu.RLock()
	defer s.mu.RUnlock()
	latest, _ := s.latestMarks()
	out := make([]ContextItem, len(s.items))
	for i, it := range s.items {
		c := ContextItem{
			Index: it.Index, ID: it.ID, Kind: it.Kind, Role: it.Role, Tool: it.Tool,
			Source: s.sourceOf(it), Tokens: it.Tokens, Age: s.requests - int(it.req),
			Pinned: it.Pinned, Pruned: it.pruned(), HostPruned: it.HostPruned, HostCompacted: it.HostCompacted,
		}
		if it.applied != nil {
			c.Applied = it.applied.mark.m
		}
		if ms := latest[it.ID]; ms != nil {
			c.Mark = ms.m
		}
		out[i] = c
	}
	return out
}

// sourceOf names what an item's call read, as its placeholder would:
// the path, URL or short argument of the call's input, else the tool
// result's source identity. Caller holds mu.
func (s *Session) sourceOf(it *itemState) string {
	var src string
	switch it.Kind {
	case ItemToolUse:
		src = placeholder.Source(it.input, s.cwd)
	case ItemToolResult:
		if c := s.byCall.at(it.CallID); c != nil && c.input >= 0 {
			src = placeholder.Source(s.items[c.input].input, s.cwd)
		}
	}
	if source := it.rareOf().source; src == "" && source != nil {
		src = placeholder.Elide(placeholder.Rel(source.Path, s.cwd), placeholder.SourceBytes)
		if src == "" {
			src = placeholder.Elide(source.URL, placeholder.SourceBytes)
		}
	}
	return src
}

// MarkCausedBy returns the latest mark for item caused by the fact event
// cause (the verdict on an agent's removal request), and false when
// eligibility made none.
func (s *Session) MarkCausedBy(cause, item string) (events.Mark, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for i := len(s.markOrder) - 1; i >= 0; i-- {
		if m := s.markOrder[i].m; m.Cause == cause && m.Item == item {
			return *m, true
		}
	}
	return events.Mark{}, false
}

// Original is an item's payload as the log holds it: a message's text, a
// tool call's input, or a tool output inline (Output) or by content
// address (Hash, to fetch from the blob store).
type Original struct {
	ID     string
	Kind   ItemKind
	Text   string
	Input  json.RawMessage
	Output *string
	Hash   string
}

// OriginalOf returns the payload of the item at index, false when there
// is none.
func (s *Session) OriginalOf(index int) (Original, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if index < 0 || index >= len(s.items) {
		return Original{}, false
	}
	it := s.items[index]
	o := Original{ID: it.ID, Kind: it.Kind}
	switch it.Kind {
	case ItemText, ItemThinking:
		o.Text = it.text
	case ItemToolUse:
		o.Input = it.input
	case ItemToolResult:
		o.Output, o.Hash = it.output, it.Hash
	}
	return o, true
}

// IndexOf returns the index (the handle's number) of item id.
func (s *Session) IndexOf(id string) (int, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, ok := s.itemIndex(id)
	return i, ok
}
