package proxy

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// Work a request leaves for after its response (the record's goroutine,
// the exact counts and the decision's check, which wait for the response's
// end) starts once the response is written whole, not when the handler
// returns. On HTTP/1.1, Go's server writes the end of a chunked response
// (the last chunk) and flushes its buffer only after the handler has
// returned: work started at the return, on the two processors the client
// and the upstream also run on, delayed the client's last bytes by
// 0.3-1 ms on the bench's 200 KiB rows (docs/performance.md, "The work
// after a response, started once it is sent"). The server says when it is
// done with a response by the connection's state: idle (kept alive),
// closed or hijacked.

// ConfigureServer makes srv, the server of p.Handler, start each request's
// work after its response once the server has written the response whole
// (the connection's state changes to idle, closed or hijacked). Without it
// that work starts when the handler returns; so it does on HTTP/2, whose
// connection turns idle only once all of its streams have ended, which
// with other agents' answers streaming on it may be minutes later. Hooks
// srv already has run first.
func (p *Proxy) ConfigureServer(srv *http.Server) {
	var conns sync.Map // net.Conn -> *sentHooks
	prevCtx, prevState := srv.ConnContext, srv.ConnState
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prevCtx != nil {
			ctx = prevCtx(ctx, c)
		}
		h := &sentHooks{}
		conns.Store(c, h)
		return context.WithValue(ctx, sentHooksKey{}, h)
	}
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		if prevState != nil {
			prevState(c, s)
		}
		switch s {
		case http.StateIdle, http.StateClosed, http.StateHijacked:
			v, ok := conns.Load(c)
			if !ok {
				return
			}
			if s != http.StateIdle {
				conns.Delete(c)
			}
			v.(*sentHooks).run()
		}
	}
}

// sentHooks is one connection's work left for after its current response.
type sentHooks struct {
	mu  sync.Mutex
	fns []func()
}

type sentHooksKey struct{}

// add leaves fn for after the current response.
func (h *sentHooks) add(fn func()) {
	h.mu.Lock()
	h.fns = append(h.fns, fn)
	h.mu.Unlock()
}

// run runs the work left so far, in the order it was left. It runs on the
// server's connection goroutine: the work must not block (it closes
// channels and starts goroutines).
func (h *sentHooks) run() {
	h.mu.Lock()
	fns := h.fns
	h.fns = nil
	h.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// afterSent is one request's work left for after its response: on the
// connection's hooks when the server has them for this request (HTTP/1.x
// on a server set up by ConfigureServer), else run when the handler
// returns (done).
type afterSent struct {
	hooks *sentHooks
	local []func()
}

// newAfterSent returns the request's afterSent; defer its done in the
// handler before anything else, so that it runs last.
func newAfterSent(r *http.Request) *afterSent {
	a := &afterSent{}
	if h, ok := r.Context().Value(sentHooksKey{}).(*sentHooks); ok && r.ProtoMajor == 1 {
		a.hooks = h
	}
	return a
}

// later leaves fn for after the response.
func (a *afterSent) later(fn func()) {
	if a.hooks != nil {
		a.hooks.add(fn)
		return
	}
	a.local = append(a.local, fn)
}

// done runs, at the handler's return, the work left when the server has
// no hooks for the request.
func (a *afterSent) done() {
	for _, fn := range a.local {
		fn()
	}
	a.local = nil
}
