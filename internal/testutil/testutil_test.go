package testutil

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeTB records a Fatalf and ends the calling goroutine like testing does.
type fakeTB struct {
	testing.TB
	msg string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func (f *fakeTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

// run calls fn with a fakeTB and returns the failure message ("" if none).
func run(fn func(t testing.TB)) (msg string) {
	f := &fakeTB{}
	defer func() {
		if r := recover(); r != nil && r != any(f) {
			panic(r)
		}
		msg = f.msg
	}()
	fn(f)
	return ""
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	msg := run(func(tb testing.TB) {
		Eventually(tb, func() error {
			calls++
			if calls < 3 {
				return errors.New("not yet")
			}
			return nil
		})
	})
	if msg != "" || calls != 3 {
		t.Fatalf("failure %q after %d calls, want none after 3", msg, calls)
	}
}

func TestEventuallyFailsWithTheLastErrorWhenDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	msg := run(func(tb testing.TB) {
		Eventually(tb, func() error { return errors.New("still busy") }, Until(ctx))
	})
	if !strings.Contains(msg, "still busy") || !strings.Contains(msg, "canceled") {
		t.Fatalf("failure %q, want the last error and the cause", msg)
	}
	msg = run(func(tb testing.TB) {
		Eventually(tb, func() error { return errors.New("hung") }, Within(time.Nanosecond))
	})
	if !strings.Contains(msg, "hung") || !strings.Contains(msg, "still failing after") {
		t.Fatalf("failure %q, want the hang message", msg)
	}
}

func TestAssertions(t *testing.T) {
	sentinel := errors.New("sentinel")
	for name, tc := range map[string]struct {
		fn   func(tb testing.TB)
		want string // "" when the assertion holds
	}{
		"no error":         {func(tb testing.TB) { NoError(tb, nil) }, ""},
		"error":            {func(tb testing.TB) { NoError(tb, sentinel) }, "unexpected error: sentinel"},
		"wraps":            {func(tb testing.TB) { Error(tb, fmt.Errorf("x: %w", sentinel), sentinel) }, ""},
		"does not wrap":    {func(tb testing.TB) { Error(tb, errors.New("other"), sentinel) }, "is not sentinel"},
		"nil error":        {func(tb testing.TB) { Error(tb, nil) }, "expected an error"},
		"equal":            {func(tb testing.TB) { Equal(tb, 2, 2) }, ""},
		"unequal":          {func(tb testing.TB) { Equal(tb, 1, 2) }, "got 1, want 2"},
		"unequal named":    {func(tb testing.TB) { Equal(tb, "a", "b", "name") }, "name: got a, want b"},
		"near":             {func(tb testing.TB) { Near(tb, 0.1+0.2, 0.3, "sum") }, ""},
		"far":              {func(tb testing.TB) { Near(tb, 1, 2, "sum") }, "sum: got"},
		"true":             {func(tb testing.TB) { True(tb, true, "x") }, ""},
		"false":            {func(tb testing.TB) { True(tb, false, "bad %d", 7) }, "bad 7"},
		"contains":         {func(tb testing.TB) { Contains(tb, "abc", "b") }, ""},
		"does not contain": {func(tb testing.TB) { Contains(tb, "abc", "z") }, `"abc" does not contain "z"`},
	} {
		t.Run(name, func(t *testing.T) {
			got := run(tc.fn)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("failure %q, want %q", got, tc.want)
			}
		})
	}
}
