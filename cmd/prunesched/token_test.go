package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/internal/api"
	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/policy"
)

// TestClientSendsToken: client commands send --token as a bearer token to a
// server started with an auth file, and say why when it is missing.
func TestClientSendsToken(t *testing.T) {
	t.Parallel()
	const token = "tok-0123456789abcdef"
	auth, err := api.ParseAuth(strings.NewReader(token+" acme\n"), "auth")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), HTTPListen: "127.0.0.1:0", Policy: policy.Default(), Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	url := "http://" + svc.HTTPAddr
	if code, out, errOut := runT(t, "sessions", "--server", url, "--token", token, "--json"); code != 0 || !strings.Contains(out, `"sessions"`) {
		t.Errorf("with the token: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut := runT(t, "sessions", "--server", url)
	if code != 1 || !strings.Contains(errOut, "bearer token") {
		t.Errorf("without a token: exit %d, stderr %q", code, errOut)
	}
	if strings.Contains(errOut, token) {
		t.Errorf("the token was printed: %q", errOut)
	}
}
