package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestProxyKeepsIdentityKey: 'prunesched proxy --data DIR' creates the
// identity key in DIR with mode 0600 once and reuses it at the next start.
func TestProxyKeepsIdentityKey(t *testing.T) {
	dir := t.TempDir()
	start := func() []byte {
		t.Helper()
		// A cancelled context: the command starts and stops at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var out, errb bytes.Buffer
		run(ctx, &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }},
			[]string{"proxy", "--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", "--api-listen", "", "--data", dir})
		path := filepath.Join(dir, identityKeyFile)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatalf("identity key not created: %v (stderr %s)", err, errb.String())
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("identity key mode %v, want 0600", fi.Mode().Perm())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := start()
	if second := start(); !bytes.Equal(first, second) {
		t.Fatal("identity key changed at restart")
	}
}
