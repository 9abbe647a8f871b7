package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/inspector"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// inspectorHandler returns the context inspector (HTML views) reading
// through this server: the same tenant rule, catch-up wait, projection,
// scheduler and economics as the JSON handlers, so both show one truth.
func (s *Server) inspectorHandler() *inspector.Handler {
	return inspector.New(inspector.Config{Source: inspectorSource{s}, Tenant: inspectorTenant, Logger: s.cfg.Logger, SignedIn: signedIn})
}

// inspectorTenant is tenantOf with the status its error answers with.
func inspectorTenant(r *http.Request) (string, int, error) {
	t, err := tenantOf(r)
	if err != nil {
		code := statusOf(err)
		if code == http.StatusInternalServerError {
			code = http.StatusBadRequest
		}
		return "", code, err
	}
	return t, http.StatusOK, nil
}

// inspectorSource implements inspector.Source over a Server.
type inspectorSource struct{ s *Server }

// Sessions lists the tenant's sessions as GET /v1/sessions does.
func (a inspectorSource) Sessions(ctx context.Context, tenant string) ([]string, error) {
	refs, err := a.s.cfg.Store.Sessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var out []string
	for _, ref := range refs {
		if ref.Tenant == tenant {
			out = append(out, ref.Session)
		}
	}
	return out, nil
}

// View waits until the pipeline has caught up with the session (as the
// JSON handlers do) and returns its projection's items, certificates,
// stats and pending marks.
func (a inspectorSource) View(ctx context.Context, tenant, session string) (inspector.View, error) {
	ctx, cancel := context.WithTimeout(ctx, a.s.cfg.Timeout)
	defer cancel()
	if err := a.s.cfg.Pipeline.WaitSession(ctx, tenant, session); err != nil {
		return inspector.View{}, fmt.Errorf("session %s/%s: %w", tenant, session, err)
	}
	var (
		v    inspector.View
		serr error
	)
	found, err := a.s.cfg.Pipeline.Projection.ViewContext(ctx, tenant, session, func(p *projections.Session) {
		v.Items = p.Items()
		v.Decisions = p.Decisions()
		v.Stats, serr = p.Stats(ctx, nil, a.s.cfg.Tokens)
	})
	if err != nil {
		return inspector.View{}, fmt.Errorf("view of %s/%s: %w", tenant, session, err)
	}
	if !found {
		return inspector.View{}, fmt.Errorf("session %s/%s: %w", tenant, session, inspector.ErrNotFound)
	}
	if serr != nil {
		return inspector.View{}, fmt.Errorf("stats of %s/%s: %w", tenant, session, serr)
	}
	pend, err := a.s.cfg.Pipeline.Scheduler.Pending(ctx, tenant, session)
	if err != nil {
		return inspector.View{}, fmt.Errorf("pending of %s/%s: %w", tenant, session, err)
	}
	v.Pending = pend
	return v, nil
}

// Log reads the session's events from the log.
func (a inspectorSource) Log(ctx context.Context, tenant, session string) ([]events.Event, error) {
	evs, err := a.s.cfg.Store.ReadSession(ctx, tenant, session)
	if err != nil {
		return nil, fmt.Errorf("read session %s/%s: %w", tenant, session, err)
	}
	return evs, nil
}

// Economics prices evs under strategies as GET .../economics does.
func (a inspectorSource) Economics(evs []events.Event, strategies ...string) map[string]scheduler.Ledger {
	return a.s.ledgers(evs, strategies...)
}
