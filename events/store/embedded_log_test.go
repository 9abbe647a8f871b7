package store

import (
	"bytes"
	"log/slog"
	"strings"
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
