package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/placeholder"
	"github.com/prunesched/prunesched/projections"
)

// Item is an original item as the log holds it, whatever the bundle shows.
type Item struct {
	Session string          `json:"session"`
	Item    string          `json:"item"`
	Event   string          `json:"event"`
	Seq     uint64          `json:"seq"`
	Time    time.Time       `json:"time"`
	Type    events.Type     `json:"type"`
	Role    events.Role     `json:"role,omitempty"`
	Tool    string          `json:"tool,omitempty"`
	CallID  string          `json:"call_id,omitempty"`
	IsError bool            `json:"is_error,omitempty"`
	Hash    string          `json:"hash,omitempty"`
	Tokens  int             `json:"tokens"`
	Input   json.RawMessage `json:"input,omitempty"`
	// Content is the item's text: message text or tool output.
	Content string `json:"content,omitempty"`
	// ContentBase64 replaces Content when the content is not valid UTF-8
	// (a JSON string cannot carry it unchanged): the original bytes.
	ContentBase64 []byte `json:"content_base64,omitempty"`
}

// findItem reads the session from the log and returns the event holding
// item.
func (s *Server) findItem(ctx context.Context, tenant, session, item string) (events.Event, bool, error) {
	evs, err := s.cfg.Store.ReadSession(ctx, tenant, session)
	if err != nil {
		return events.Event{}, false, fmt.Errorf("read session %s/%s: %w", tenant, session, err)
	}
	if len(evs) == 0 {
		return events.Event{}, false, fmt.Errorf("session %s/%s: %w", tenant, session, errNotFound)
	}
	for _, e := range evs {
		switch p := e.Data.(type) {
		case *events.Message:
			if p.Item == item {
				return e, true, nil
			}
		case *events.ToolCall:
			if p.Item == item {
				return e, true, nil
			}
		case *events.ToolResult:
			if p.Item == item {
				return e, true, nil
			}
		}
	}
	return events.Event{}, false, fmt.Errorf("item %s in session %s/%s: %w", item, tenant, session, errNotFound)
}

func (s *Server) item(w http.ResponseWriter, r *http.Request) {
	tenant, session, err := sessionOf(r)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	id := r.PathValue("item")
	if n, ok := placeholder.ParseHandle(id); ok {
		// A placeholder's recovery handle: the item at that position in
		// the session, as the projection that rendered it numbers them.
		if !s.waitSession(r.Context(), w, tenant, session) {
			return
		}
		found := false
		s.cfg.Pipeline.Projection.View(tenant, session, func(p *projections.Session) {
			if items := p.Items(); n < len(items) {
				id, found = items[n].ID, true
			}
		})
		if !found {
			writeError(w, http.StatusNotFound, fmt.Errorf("item %s in session %s/%s: %w", id, tenant, session, errNotFound))
			return
		}
	}
	ev, _, err := s.findItem(r.Context(), tenant, session, id)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	it := Item{Session: session, Item: id, Event: ev.ID, Seq: ev.Seq, Time: ev.Time, Type: ev.Type}
	switch p := ev.Data.(type) {
	case *events.Message:
		it.Role, it.Content, it.Tokens = p.Role, p.Text, p.Tokens
	case *events.ToolCall:
		it.Tool, it.CallID, it.Input, it.Tokens = p.Tool, p.CallID, p.Input, p.InputTokens
	case *events.ToolResult:
		it.Tool, it.CallID, it.IsError = p.Tool, p.CallID, p.IsError
		switch {
		case p.OutputRef != nil:
			it.Hash, it.Tokens = p.OutputRef.Hash, p.OutputRef.Tokens
			b, err := s.cfg.Store.GetBlob(r.Context(), p.OutputRef.Hash)
			if err != nil {
				writeError(w, http.StatusInternalServerError, fmt.Errorf("item %s: fetch output %s: %w", id, p.OutputRef.Hash, err))
				return
			}
			it.Content = string(b)
		case p.Output != nil:
			it.Content = *p.Output
		}
	}
	if r.URL.Query().Get("format") == "raw" {
		raw := []byte(it.Content)
		if it.Input != nil {
			raw = it.Input
		}
		ct := "text/plain; charset=utf-8"
		if !utf8.Valid(raw) {
			ct = "application/octet-stream"
		}
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write(raw)
		return
	}
	if !utf8.ValidString(it.Content) {
		it.ContentBase64, it.Content = []byte(it.Content), ""
	}
	writeJSON(w, http.StatusOK, it)
}
