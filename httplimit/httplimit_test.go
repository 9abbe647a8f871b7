package httplimit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// blockingBody is a request body that yields its first part, then blocks
// until the test releases it.
type blockingBody struct {
	first   []byte
	rest    []byte
	release chan struct{}
	read    chan struct{} // closed once the first part was read
}

func (b *blockingBody) Read(p []byte) (int, error) {
	if len(b.first) > 0 {
		n := copy(p, b.first)
		b.first = b.first[n:]
		if len(b.first) == 0 {
			close(b.read)
		}
		return n, nil
	}
	<-b.release
	if len(b.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

func request(body io.Reader, n int64) *http.Request {
	r := httptest.NewRequest("POST", "/", body)
	r.ContentLength = n
	return r
}

// TestBudgetSharedByConcurrentBodies: a body of known length waits, holding
// nothing, while the bodies being read fill the budget, and proceeds once
// one is released; a body of unknown length that finds no room fails at
// once with ErrBusy (503); a body over the whole budget is a
// TooLargeError naming it (413).
func TestBudgetSharedByConcurrentBodies(t *testing.T) {
	b := NewBudget(100)
	slow := &blockingBody{first: []byte(strings.Repeat("a", 30)), rest: []byte(strings.Repeat("a", 50)), release: make(chan struct{}), read: make(chan struct{})}
	first := make(chan *Body, 1)
	go func() {
		body, err := ReadBody(httptest.NewRecorder(), request(slow, 80), b, 1000)
		if err != nil {
			t.Error(err)
		}
		first <- body
	}()
	<-slow.read
	if got := b.Used(); got != 80 {
		t.Fatalf("used %d while an 80-byte body is read, want 80", got)
	}
	// Unknown length, no room: refused at once.
	if _, err := ReadBody(httptest.NewRecorder(), request(strings.NewReader(strings.Repeat("b", 30)), -1), b, 1000); !errors.Is(err, ErrBusy) || Status(err) != http.StatusServiceUnavailable {
		t.Fatalf("unknown-length body with no room: %v", err)
	}
	// Over the whole budget: 413 naming it.
	_, err := ReadBody(httptest.NewRecorder(), request(strings.NewReader(strings.Repeat("c", 200)), 200), b, 1000)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Limit != 100 || Status(err) != http.StatusRequestEntityTooLarge || !strings.Contains(err.Error(), "100 bytes") {
		t.Fatalf("body over the budget: %v", err)
	}
	// Known length, no room yet: waits until the first is released.
	second := make(chan error, 1)
	go func() {
		body, err := ReadBody(httptest.NewRecorder(), request(strings.NewReader(strings.Repeat("d", 40)), 40), b, 1000)
		if err == nil {
			body.Release()
		}
		second <- err
	}()
	close(slow.release)
	body := <-first
	if len(body.Bytes) != 80 {
		t.Fatalf("first body %d bytes", len(body.Bytes))
	}
	body.Release()
	if err := <-second; err != nil {
		t.Fatalf("waiting body: %v", err)
	}
	if got := b.Used(); got != 0 {
		t.Fatalf("used %d after every body was released", got)
	}
	// A waiter gives up with its request's context.
	hold, _ := ReadBody(httptest.NewRecorder(), request(strings.NewReader(strings.Repeat("e", 90)), 90), b, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := request(strings.NewReader("ffffffffffffffffffff"), 20).WithContext(ctx)
	if _, err := ReadBody(httptest.NewRecorder(), r, b, 1000); !errors.Is(err, ErrBusy) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	hold.Release()
}

// TestReadBodyLimit: the per-request maximum is a TooLargeError naming it,
// for announced and unannounced lengths; nil budgets are unlimited.
func TestReadBodyLimit(t *testing.T) {
	for _, n := range []int64{20, -1} {
		_, err := ReadBody(httptest.NewRecorder(), request(strings.NewReader(strings.Repeat("x", 20)), n), nil, 10)
		var tl *TooLargeError
		if !errors.As(err, &tl) || tl.Limit != 10 || !strings.Contains(err.Error(), "maximum request body of 10 bytes") {
			t.Fatalf("length %d: %v", n, err)
		}
	}
	body, err := ReadBody(httptest.NewRecorder(), request(strings.NewReader("hello"), -1), nil, 10)
	if err != nil || string(body.Bytes) != "hello" {
		t.Fatalf("small body: %v", err)
	}
	body.Release()
	if s := (Timeouts{Read: -1}).WithDefaults(); s.Read != 0 || s.Write != DefaultWriteTimeout {
		t.Fatalf("timeouts %+v", s)
	}
}

// TestWriteAfterWork: with a server write timeout of one nanosecond (any
// write bounded from the request's start fails), a handler that works
// before answering still gets its answer out: the deadline counts from the
// first byte written.
func TestWriteAfterWork(t *testing.T) {
	release := make(chan struct{})
	h := WriteAfterWork(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release // the work
		_, _ = io.WriteString(w, "answer")
	}), time.Minute)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.WriteTimeout = time.Nanosecond
	srv.Start()
	defer srv.Close()
	close(release)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "answer" {
		t.Fatalf("got %q, %v", b, err)
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += k
	return k, err
}

// TestReadBodyOrStream: a body within the limit is read whole; one over it
// is an Over that holds at most the limit (an unknown length: read up to
// the limit and one byte more; a known length: not read at all) and reads
// back the whole body; its reservation is held until Release.
func TestReadBodyOrStream(t *testing.T) {
	const limit = 100
	body := strings.Repeat("0123456789", 50)
	for _, known := range []bool{false, true} {
		b := NewBudget(1000)
		src := &countingReader{r: strings.NewReader(body)}
		r := httptest.NewRequest(http.MethodPost, "/", io.NopCloser(src))
		r.ContentLength = -1
		if known {
			r.ContentLength = int64(len(body))
		}
		got, over, err := ReadBodyOrStream(httptest.NewRecorder(), r, b, limit)
		if err != nil || got != nil || over == nil {
			t.Fatalf("known %v: body %v, over %v, err %v", known, got, over, err)
		}
		wantRead, wantHeld := limit+1, int64(limit)
		if known {
			wantRead, wantHeld = 0, 0
		}
		if src.n > wantRead || b.Used() > wantHeld || len(over.Prefix) > limit {
			t.Fatalf("known %v: read %d bytes, budget holds %d, prefix %d; want at most %d, %d, %d", known, src.n, b.Used(), len(over.Prefix), wantRead, wantHeld, limit)
		}
		whole, _ := io.ReadAll(over.Reader())
		if string(whole) != body || over.Limit != limit || over.What != "maximum request body" {
			t.Fatalf("known %v: read back %d bytes, limit %d %q", known, len(whole), over.Limit, over.What)
		}
		over.Release()
		if b.Used() != 0 {
			t.Fatalf("known %v: budget holds %d after Release", known, b.Used())
		}
	}
	b := NewBudget(1000)
	got, over, err := ReadBodyOrStream(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body[:limit])), b, limit)
	if err != nil || over != nil || string(got.Bytes) != body[:limit] {
		t.Fatalf("a body at the limit: %v %v %v", got, over, err)
	}
	got.Release()
}
