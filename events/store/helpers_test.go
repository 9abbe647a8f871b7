package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

// testLogger writes to the test log only with -v, so CI output stays quiet.
func testLogger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startEmbedded starts an embedded server on dir (t.TempDir() if empty) and
// shuts it down at cleanup.
func startEmbedded(t testing.TB, dir string, sync bool) *Embedded {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	e, err := StartEmbedded(testCtx(t), EmbeddedConfig{DataDir: dir, SyncAlways: sync}, testLogger(t))
	testutil.NoError(t, err)
	t.Cleanup(e.Shutdown)
	return e
}

// connectAdmin opens an in-process admin connection to e (the tests create
// and reconfigure streams freely) and closes it at cleanup.
func connectAdmin(t testing.TB, e *Embedded) *nats.Conn {
	t.Helper()
	nc, err := e.ConnectAdmin("prunesched-store-test")
	testutil.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// connectEmbedded is the suite's connect function for the embedded backend:
// a fresh server per test.
func connectEmbedded(t *testing.T) *nats.Conn {
	return connectAdmin(t, startEmbedded(t, "", false))
}

// connectEmbeddedPair is connectEmbedded with two connections to one server.
func connectEmbeddedPair(t *testing.T) (*nats.Conn, *nats.Conn) {
	e := startEmbedded(t, "", false)
	return connectAdmin(t, e), connectAdmin(t, e)
}

// lenCounter is a cheap token counter for tests that do not test counting.
type lenCounter struct{}

func (lenCounter) Count(s string) int { return (len(s) + 3) / 4 }

func openStore(t testing.TB, nc *nats.Conn, cfg Config) *Store {
	t.Helper()
	s, err := Open(testCtx(t), nc, cfg, testLogger(t))
	testutil.NoError(t, err)
	return s
}

// Event builders. Sessions get a unique suffix so the suite also runs on a
// shared external server.

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func uniqueSession(name string) string { return name + "-" + events.NewID()[:8] }

func msgEvent(tenant, session, id, text string) events.Event {
	return events.New(id, tenant, session, t0, &events.Message{Item: "m-" + id, Role: events.RoleUser, Text: text})
}

func startedEvent(tenant, session, id string) events.Event {
	return events.New(id, tenant, session, t0, &events.SessionStarted{Format: "native"})
}

func callEvent(tenant, session, id, callID string) events.Event {
	return events.New(id, tenant, session, t0, &events.ToolCall{
		Item: events.CallInputItem(callID), CallID: callID, Tool: "Read", Input: []byte(`{"file_path":"a.go"}`),
	})
}

func resultEvent(tenant, session, id, callID, output string) events.Event {
	return events.New(id, tenant, session, t0, &events.ToolResult{
		Item: callID, CallID: callID, Tool: "Read", Output: &output,
		Source: &events.SourceIdentity{Kind: "file", Path: "a.go"},
	})
}

func markEvent(tenant, session, id, item, cause string) events.Event {
	return events.New(id, tenant, session, t0, &events.Mark{
		Item: item, Decision: events.Keep, Reason: events.ReasonUnique,
		Cause: cause, PolicyVersion: "test",
	})
}

func applyEvent(tenant, session, id, mark, item string) events.Event {
	return events.New(id, tenant, session, t0, &events.Application{
		Request: "r1", Marks: []string{mark}, Items: []string{item},
		Trigger: events.TriggerCacheExpired, PolicyVersion: "test",
	})
}

// sessionEvents is a small but complete session.
func sessionEvents(tenant, session string) []events.Event {
	return []events.Event{
		startedEvent(tenant, session, "e1"),
		msgEvent(tenant, session, "e2", "Why does the config loader fail?"),
		callEvent(tenant, session, "e3", "c1"),
		resultEvent(tenant, session, "e4", "c1", "package config\n\nfunc Load() error { return nil }\n"),
		events.New("e5", tenant, session, t0, &events.ModelRequest{Request: "r1", Usage: &events.Usage{InputTokens: 10, OutputTokens: 3}}),
	}
}

func ids(evs []events.Event) string {
	var b strings.Builder
	for i, e := range evs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s", e.ID)
	}
	return b.String()
}

// drainConsumer waits until durable's ack floor reaches last, then cancels
// the consumer and checks that it returns cleanly.
func drainConsumer(t *testing.T, ctx context.Context, s *Store, durable string, last uint64, cancel context.CancelFunc, res <-chan error) {
	t.Helper()
	testutil.Eventually(t, func() error {
		floor, err := s.AckFloor(ctx, durable)
		if err != nil {
			return err
		}
		if floor < last {
			return fmt.Errorf("ack floor %d < %d", floor, last)
		}
		return nil
	})

	cancel()
	select {
	case err := <-res:
		testutil.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer did not return after cancel")
	}
}
