// Package httplimit holds the limits every prunesched HTTP server shares
// (the API of serve and worker, and the proxy): read, write and idle
// timeouts, a byte budget that all request bodies being read at once share,
// and reading one bounded body into memory. One definition, so both servers
// answer an oversized or slow request the same way. It must never read a
// body past its limit or outside the shared budget into memory: memory is
// bounded by configuration, not by the input.
package httplimit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"
)

// Defaults of Timeouts and of the body budget.
const (
	// DefaultReadHeaderTimeout bounds reading a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request (headers and
	// body): a 256 MB import at 2 MB/s fits; a client that trickles its
	// body is cut off instead of holding a connection and its buffer.
	DefaultReadTimeout = 2 * time.Minute
	// DefaultWriteTimeout bounds writing a response (from the end of the
	// request headers). Streaming responses extend it per write.
	DefaultWriteTimeout = 2 * time.Minute
	// DefaultIdleTimeout bounds how long a kept-alive connection waits for
	// its next request.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultInflightBodyBytes is the default byte budget shared by every
	// request body being read at once: one maximum-size body (256 MB) at a
	// time, or many small ones.
	DefaultInflightBodyBytes = 256 << 20
)

// Timeouts are an HTTP server's timeouts. Zero fields take the defaults;
// a negative field means no timeout.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// DefaultTimeouts returns the default timeouts.
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: DefaultReadHeaderTimeout, Read: DefaultReadTimeout, Write: DefaultWriteTimeout, Idle: DefaultIdleTimeout}
}

func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// WithDefaults returns t with zero fields set to the defaults and negative
// fields set to 0 (no timeout, as http.Server reads it).
func (t Timeouts) WithDefaults() Timeouts {
	return Timeouts{
		ReadHeader: orDefault(t.ReadHeader, DefaultReadHeaderTimeout),
		Read:       orDefault(t.Read, DefaultReadTimeout),
		Write:      orDefault(t.Write, DefaultWriteTimeout),
		Idle:       orDefault(t.Idle, DefaultIdleTimeout),
	}
}

// Server returns an http.Server for h with the timeouts t (defaults
// filled in).
func (t Timeouts) Server(h http.Handler) *http.Server {
	t = t.WithDefaults()
	return &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, WriteTimeout: t.Write, IdleTimeout: t.Idle}
}

// Budget is a byte budget shared by the request bodies being read at once,
// so that concurrent large bodies cannot together exhaust memory. A body of
// announced length reserves that many bytes before it is read and waits
// (holding nothing) until they are free; a body of unknown length reserves
// as it grows and fails at once when the budget is spent rather than wait
// while holding a part (which could deadlock). A nil *Budget is unlimited.
type Budget struct {
	mu    sync.Mutex
	max   int64
	used  int64
	freed chan struct{} // closed and replaced on every release
}

// NewBudget returns a budget of max bytes (max <= 0: unlimited, nil).
func NewBudget(max int64) *Budget {
	if max <= 0 {
		return nil
	}
	return &Budget{max: max, freed: make(chan struct{})}
}

// Max returns the budget's size (0 for unlimited).
func (b *Budget) Max() int64 {
	if b == nil {
		return 0
	}
	return b.max
}

// Used returns the bytes currently reserved.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// acquire reserves n bytes, waiting for them while wait is true and ctx
// lives; without wait it fails at once. n must not exceed max.
func (b *Budget) acquire(ctx context.Context, n int64, wait bool) error {
	for {
		b.mu.Lock()
		if b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		freed := b.freed
		b.mu.Unlock()
		if !wait {
			return ErrBusy
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrBusy, ctx.Err())
		}
	}
}

