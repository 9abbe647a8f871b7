// Package testutil holds the module's test helpers: a few assertions in the
// nats-server style (no assertion library) and one poller, Eventually.
//
// It must not time the machine: Eventually's deadline only turns a hang
// into a failure with a message, it is never a measurement. It is imported
// by tests only.
package testutil

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// NoError fails the test at once if err is not nil.
func NoError(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// Error fails the test at once if err is nil or does not wrap every one of
// wants.
func Error(t testing.TB, err error, wants ...error) {
	t.Helper()
	if err == nil {
		t.Fatal("expected an error, got nil")
	}
	for _, w := range wants {
		if !errors.Is(err, w) {
			t.Fatalf("error %v is not %v", err, w)
		}
	}
}

// True fails the test at once with the formatted message if ok is false.
func True(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Fatalf(format, args...)
	}
}

// Equal fails the test at once if got differs from want. what, when given,
// names the value in the failure.
func Equal[T comparable](t testing.TB, got, want T, what ...string) {
	t.Helper()
	if got != want {
		if len(what) > 0 {
			t.Fatalf("%s: got %v, want %v", strings.Join(what, " "), got, want)
		}
		t.Fatalf("got %v, want %v", got, want)
	}
}

// Near fails the test at once if got is further than 1e-9 from want; what
// names the value in the failure.
func Near(t testing.TB, got, want float64, what string) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Fatalf("%s: got %.9f, want %.9f", what, got, want)
	}
}

// Contains fails the test at once if s does not contain sub.
func Contains(t testing.TB, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%q does not contain %q", s, sub)
	}
}

// HangDeadline is how long Eventually waits by default before it calls a
// condition hung. It is generous on purpose: a loaded machine must never
// fail a test that would pass, and a hang still ends with a message.
const HangDeadline = 60 * time.Second

// Option changes how Eventually waits.
type Option func(*waitConfig)

type waitConfig struct {
	deadline time.Duration
	ctx      context.Context
}

// Within replaces HangDeadline for one call, for a condition that takes
// longer by nature (a cluster electing leaders after a failure).
func Within(d time.Duration) Option { return func(c *waitConfig) { c.deadline = d } }

// Until also stops waiting when ctx is done (the test's own deadline).
func Until(ctx context.Context) Option { return func(c *waitConfig) { c.ctx = ctx } }

// Eventually calls cond until it returns nil, backing off from 5 ms to
// 250 ms between calls. If cond still fails after the hang deadline
// (HangDeadline unless Within says otherwise) or the Until context is
// done, the test fails with cond's last error.
func Eventually(t testing.TB, cond func() error, opts ...Option) {
	t.Helper()
	c := waitConfig{deadline: HangDeadline, ctx: context.Background()}
	for _, o := range opts {
		o(&c)
	}
	hung := time.NewTimer(c.deadline)
	defer hung.Stop()
	delay := 5 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-hung.C:
			t.Fatalf("still failing after %s: %v", c.deadline, err)
		case <-c.ctx.Done():
			t.Fatalf("gave up (%v): %v", c.ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
}
