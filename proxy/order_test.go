package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

// newGate returns a gateBackend and its release (idempotent).
func newGate() (*gateBackend, func()) {
	g := &gateBackend{entered: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	return g, func() { once.Do(func() { close(g.release) }) }
}

// gateBackend blocks the first append that records a model request (the
// record of a response) until release is closed, and closes entered when
// it starts waiting.
type gateBackend struct {
	Backend
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (g *gateBackend) Append(ctx context.Context, evs []events.Event) ([]events.Event, error) {
	for _, e := range evs {
		if _, ok := e.Data.(*events.ModelRequest); ok {
			first := false
			g.once.Do(func() { first = true })
			if first {
				close(g.entered)
				select {
				case <-g.release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			break
		}
	}
	return g.Backend.Append(ctx, evs)
}

// TestRecordBeforeResponseEnds reproduces the ordering race of issue 15:
// the client sends its next request the moment the previous response
// ends (an SSE client on message_stop, a JSON client on the last byte),
// and the upstream keeps the first response open until that next request
// arrives. The first response's record (its model request and the
// assistant's tool call) holds the session before the client can see the
// end of the response, so the next request is recorded after it. The
// record's append is held by the test: while it is held, the upstream must
// not have seen the next request.
func TestRecordBeforeResponseEnds(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			t.Parallel()
			f := &fakeUpstream{}
			second := make(chan struct{})
			var secondOnce sync.Once
			inner := anthropicFake(f, func(req map[string]any) turn {
				if countToolResults(req) == 0 {
					return turn{tool: "Read", id: "toolu_o1", input: map[string]any{"file_path": "/p/a.txt"}}
				}
				secondOnce.Do(func() { close(second) })
				return turn{text: "done"}
			})
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if stream {
					inner.ServeHTTP(w, r)
				} else {
					// A JSON answer with its Content-Length.
					rec := httptest.NewRecorder()
					inner.ServeHTTP(rec, r)
					for k, v := range rec.Header() {
						w.Header()[k] = v
					}
					w.Header().Set("Content-Length", strconv.Itoa(rec.Body.Len()))
					// The connection stays busy below: the proxy must not
					// send the next request on it.
					w.Header().Set("Connection", "close")
					w.WriteHeader(rec.Code)
					_, _ = w.Write(rec.Body.Bytes())
				}
				// The first answer is all sent: keep its connection open
				// until the next request arrives.
				if w.(http.Flusher).Flush(); len(f.requests()) == 1 {
					select {
					case <-second:
					case <-r.Context().Done():
					}
				}
			})
			g, release := newGate()
			t.Cleanup(release)
			b := setup(t, testPolicy(t), up, func(c *Config) {
				g.Backend = c.Backend
				c.Backend = g
			})

			user := map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "read a.txt"}}}
			body := func(msgs ...any) []byte {
				out, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 100, "stream": stream,
					"tools": []any{map[string]any{"name": "Read"}}, "messages": msgs})
				return out
			}
			done := make(chan error, 1)
			go func() {
				done <- func() error {
					resp, err := http.Post(b.url+"/v1/messages", "application/json", bytes.NewReader(body(user)))
					if err != nil {
						return err
					}
					defer resp.Body.Close()
					// Read the first answer up to its end as the client
					// sees it.
					if stream {
						sc := bufio.NewScanner(resp.Body)
						for sc.Scan() && !strings.Contains(sc.Text(), `"message_stop"`) {
						}
					} else {
						var m map[string]any
						if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
							return err
						}
					}
					// The next request, at once.
					next := body(user,
						map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_o1", "name": "Read", "input": map[string]any{"file_path": "/p/a.txt"}}}},
						map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_o1", "content": "alpha"}}})
					resp2, err := http.Post(b.url+"/v1/messages", "application/json", bytes.NewReader(next))
					if err != nil {
						return err
					}
					_, _ = io.Copy(io.Discard, resp2.Body)
					resp2.Body.Close()
					_, _ = io.Copy(io.Discard, resp.Body)
					return nil
				}()
			}()

			select {
			case <-g.entered:
			case err := <-done:
				t.Fatalf("the client finished (err %v) before the first response was recorded; upstream saw %d requests", err, len(f.requests()))
			case <-time.After(30 * time.Second):
				t.Fatal("the first response's record never started")
			}
			n := len(f.requests())
			release()
			testutil.True(t, n == 1, "the upstream saw the client's next request (%d requests) before the previous response was recorded", n)
			testutil.NoError(t, receive(t, done, "the client to finish"))

			// In the log: request 1's model request and the assistant's
			// tool call come before request 2's tool result.
			requireAnswerFirst(t, b, "toolu_o1")
		})
	}
}