// release gives n bytes back.
func (b *Budget) release(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// ErrBusy reports that the in-flight body budget had no room for a body.
// Servers answer it with 503 and Retry-After.
var ErrBusy = errors.New("server busy: the request bodies being read already fill the in-flight body budget; retry later")

// TooLargeError reports a body over the per-request limit (or over the
// whole in-flight budget). Servers answer it with 413.
type TooLargeError struct {
	// Limit is the limit in bytes; What names it.
	Limit int64
	What  string
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("request body too large: over the %s of %d bytes (%s)", e.What, e.Limit, FormatBytes(e.Limit))
}

// ErrSlowBody reports a body not read whole before the read timeout.
// Servers answer it with 408 (the connection is closed).
var ErrSlowBody = errors.New("request body not received before the server's read timeout")

// FormatBytes renders n in binary units for messages ("256 MiB").
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%.4g MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.4g KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Body is a request body read whole; Release gives its bytes back to the
// budget once the caller no longer holds them (call it exactly once).
type Body struct {
	Bytes   []byte
	release func()
}

// Release returns the body's reservation to its budget.
func (b *Body) Release() {
	if b.release != nil {
		b.release()
		b.release = nil
	}
}

// Over is a body over the limit given to ReadBodyOrStream: the caller may
// forward it as a stream instead of refusing it. Prefix holds the bytes
// already read (at most the limit, reserved in the budget until Release)
// and Rest reads the remainder; Prefix then Rest is the whole body.
type Over struct {
	Prefix []byte
	Rest   io.Reader
	// Limit is the limit the body is over; What names it (as TooLargeError).
	Limit   int64
	What    string
	release func()
}

// Release returns the prefix's reservation to its budget.
func (o *Over) Release() {
	if o.release != nil {
		o.release()
		o.release = nil
	}
}

// Reader returns the whole body: the prefix, then the rest.
func (o *Over) Reader() io.Reader { return io.MultiReader(bytes.NewReader(o.Prefix), o.Rest) }

// growChunk is how much an unknown-length body reserves at a time.
const growChunk = 1 << 20

// ReadBody reads r's body whole, at most limit bytes, under budget b. The
// error is a *TooLargeError (413), ErrBusy (503) or ErrSlowBody (408), or
// wraps the read error. Once the body is read, the connection's read
// deadline is lifted: the server's read timeout bounds receiving the
// request, not the time the handler takes to answer it (an expired read
// deadline would otherwise cancel the request's context mid-answer).
func ReadBody(w http.ResponseWriter, r *http.Request, b *Budget, limit int64) (*Body, error) {
	body, _, err := readBody(w, r, b, limit, false)
	return body, err
}

// ReadBodyOrStream is ReadBody for a server that forwards what it cannot
// hold (the proxy): a body over the limit (the per-request maximum or the
// whole budget) is not an error but an *Over, and nothing beyond the limit
// is buffered: a body whose Content-Length is over it is not read at all,
// one of unknown length is read up to the limit (under the budget) and the
// rest is left to stream. Exactly one of the results is non-nil.
func ReadBodyOrStream(w http.ResponseWriter, r *http.Request, b *Budget, limit int64) (*Body, *Over, error) {
	return readBody(w, r, b, limit, true)
}

// readBody is ReadBody; with stream, a body over the limit is an *Over.
func readBody(w http.ResponseWriter, r *http.Request, b *Budget, limit int64, stream bool) (*Body, *Over, error) {
	if b != nil && limit > b.max {
		limit = b.max
	}
	n := r.ContentLength
	if n > limit {
		if stream {
			te := tooLarge(b, limit).(*TooLargeError)
			return nil, &Over{Rest: r.Body, Limit: te.Limit, What: te.What}, nil
		}
		return nil, nil, tooLarge(b, limit)
	}
	var reserved int64
	giveBack := func() { b.release(reserved); reserved = 0 }
	if b != nil && n >= 0 {
		if err := b.acquire(r.Context(), n, true); err != nil {
			return nil, nil, err
		}
		reserved = n
	}
	// The body is read straight into its buffer, as much at a time as the
	// connection gives (no staging copy): of known length, the buffer is
	// allocated once (one byte over, for the read that sees the end); of
	// unknown length, it grows as it fills, and the bytes read are
	// reserved in the budget (growChunk at a time) before they are kept.
	var data []byte
	if n >= 0 {
		data = make([]byte, 0, n+1)
	} else {
		data = make([]byte, 0, 32<<10)
	}
	var src io.Reader
	if stream {
		src = io.LimitReader(r.Body, limit)
	} else {
		src = http.MaxBytesReader(w, r.Body, limit)
	}
	for {
		if len(data) == cap(data) {
			data = slices.Grow(data, max(32<<10, len(data)/2))
		}
		k, err := src.Read(data[len(data):cap(data)])
		if k > 0 && b != nil && int64(len(data)+k) > reserved {
			grow := max(int64(growChunk), int64(len(data)+k)-reserved)
			grow = min(grow, limit-reserved)
			if grow <= 0 || b.acquire(r.Context(), grow, false) != nil {
				giveBack()
				return nil, nil, ErrBusy
			}
			reserved += grow
		}
		data = data[:len(data)+k]
		if err == io.EOF {
			break
		}
		if err != nil {
			giveBack()
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				return nil, nil, tooLarge(b, limit)
			case errors.Is(err, os.ErrDeadlineExceeded):
				return nil, nil, ErrSlowBody
			}
			return nil, nil, fmt.Errorf("read body: %w", err)
		}
	}
	if stream && int64(len(data)) == limit {
		// At the limit: one more byte says whether the body goes on.
		var one [1]byte
		k, err := io.ReadFull(r.Body, one[:])
		if k == 1 {
			te := tooLarge(b, limit).(*TooLargeError)
			return nil, &Over{Prefix: data, Rest: io.MultiReader(bytes.NewReader(one[:]), r.Body), Limit: te.Limit, What: te.What, release: giveBack}, nil
		}
		if err != nil && err != io.EOF {
			giveBack()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, nil, ErrSlowBody
			}
			return nil, nil, fmt.Errorf("read body: %w", err)
		}
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	return &Body{Bytes: data, release: giveBack}, nil, nil
}

