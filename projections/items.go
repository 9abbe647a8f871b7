package projections

import "github.com/prunesched/prunesched/events"

// Item is one unit of context with its state in the projection.
type Item struct {
	// Index is the item's position among all the session's items
	// (host-compacted ones included), stable across rebuilds.
	Index int `json:"index"`
	// ID is the item id the source gave it.
	ID string `json:"id"`
	// Event is the id of the fact event holding the original.
	Event  string      `json:"event"`
	Kind   ItemKind    `json:"kind"`
	Role   events.Role `json:"role"`
	Tool   string      `json:"tool,omitempty"`
	CallID string      `json:"call_id,omitempty"`
	// Tokens is the stored token count of the original payload: the
	// count decisions and placeholders use.
	Tokens int `json:"tokens"`
	// TokensExact is the tokenizer's count when Tokens is an estimate
	// (the fact's exact count, see events.Message.TokensExact).
	TokensExact int `json:"tokens_exact,omitempty"`
	// Hash is the content address of a tool output.
	Hash    string `json:"hash,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
	Meta    bool   `json:"meta,omitempty"`
	Pinned  bool   `json:"pinned,omitempty"`
	// Pruned is true when the item renders as a prunesched placeholder: an
	// applied PRUNE is in effect and the host has not removed it itself.
	Pruned bool `json:"pruned"`
	// HostPruned is true when the host cleared the output itself.
	HostPruned bool `json:"host_pruned"`
	// HostCompacted is true when the item precedes the last host compaction
	// and is not rendered at all.
	HostCompacted bool `json:"host_compacted"`
	// Restored is true when a Restore brought the item back.
	Restored bool `json:"restored,omitempty"`
	// Applied is the applied mark in effect (PRUNE or KEEP), if any.
	Applied *AppliedRef `json:"applied,omitempty"`
	// LatestMark is the latest mark for the item, applied or pending.
	LatestMark *MarkRef `json:"latest_mark,omitempty"`
}

// PricedTokens is the count the economics price the item at
// (events.PricedTokens): ledgers, savings, the inspector's numbers.
func (it *Item) PricedTokens() int { return events.PricedTokens(it.Tokens, it.TokensExact) }

// MarkRef identifies a mark and its outcome.
type MarkRef struct {
	Mark     string          `json:"mark"`
	Decision events.Decision `json:"decision"`
	Rung     events.Rung     `json:"rung,omitempty"`
	Reason   events.Reason   `json:"reason"`
	Part     string          `json:"part,omitempty"`
	// Applied is true when an application has applied this mark.
	Applied bool `json:"applied"`
}

// AppliedRef is a mark together with the application that applied it.
type AppliedRef struct {
	MarkRef
	Application string         `json:"application"`
	Request     string         `json:"request"`
	Trigger     events.Trigger `json:"trigger"`
}

func markRef(ms *markState) *MarkRef {
	return &MarkRef{
		Mark: ms.id, Decision: ms.m.Decision, Rung: ms.m.Rung, Reason: ms.m.Reason,
		Part: ms.m.Part, Applied: ms.app != nil,
	}
}

func appliedRef(a *applied) *AppliedRef {
	if a == nil {
		return nil
	}
	return &AppliedRef{
		MarkRef: *markRef(a.mark), Application: a.app.id,
		Request: a.app.a.Request, Trigger: a.app.a.Trigger,
	}
}

// Items returns every item in log order with its state.
func (s *Session) Items() []Item {
	s.mu.RLock()
	defer s.mu.RUnlock()
	latest, _ := s.latestMarks()
	out := make([]Item, len(s.items))
	for i, it := range s.items {
		out[i] = s.itemView(it, latest)
	}
	return out
}

func (s *Session) itemView(it *itemState, latest map[string]*markState) Item {
	v := Item{
		Index: it.Index, ID: it.ID, Event: it.Event, Kind: it.Kind, Role: it.Role,
		Tool: it.Tool, CallID: it.CallID, Tokens: it.Tokens, TokensExact: it.TokensExact,
		Hash: it.Hash, IsError: it.IsError, Meta: it.Meta, Pinned: it.Pinned,
		HostPruned: it.HostPruned, HostCompacted: it.HostCompacted, Restored: it.Restored,
	}
	v.Pruned = it.pruned()
	v.Applied = appliedRef(it.applied)
	if ms := latest[it.ID]; ms != nil {
		v.LatestMark = markRef(ms)
	}
	return v
}