// counter sums the values of a counter family whose labels include the
// given name=value pairs.
func counter(t testing.TB, b *bench, name string, labels ...string) float64 {
	t.Helper()
	mf, err := b.svc.Registry.Gather()
	testutil.NoError(t, err)
	sum := 0.0
	for _, fam := range mf {
		if fam.GetName() != name {
			continue
		}
	next:
		for _, m := range fam.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// receive waits for a value on c; the deadline only turns a hang into a
// failure naming what never came, it times nothing.
func receive[T any](t testing.TB, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// waitFor waits, through testutil.Eventually (with its options), until
// cond holds.
func waitFor(t testing.TB, what string, cond func() bool, opts ...testutil.Option) {
	t.Helper()
	testutil.Eventually(t, func() error {
		if !cond() {
			return fmt.Errorf("waiting for %s", what)
		}
		return nil
	}, opts...)
}

// TestUpstreamErrorKinds: a client's own cancel is not an upstream error,
// a 5xx is, and an upstream that sends no headers within the
// response-header timeout is answered 502 and counted as a timeout.
func TestUpstreamErrorKinds(t *testing.T) {
	t.Parallel()
	const errs = "prunesched_proxy_upstream_errors_total"
	body := `{"model":"m","max_tokens":10,"tools":[{"name":"Read"}],"messages":[{"role":"user","content":"hi"}]}`

	t.Run("client cancel", func(t *testing.T) {
		t.Parallel()
		entered := make(chan struct{})
		up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // so the server sees the proxy hang up
			close(entered)
			<-r.Context().Done()
		})
		b := setup(t, testPolicy(t), up, nil)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", b.url+"/v1/messages", strings.NewReader(body))
		errc := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
		<-entered
		cancel()
		testutil.True(t, <-errc != nil, "the canceled request succeeded")
		waitFor(t, "the proxy to see the cancel", func() bool {
			l := b.logs.String()
			return strings.Contains(l, "client went away") || strings.Contains(l, "proxy: upstream")
		})
		testutil.True(t, counter(t, b, errs) == 0, "a client's cancel counted as an upstream error")
	})

	t.Run("5xx", func(t *testing.T) {
		t.Parallel()
		up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"type":"error","error":{"type":"api_error","message":"down"}}`)
		})
		b := setup(t, testPolicy(t), up, nil)
		for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
			resp, err := http.Post(b.url+path, "application/json", strings.NewReader(body))
			testutil.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			testutil.True(t, resp.StatusCode == 503, "status %d", resp.StatusCode)
		}
		testutil.True(t, counter(t, b, errs, "kind", "5xx") == 2, "5xx not counted: %v", counter(t, b, errs))
	})

	t.Run("header timeout", func(t *testing.T) {
		t.Parallel()
		up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // so the server sees the proxy hang up
			<-r.Context().Done()               // never answers
		})
		b := setup(t, testPolicy(t), up, func(c *Config) { c.ResponseHeaderTimeout = 50 * time.Millisecond })
		resp, err := http.Post(b.url+"/v1/messages", "application/json", strings.NewReader(body))
		testutil.NoError(t, err)
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		testutil.True(t, resp.StatusCode == http.StatusBadGateway && strings.Contains(string(out), "upstream timeout"), "got %d %s", resp.StatusCode, out)
		testutil.True(t, counter(t, b, errs, "kind", "timeout") == 1, "timeout not counted")
	})
}

// TestRecordTimeoutReleasesResponse: a record slower than RecordTimeout
// does not hold the response: the client gets it whole and the timeout is
// counted.
func TestRecordTimeoutReleasesResponse(t *testing.T) {
	t.Parallel()
	f := &fakeUpstream{}
	g := &gateBackend{entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(g.release) })
	// The record's timer fires once the record is waiting at the gate:
	// no clock decides whether the request's own appends finished first.
	fire := make(chan time.Time)
	go func() {
		<-g.entered
		close(fire)
	}()
	b := setup(t, testPolicy(t), anthropicFake(f, func(map[string]any) turn { return turn{text: "ok"} }), func(c *Config) {
		g.Backend = c.Backend
		c.Backend = g
		c.RecordTimeout = time.Hour
		c.RecordTimer = func(time.Duration) <-chan time.Time { return fire }
	})
	body := `{"model":"m","max_tokens":10,"stream":true,"tools":[{"name":"Read"}],"messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(b.url+"/v1/messages", "application/json", strings.NewReader(body))
	testutil.NoError(t, err)
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	testutil.NoError(t, err)
	testutil.True(t, bytes.Contains(out, []byte("message_stop")), "response cut: %s", out)
	// The record runs after the response: it reaches the gate.
	receive(t, g.entered, "a record to start (none: the request failed open?)")
	waitFor(t, "the record timeout to be counted", func() bool { return counter(t, b, "prunesched_proxy_record_timeouts_total") == 1 })
}

// orderBackend checks that no request's facts are appended while the
// record of the previous response is still running: it fails the test when
// an append carrying a tool result starts before the first model request's
// append returned.
type orderBackend struct {
	Backend
	t        testing.TB
	recorded atomic.Bool
}

func (o *orderBackend) Append(ctx context.Context, evs []events.Event) ([]events.Event, error) {
	record := false
	for _, e := range evs {
		switch e.Data.(type) {
		case *events.ModelRequest:
			record = true
		case *events.ToolResult:
			if !o.recorded.Load() {
				o.t.Errorf("the next request appended its facts before the previous response was recorded")
			}
		}
	}
	out, err := o.Backend.Append(ctx, evs)
	if record && err == nil {
		o.recorded.Store(true)
	}
	return out, err
}

// TestRecordOffClientPath: the end of a response reaches the client while
// its record is still running (the test holds the record's append), and
// the client's next request, sent at once, waits for the record: its facts
// are appended after the recorded answer, the upstream sees it only then,
// and it is decided (not failed open).
func TestRecordOffClientPath(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			t.Parallel()
			f := &fakeUpstream{}
			g, release := newGate()
			o := &orderBackend{t: t}
			var held atomic.Bool
			held.Store(true)
			up := anthropicFake(f, func(req map[string]any) turn {
				if countToolResults(req) == 0 {
					return turn{tool: "Read", id: "toolu_r1", input: map[string]any{"file_path": "/p/a.txt"}}
				}
				if held.Load() {
					t.Errorf("the upstream got the next request while the previous response's record was held")
				}
				return turn{text: "done"}
			})
			b := setup(t, testPolicy(t), up, func(c *Config) {
				o.Backend = c.Backend
				g.Backend = o
				c.Backend = g
			})
			// Before Close (cleanups run last first).
			t.Cleanup(release)
			// The proxy again, telling when the next request arrives.
			arrived := make(chan struct{})
			var n atomic.Int32
			h := b.px.Handler()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 2 {
					close(arrived)
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)

			user := map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "read a.txt"}}}
			body := func(msgs ...any) []byte {
				out, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 100, "stream": stream,
					"tools": []any{map[string]any{"name": "Read"}}, "messages": msgs})
				return out
			}
			post := func(b []byte) ([]byte, error) {
				resp, err := http.Post(srv.URL+"/v1/messages", "application/json", bytes.NewReader(b))
				if err != nil {
					return nil, err
				}
				defer resp.Body.Close()
				return io.ReadAll(resp.Body)
			}
			// The first response, read to its end (EOF) while its record
			// is held.
			type answer struct {
				b   []byte
				err error
			}
			firstc := make(chan answer, 1)
			go func() {
				b, err := post(body(user))
				firstc <- answer{b, err}
			}()
			a := receive(t, firstc, "the response to end while its record is held (it does not: the record is on the client's path)")
			testutil.NoError(t, a.err)
			first := a.b
			end := `"tool_use"`
			if stream {
				end = "message_stop"
			}
			testutil.True(t, bytes.Contains(first, []byte(end)), "first response cut: %s", first)
			// The record, in the background, reaches its append.
			receive(t, g.entered, "a record to start (none: the request failed open?)")
			// The next request, at once; it arrives while the record is
			// still held.
			done := make(chan error, 1)
			go func() {
				_, err := post(body(user,
					map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_r1", "name": "Read", "input": map[string]any{"file_path": "/p/a.txt"}}}},
					map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_r1", "content": "alpha"}}}))
				done <- err
			}()
			select {
			case <-arrived:
			case err := <-done:
				t.Fatalf("the next request finished (err %v) before it arrived", err)
			}
			held.Store(false)
			release()
			testutil.NoError(t, receive(t, done, "the next request to finish"))
			testutil.True(t, len(f.requests()) == 2, "upstream saw %d requests", len(f.requests()))
			testutil.True(t, counter(t, b, "prunesched_proxy_requests_total", "outcome", "rendered") == 2,
				"requests not both rendered: fail open %v", counter(t, b, "prunesched_proxy_fail_open_total"))

			requireAnswerFirst(t, b, "toolu_r1")
		})
	}
}

