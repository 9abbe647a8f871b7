// Package permtest helps tests check that a NATS server refuses an
// operation for lack of permission. A denied publish or request gets no
// reply: the server sends the client an asynchronous permissions violation
// instead, which the test waits for rather than for a timeout.
package permtest

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// Violations returns a connection option that sends the connection's
// asynchronous errors to the returned channel, for Denied.
func Violations() (nats.Option, <-chan error) {
	ch := make(chan error, 16)
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { ch <- err }), ch
}

// Denied runs op (named what in failures) and reports a test error unless
// the server answers it with a permissions violation naming subject (any
// subject when empty), or op itself fails. op must return once its ctx is
// cancelled; Denied cancels it when the violation arrives.
func Denied(t testing.TB, ctx context.Context, viol <-chan error, what, subject string, op func(ctx context.Context) error) {
	t.Helper()
	opCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- op(opCtx) }()
	select {
	case err := <-viol:
		if !strings.Contains(err.Error(), "Permissions Violation") || !strings.Contains(err.Error(), subject) {
			t.Errorf("%s: %v, want a permissions violation on %s", what, err, subject)
		}
		cancel()
		<-done
	case err := <-done:
		if err == nil {
			t.Errorf("%s: allowed", what)
		}
	}
}
