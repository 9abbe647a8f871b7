package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/httplimit"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// AppendResult answers POST /v1/events.
type AppendResult struct {
	Appended int    `json:"appended"`
	LastSeq  uint64 `json:"last_seq"`
}

// decodeBody reads events from a JSONL body, or a JSON array of events.
// Lines and array elements are decoded where they lie in the body, and
// either over limit (Config.LineLimit) is refused (413, decodeStatus)
// before it is decoded.
func decodeBody(body []byte, limit events.LineLimit) ([]events.Event, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return limit.DecodeJSONArray(trimmed)
	}
	return limit.DecodeJSONLBytes(body, "request body")
}

// decodeStatus is the status of a body that did not decode: 413 for a
// line or array element over the line limit, else 400.
func decodeStatus(err error) int {
	var tl *events.LineTooLongError
	if errors.As(err, &tl) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// readBody reads the request body under the server's in-flight body
// budget. The caller releases the body once done with its bytes. On error
// it has answered: 413 naming the limit, 503 (budget full, Retry-After),
// 408 (body not received before the read timeout) or 400.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (*httplimit.Body, bool) {
	b, err := httplimit.ReadBody(w, r, s.cfg.Bodies, s.cfg.MaxBodyBytes)
	if err != nil {
		code := httplimit.Status(err)
		switch code {
		case http.StatusServiceUnavailable:
			w.Header().Set("Retry-After", "1")
		case http.StatusRequestTimeout:
			w.Header().Set("Connection", "close")
		}
		writeError(w, code, err)
		return nil, false
	}
	return b, true
}

// scopeTenant gives events without a tenant the request's tenant and
// refuses events naming another one.
func scopeTenant(evs []events.Event, tenant string) error {
	for i := range evs {
		switch evs[i].Tenant {
		case "":
			if tenant != events.DefaultTenant {
				evs[i].Tenant = tenant
			}
		case tenant:
		default:
			return fmt.Errorf("event %s: tenant %q differs from the request's tenant %q", evs[i].ID, evs[i].Tenant, tenant)
		}
	}
	return nil
}

func (s *Server) appendEvents(w http.ResponseWriter, r *http.Request) {
	tenant, err := tenantOf(r)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	defer body.Release()
	evs, err := decodeBody(body.Bytes, s.cfg.LineLimit)
	if err != nil {
		writeError(w, decodeStatus(err), err)
		return
	}
	for _, e := range evs {
		if !e.IsFact() {
			writeError(w, http.StatusBadRequest, fmt.Errorf("event %s: %s events are prunesched's own; append facts only", e.ID, e.Type))
			return
		}
	}
	if err := scopeTenant(evs, tenant); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	stored, err := s.cfg.Store.Append(r.Context(), evs)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	res := AppendResult{Appended: len(stored)}
	for _, e := range stored {
		res.LastSeq = max(res.LastSeq, e.Seq)
	}
	writeJSON(w, http.StatusOK, res)
}

// ImportedSession describes one session created by POST /v1/import.
type ImportedSession struct {
	Session  string `json:"session"`
	Format   string `json:"format"`
	SourceID string `json:"source_id,omitempty"`
	Events   int    `json:"events"`
}