// TestCloseFinishesRecords: Close waits for a record still running after
// its response ended (it is in the log afterwards), and when its context
// ends first it cancels the record, which fails (counted as a failure, not
// a timeout), and returns only once the record returned.
func TestCloseFinishesRecords(t *testing.T) {
	t.Parallel()
	for _, cancelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancelled=%v", cancelled), func(t *testing.T) {
			t.Parallel()
			f := &fakeUpstream{}
			g, release := newGate()
			b := setup(t, testPolicy(t), anthropicFake(f, func(map[string]any) turn { return turn{text: "ok"} }), func(c *Config) {
				g.Backend = c.Backend
				c.Backend = g
			})
			// Before Close (cleanups run last first).
			t.Cleanup(release)
			body := `{"model":"m","max_tokens":10,"stream":true,"tools":[{"name":"Read"}],"messages":[{"role":"user","content":"hi"}]}`
			resp, err := http.Post(b.url+"/v1/messages", "application/json", strings.NewReader(body))
			testutil.NoError(t, err)
			out, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			testutil.NoError(t, err)
			testutil.True(t, bytes.Contains(out, []byte("message_stop")), "response cut: %s", out)
			<-g.entered // the record runs, held, after the response ended

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if cancelled {
				cancel()
				testutil.True(t, b.px.Close(ctx) != nil, "Close with an ended context returned nil")
				testutil.True(t, counter(t, b, "prunesched_proxy_record_failures_total") == 1, "the cancelled record was not counted as failed")
				testutil.True(t, counter(t, b, "prunesched_proxy_record_timeouts_total") == 0, "a record cancelled by Close counted as a timeout")
				return
			}
			release()
			testutil.NoError(t, b.px.Close(ctx))
			testutil.True(t, counter(t, b, "prunesched_proxy_record_failures_total") == 0, "the record failed")
			var mrs int
			for _, s := range b.svc.Pipeline.Projection.Sessions() {
				evs, err := b.svc.Store.ReadSession(context.Background(), s.Tenant, s.Session)
				testutil.NoError(t, err)
				for _, e := range evs {
					if _, ok := e.Data.(*events.ModelRequest); ok {
						mrs++
					}
				}
			}
			testutil.True(t, mrs == 1, "%d model requests in the log after Close, want 1", mrs)
		})
	}
}

// requireAnswerFirst checks the log of the session holding the tool call
// item: the first response's model request and the assistant's tool call
// come before the next request's tool result.
func requireAnswerFirst(t testing.TB, b *bench, item string) {
	t.Helper()
	sessions := b.sessionsOf(t, events.DefaultTenant, item)
	testutil.True(t, len(sessions) == 1, "sessions %v", sessions)
	evs, err := b.svc.Store.ReadSession(context.Background(), events.DefaultTenant, sessions[0])
	testutil.NoError(t, err)
	var mr1, call, result uint64
	for _, e := range evs {
		switch e.Data.(type) {
		case *events.ModelRequest:
			if mr1 == 0 {
				mr1 = e.Seq
			}
		case *events.ToolCall:
			call = e.Seq
		case *events.ToolResult:
			result = e.Seq
		}
	}
	testutil.True(t, mr1 > 0 && call > 0 && result > 0 && mr1 < result && call < result,
		"log order: model request 1 at %d, tool call at %d, tool result at %d", mr1, call, result)
}
