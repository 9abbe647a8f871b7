package proxy

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/service"
)

// TestJoinFleetRefusesAnotherKey: the first proxy on a log stores its
// identity key's fingerprint; one with the same key joins, one with
// another key (or a random one) is refused with an error that names the
// fix and never the key.
func TestJoinFleetRefusesAnotherKey(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Policy: testPolicy(t)})
	require_NoError(t, err)
	t.Cleanup(svc.Close)
	js := svc.Store.JS()
	key, err := NewIdentityKey()
	require_NoError(t, err)
	other, err := NewIdentityKey()
	require_NoError(t, err)
	require_NoError(t, JoinFleet(ctx, js, key, 1))
	require_NoError(t, JoinFleet(ctx, js, append([]byte(nil), key...), 1))
	err = JoinFleet(ctx, js, other, 1)
	require_True(t, errors.Is(err, ErrFleetKey), "another key joined: %v", err)
	msg := err.Error()
	require_True(t, strings.Contains(msg, KeyFingerprint(other)) && strings.Contains(msg, KeyFingerprint(key)) && strings.Contains(msg, "proxy-identity.key"),
		"the error names neither fingerprint nor the fix: %s", msg)
	require_True(t, !strings.Contains(msg, string(other)) && !strings.Contains(strings.ToLower(msg), hex.EncodeToString(other)), "the error shows the key")
	err = JoinFleet(ctx, js, nil, 1)
	require_True(t, errors.Is(err, ErrFleetKey), "a random key joined: %v", err)
	require_True(t, KeyFingerprint(key) != KeyFingerprint(other) && len(KeyFingerprint(key)) == 16, "fingerprints")
}
