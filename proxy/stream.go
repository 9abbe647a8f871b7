package proxy

import (
	"context"
	"errors"
	"time"
)

// Timer is the part of *time.Timer the stream idle timeout uses, so a test
// can fire it when it chooses (Config.AfterFunc).
type Timer interface {
	// Stop prevents the timer from firing; false if it already fired or
	// was stopped.
	Stop() bool
	// Reset makes the timer fire after d; false if it had fired or been
	// stopped.
	Reset(d time.Duration) bool
}

// errStreamIdle is the cause of an upstream request cancelled because its
// response body sent nothing for the stream idle timeout.
var errStreamIdle = errors.New("upstream response body idle")

// idleWatch ends an upstream request whose response body sends nothing
// for d between two reads. The wait covers only reads of the upstream
// body: writing to the client has its own per-write timeout.
type idleWatch struct {
	d      time.Duration
	after  func(time.Duration, func()) Timer
	ctx    context.Context
	cancel context.CancelCauseFunc
	t      Timer
}

// watchIdle returns the context of an upstream request derived from ctx
// (the client's) and the watch that cancels it when the response body
// stalls. Call done when the response is finished with.
func (p *Proxy) watchIdle(ctx context.Context) *idleWatch {
	ctx, cancel := context.WithCancelCause(ctx)
	return &idleWatch{d: p.cfg.StreamIdleTimeout, after: p.cfg.AfterFunc, ctx: ctx, cancel: cancel}
}

// arm starts the wait for the body's next bytes (before a read).
func (w *idleWatch) arm() {
	if w == nil || w.d <= 0 {
		return
	}
	if w.t == nil {
		w.t = w.after(w.d, func() { w.cancel(errStreamIdle) })
		return
	}
	w.t.Reset(w.d)
}

// disarm ends the wait (a read returned).
func (w *idleWatch) disarm() {
	if w != nil && w.t != nil {
		w.t.Stop()
	}
}

// idled reports whether the watch cancelled the upstream request.
func (w *idleWatch) idled() bool {
	return w != nil && context.Cause(w.ctx) == errStreamIdle
}

// done stops the timer and releases the request's context.
func (w *idleWatch) done() {
	w.disarm()
	w.cancel(nil)
}
