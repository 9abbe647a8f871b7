package bench

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// gatedBody hands the transport the relayed request body and holds its
// read after the end (the transport reads once more to check the body is
// not longer than declared) until release is closed, reporting that
// read's error on result: the moment that, under load, came after the
// relay's server had closed the body.
type gatedBody struct {
	rc      io.ReadCloser
	ended   bool
	release <-chan struct{}
	result  chan<- error
}

func (g *gatedBody) Read(p []byte) (int, error) {
	if !g.ended {
		n, err := g.rc.Read(p)
		g.ended = errors.Is(err, io.EOF)
		return n, err
	}
	<-g.release
	n, err := g.rc.Read(p)
	g.result <- err
	return n, err
}

func (g *gatedBody) Close() error { return g.rc.Close() }

// TestBareProxyKeepsStreamWhenAnswerComesFirst drives the case that broke
// replayed streams under load (golang/go#40747): the answer's headers go
// out before the transport's last read of the request body. Without full
// duplex the baseline proxy's server closes the request body as it writes
// the headers, that last read fails ("invalid Read on closed Body") and
// the transport tears down the connection to the upstream mid-answer.
func TestBareProxyKeepsStreamWhenAnswerComesFirst(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 64<<10)
	more := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			t.Errorf("upstream read: %v", err)
		}
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		_ = rc.Flush()
		<-more
		_, _ = io.WriteString(w, "data: two\n\n")
	}))
	defer up.Close()
	// Runs before up.Close, which waits for the upstream's handler.
	var once sync.Once
	letGo := func() { once.Do(func() { close(more) }) }
	defer letGo()
	u, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	release, result := make(chan struct{}), make(chan error, 1)
	bare := bareProxy(u)
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A shallow copy: the server keeps judging its own request's body.
		out := r.WithContext(r.Context())
		out.Body = &gatedBody{rc: r.Body, release: release, result: result}
		bare.ServeHTTP(w, out)
	}))
	defer relay.Close()

	resp, err := http.Post(relay.URL+"/v1/messages", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The answer's headers are here: the relay's server wrote them.
	close(release)
	if err := <-result; !errors.Is(err, io.EOF) {
		t.Fatalf("the transport's last read of the request body = %v, want io.EOF (the relay's server closed the body)", err)
	}
	letGo()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read answer: %v (got %q)", err, got)
	}
	if want := "data: one\n\ndata: two\n\n"; string(got) != want {
		t.Fatalf("answer = %q, want %q", got, want)
	}
}
