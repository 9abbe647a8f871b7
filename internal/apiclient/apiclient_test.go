package apiclient

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDo: every request carries the tenant and the bearer token; a non-2xx
// answer is an *Error with the API's message; no answer wraps
// ErrUnreachable; the token never appears in an error.
func TestDo(t *testing.T) {
	const token = "tok-secret-0123456789"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token || r.URL.Query().Get("tenant") != "acme" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"missing or unknown bearer token"}`))
			return
		}
		switch r.URL.EscapedPath() {
		case "/v1/sessions/s%201/items/toolu_1%23a/pin":
			_, _ = w.Write([]byte(`{"ok":true}`))
		case "/v1/sessions":
			_, _ = w.Write([]byte(`{"sessions":["a"]}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`not json`))
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	c := New(srv.URL+"/", "acme", token)
	var v struct{ Sessions []string }
	if _, err := c.GetJSON(ctx, "/v1/sessions", &v); err != nil || len(v.Sessions) != 1 {
		t.Fatalf("GetJSON: %v %+v", err, v)
	}
	if _, err := c.Do(ctx, "POST", ItemPath("s 1", "toolu_1#a", "/pin"), nil, nil, ""); err != nil {
		t.Errorf("item path: %v", err)
	}
	_, err := c.Do(ctx, "GET", "/nowhere", nil, nil, "")
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Message != "GET /nowhere: 404 Not Found" {
		t.Errorf("404: %v", err)
	}
	_, err = New(srv.URL, "acme", "wrong-"+token).Do(ctx, "GET", "/v1/sessions", nil, nil, "")
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || ae.Message != "missing or unknown bearer token" {
		t.Errorf("401: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = New("http://"+addr, "", token).Do(ctx, "GET", "/v1/sessions", nil, nil, "")
	if !errors.Is(err, ErrUnreachable) {
		t.Errorf("closed port: %v, want ErrUnreachable", err)
	}
	for _, e := range []error{err, ae} {
		if e != nil && strings.Contains(e.Error(), token) {
			t.Errorf("the token is in an error: %v", e)
		}
	}
}
