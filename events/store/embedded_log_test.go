package store

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// TestServerNoticesAreDebug: nats-server's notices (its start-up banner)
// stay out of an info-level log; warnings and errors do not.
func TestServerNoticesAreDebug(t *testing.T) {
	var buf bytes.Buffer
	l := &serverLogger{l: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	l.Noticef("Starting nats-server %s", "v2")
	if buf.Len() != 0 {
		t.Errorf("a notice logged at info: %s", buf.String())
	}
	l.Warnf("disk %s", "slow")
	l.Errorf("bad %s", "thing")
	if out := buf.String(); !strings.Contains(out, "disk slow") || !strings.Contains(out, "bad thing") {
		t.Errorf("warnings/errors lost: %s", out)
	}
}

// TestNoPlaintextPasswordWarning: the embedded server holds bcrypt hashes
// of its users' secrets, so it never warns "Plaintext passwords detected"
// at every start (an alarm for nothing), and clients still connect with
// the secrets.
func TestNoPlaintextPasswordWarning(t *testing.T) {
	var buf syncBuf
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e, err := StartEmbedded(testCtx(t), EmbeddedConfig{DataDir: t.TempDir(), Listen: true}, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	nc, err := e.Connect("test")
	if err != nil {
		t.Fatalf("connect with the secret: %v", err)
	}
	nc.Close()
	if out := buf.String(); strings.Contains(strings.ToLower(out), "plaintext password") {
		t.Fatalf("the server warned about plaintext passwords:\n%s", out)
	}
}

// syncBuf is a goroutine-safe log sink.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