func tooLarge(b *Budget, limit int64) error {
	if b != nil && limit == b.max {
		return &TooLargeError{Limit: limit, What: "in-flight body budget"}
	}
	return &TooLargeError{Limit: limit, What: "maximum request body"}
}

// Status maps a ReadBody error to its HTTP status.
func Status(err error) int {
	var tl *TooLargeError
	switch {
	case errors.As(err, &tl):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrBusy):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrSlowBody):
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

// StreamWrite extends the connection's write deadline by d (d <= 0: lifts
// it) before a streaming response writes its next part, so the server's
// write timeout bounds each write of a stream rather than the whole stream.
func StreamWrite(w http.ResponseWriter, d time.Duration) {
	var t time.Time
	if d > 0 {
		t = time.Now().Add(d)
	}
	_ = http.NewResponseController(w).SetWriteDeadline(t)
}

// WriteAfterWork makes the server's write timeout d bound writing each
// response rather than the handler's work before it: the deadline is
// lifted when a request starts and set to d from the first byte written.
// An import that tokenizes a large trace for minutes is not cut off; a
// client that does not read its answer still is. d <= 0 leaves h as is.
func WriteAfterWork(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		StreamWrite(w, 0)
		h.ServeHTTP(&deadlineWriter{ResponseWriter: w, d: d}, r)
	})
}

// deadlineWriter sets the write deadline at its first write.
type deadlineWriter struct {
	http.ResponseWriter
	d   time.Duration
	set bool
}

func (dw *deadlineWriter) arm() {
	if !dw.set {
		dw.set = true
		StreamWrite(dw.ResponseWriter, dw.d)
	}
}

// WriteHeader arms the deadline and passes the code on.
func (dw *deadlineWriter) WriteHeader(code int) {
	dw.arm()
	dw.ResponseWriter.WriteHeader(code)
}

// Write arms the deadline and passes b on.
func (dw *deadlineWriter) Write(b []byte) (int, error) {
	dw.arm()
	return dw.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (dw *deadlineWriter) Unwrap() http.ResponseWriter { return dw.ResponseWriter }