func (s *Server) importTrace(w http.ResponseWriter, r *http.Request) {
	tenant, err := tenantOf(r)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	defer body.Release()
	name := r.URL.Query().Get("name")
	if name == "" {
		name = "upload"
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		format = "auto"
	}
	sessions, err := importers.ImportReader(bytes.NewReader(body.Bytes), name, format)
	if err != nil {
		writeError(w, decodeStatus(err), err)
		return
	}
	var out []ImportedSession
	for _, sess := range sessions {
		if err := scopeTenant(sess.Events, tenant); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		if _, err := s.cfg.Store.Append(r.Context(), sess.Events); err != nil {
			writeError(w, statusOf(err), fmt.Errorf("import %s session %s: %w", name, sessionName(sess), err))
			return
		}
		out = append(out, ImportedSession{Session: sessionName(sess), Format: sess.Format, SourceID: sess.SourceID, Events: len(sess.Events)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

func sessionName(s importers.Session) string {
	if len(s.Events) == 0 {
		return ""
	}
	return s.Events[0].Session
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	tenant, err := tenantOf(r)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	refs, err := s.cfg.Store.Sessions(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	out := []string{}
	for _, ref := range refs {
		if ref.Tenant == tenant {
			out = append(out, ref.Session)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tenant": tenant, "sessions": out})
}

// caughtUp wraps a handler of one session: it validates the tenant and
// session, waits until the pipeline has caught up with the session (read
// your writes) and answers 404 for a session the projection does not know.
func (s *Server) caughtUp(h func(w http.ResponseWriter, r *http.Request, tenant, session string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant, session, err := sessionOf(r)
		if err != nil {
			writeError(w, statusOf(err), err)
			return
		}
		if !s.waitSession(r.Context(), w, tenant, session) {
			return
		}
		h(w, r, tenant, session)
	}
}

// waitSession catches the pipeline up with the session and reports whether
// the projection knows it.
func (s *Server) waitSession(ctx context.Context, w http.ResponseWriter, tenant, session string) bool {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if err := s.cfg.Pipeline.WaitSession(ctx, tenant, session); err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return false
	}
	if !s.cfg.Pipeline.Projection.View(tenant, session, func(*projections.Session) {}) {
		writeError(w, http.StatusNotFound, fmt.Errorf("session %s/%s not found", tenant, session))
		return false
	}
	return true
}

func (s *Server) bundle(w http.ResponseWriter, r *http.Request, tenant, session string) {
	s.writeBundle(w, r, tenant, session, r.URL.Query().Get("format"))
}

func (s *Server) writeBundle(w http.ResponseWriter, r *http.Request, tenant, session, format string) {
	var b projections.Snapshot
	s.cfg.Pipeline.Projection.View(tenant, session, func(p *projections.Session) { b = p.Snapshot() })
	var (
		out []byte
		err error
		ct  = "application/json"
	)
	switch format {
	case "", "anthropic":
		buf := s.buffer()
		defer s.release(buf)
		out, err = b.AppendAnthropic(r.Context(), (*buf)[:0], s.cfg.Store)
		*buf = out
	case "openai":
		out, err = b.RenderOpenAI(r.Context(), s.cfg.Store, s.cfg.Tokens)
	case "text":
		out, err = b.RenderText(r.Context(), s.cfg.Store, s.cfg.Tokens)
		ct = "text/plain; charset=utf-8"
	default:
		writeError(w, http.StatusBadRequest, fmt.Errorf("format %q: want anthropic, openai or text", format))
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("render %s: %w", session, err))
		return
	}
	w.Header().Set("Content-Type", ct)
	_, _ = w.Write(out)
}

// maxPooledBuffer bounds the render buffers kept for reuse.
const maxPooledBuffer = 64 << 20

// buffer returns a render buffer from the pool (a 1.4 MB rendering per
// request at 2,000 items would otherwise be allocated and collected each
// time).
func (s *Server) buffer() *[]byte {
	if b, ok := s.bufs.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

// release returns a render buffer to the pool once its bytes are written.
func (s *Server) release(b *[]byte) {
	if cap(*b) <= maxPooledBuffer {
		s.bufs.Put(b)
	}
}

// RenderRequest is the body of POST /v1/sessions/{session}/render: an
// adapter is about to send a request at Time; the scheduler decides what to
// apply at that time and the bundle comes back in Format.
type RenderRequest struct {
	Time    time.Time `json:"time"`
	Request string    `json:"request"`
	Format  string    `json:"format,omitempty"`
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, tenant, session string) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var req RenderRequest
	dec := json.NewDecoder(bytes.NewReader(body.Bytes))
	defer body.Release()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("render request: %w", err))
		return
	}
	if req.Time.IsZero() {
		writeError(w, http.StatusBadRequest, errors.New(`render request: field "time" missing (the request's dispatch time, RFC 3339)`))
		return
	}
	if req.Request == "" {
		req.Request = events.NewID()
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	app, err := s.cfg.Pipeline.Scheduler.DecideLive(ctx, tenant, session, req.Time, req.Request)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	if app != nil {
		if err := s.cfg.Pipeline.Projection.WaitSeq(ctx, app.Seq); err != nil {
			writeError(w, http.StatusServiceUnavailable, err)
			return
		}
		a := app.Data.(*events.Application)
		w.Header().Set("X-Prunesched-Application", app.ID)
		w.Header().Set("X-Prunesched-Trigger", string(a.Trigger))
		w.Header().Set("X-Prunesched-Applied", fmt.Sprint(len(a.Marks)))
	}
	s.writeBundle(w, r, tenant, session, req.Format)
}

func (s *Server) decisions(w http.ResponseWriter, r *http.Request, tenant, session string) {
	var ds []projections.Decision
	s.cfg.Pipeline.Projection.View(tenant, session, func(p *projections.Session) { ds = p.Decisions() })
	if ds == nil {
		ds = []projections.Decision{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tenant": tenant, "session": session, "decisions": ds})
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request, tenant, session string) {
	var (
		st   projections.Stats
		info projections.SessionInfo
		serr error
	)
	s.cfg.Pipeline.Projection.View(tenant, session, func(p *projections.Session) {
		st, serr = p.Stats(r.Context(), nil, s.cfg.Tokens)
		info = p.Info()
	})
	if serr != nil {
		writeError(w, http.StatusInternalServerError, serr)
		return
	}
	// The stats' fields, plus "info": format, agent, title, start, items,
	// prunes (what 'prunesched sessions' lists).
	writeJSON(w, http.StatusOK, struct {
		projections.Stats
		Info projections.SessionInfo `json:"info"`
	}{st, info})
}

// ControlRequest is the body of pin, unpin, prune and restore.
type ControlRequest struct {
	Item   string    `json:"item"`
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Time   time.Time `json:"time,omitempty"`
}

func (s *Server) control(t events.Type) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant, session, err := sessionOf(r)
		if err != nil {
			writeError(w, statusOf(err), err)
			return
		}
		body, ok := s.readBody(w, r)
		if !ok {
			return
		}
		var req ControlRequest
		dec := json.NewDecoder(bytes.NewReader(body.Bytes))
		body.Release()
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("%s request: %w", t, err))
			return
		}
		if req.Time.IsZero() {
			// A person's action happens now; the event records when.
			req.Time = time.Now()
		}
		var p events.Payload
		switch t {
		case events.TypePin:
			p = &events.Pin{Item: req.Item, By: req.By, Reason: req.Reason}
		case events.TypeUnpin:
			p = &events.Unpin{Item: req.Item, By: req.By}
		case events.TypePruneRequest:
			p = &events.PruneRequest{Item: req.Item, By: req.By, Reason: req.Reason}
		case events.TypeRestore:
			p = &events.Restore{Item: req.Item, By: req.By, Reason: req.Reason}
		case events.TypeFlushRequest:
			p = &events.FlushRequest{By: req.By, Reason: req.Reason}
		}
		if t == events.TypeFlushRequest {
			if req.Item != "" {
				writeError(w, http.StatusBadRequest, errors.New(`flush request: field "item" not allowed: a flush applies everything pending`))
				return
			}
			if last, err := s.cfg.Store.LastSeq(r.Context(), tenant, session, events.KindFact); err != nil || last == 0 {
				writeError(w, http.StatusNotFound, fmt.Errorf("session %s/%s: %w", tenant, session, errNotFound))
				return
			}
		} else if _, _, err := s.findItem(r.Context(), tenant, session, req.Item); err != nil {
			writeError(w, statusOf(err), err)
			return
		}
		ev := events.New(events.NewID(), tenantField(tenant), session, req.Time, p)
		if err := ev.Validate(); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		stored, err := s.cfg.Store.Append(r.Context(), []events.Event{ev})
		if err != nil {
			writeError(w, statusOf(err), err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"event": stored[0].ID, "seq": stored[0].Seq, "type": t, "item": req.Item})
	}
}

func tenantField(t string) string {
	if t == events.DefaultTenant {
		return ""
	}
	return t
}

var errNotFound = errors.New("not found")

func statusOf(err error) int {
	var fe *events.FieldError
	var le *events.LineError
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.code
	case errors.Is(err, errNotFound), errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, store.ErrIDConflict):
		return http.StatusConflict
	case errors.Is(err, store.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.As(err, &fe), errors.As(err, &le):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func (s *Server) pending(w http.ResponseWriter, r *http.Request, tenant, session string) {
	// Pending may wait for the eligibility of the session's facts: no
	// longer than any other read waits for the workers.
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	pend, err := s.cfg.Pipeline.Scheduler.Pending(ctx, tenant, session)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	if pend == nil {
		pend = []scheduler.PendingMark{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tenant": tenant, "session": session, "pending": pend})
}

// economics prices the session's log under scheduler.ViewStrategies (no
// pruning, immediate application, the timing scheduler) with the
// scheduler's cache model: the economics ledger, per request.
func (s *Server) economics(w http.ResponseWriter, r *http.Request, tenant, session string) {
	evs, err := s.cfg.Store.ReadSession(r.Context(), tenant, session)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	out := s.ledgers(evs, scheduler.ViewStrategies...)
	writeJSON(w, http.StatusOK, map[string]any{"tenant": tenant, "session": session, "ledgers": out})
}

// ledgers prices a session's events under strategies with the pipeline's
// policy: the ledgers of the session's economics view (scheduler.NewView
// builds them with SimulateAll too), without the view's logged
// applications and calibration, which the API and the inspector do not
// show.
func (s *Server) ledgers(evs []events.Event, strategies ...string) map[string]scheduler.Ledger {
	return scheduler.SimulateAll(s.cfg.Pipeline.Policy, evs, strategies...)
}
