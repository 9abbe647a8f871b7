package proxy

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prunesched/prunesched/internal/testutil"
)

// wroteConn is a server connection that keeps what the server wrote.
type wroteConn struct {
	net.Conn
	mu    *sync.Mutex
	wrote *bytes.Buffer
}

func (c wroteConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.wrote.Write(b)
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// wroteListener hands out wroteConns that all write to one buffer (the
// tests use one connection at a time).
type wroteListener struct {
	net.Listener
	mu    sync.Mutex
	wrote bytes.Buffer
}

func (l *wroteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return wroteConn{Conn: c, mu: &l.mu, wrote: &l.wrote}, nil
}

// written returns what the server has written so far.
func (l *wroteListener) written() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wrote.String()
}

// newWroteListener listens on loopback.
func newWroteListener(t *testing.T) *wroteListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.NoError(t, err)
	return &wroteListener{Listener: ln}
}

// serve serves h on l, configured by setup (nil: none), and returns its
// base URL.
func (l *wroteListener) serve(t *testing.T, h http.Handler, setup func(*http.Server)) string {
	t.Helper()
	srv := &http.Server{Handler: h}
	if setup != nil {
		setup(srv)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

// TestAfterSentRunsOnceResponseWritten: work a handler leaves with
// afterSent on a server set up by ConfigureServer runs once the server has
// written the response whole (a chunked response's last chunk included),
// after the handler returned, on a kept-alive connection and on one the
// server closes; without ConfigureServer, and on HTTP/2 (whose connection
// turns idle only once all its streams have ended), it runs as the handler
// returns, before the last chunk.
func TestAfterSentRunsOnceResponseWritten(t *testing.T) {
	t.Parallel()
	const lastChunk = "0\r\n\r\n"
	for _, tc := range []struct {
		name       string
		configured bool
		close, h2  bool
	}{
		{"kept alive", true, false, false},
		{"closed", true, true, false},
		{"not configured", false, false, false},
		{"HTTP/2", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wl := newWroteListener(t)
			type ran struct {
				written  string
				returned bool
				proto    int
			}
			seen := make(chan ran, 1)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var returned atomic.Bool
				defer returned.Store(true) // after sent.done
				sent := newAfterSent(r)
				defer sent.done()
				sent.later(func() { seen <- ran{wl.written(), returned.Load(), r.ProtoMajor} })
				w.Header().Set("Content-Type", "text/event-stream")
				if tc.close {
					w.Header().Set("Connection", "close")
				}
				_, _ = io.WriteString(w, "event: message_stop\ndata: {}\n\n")
				w.(http.Flusher).Flush()
			})
			setup := func(srv *http.Server) {
				if tc.configured {
					(&Proxy{}).ConfigureServer(srv)
				}
				if tc.h2 {
					srv.Protocols = new(http.Protocols)
					srv.Protocols.SetHTTP1(true)
					srv.Protocols.SetUnencryptedHTTP2(true)
				}
			}
			client := &http.Client{Transport: &http.Transport{}}
			if tc.h2 {
				p := new(http.Protocols)
				p.SetUnencryptedHTTP2(true)
				client.Transport = &http.Transport{Protocols: p}
			}
			t.Cleanup(client.CloseIdleConnections)
			resp, err := client.Post(wl.serve(t, h, setup)+"/", "application/json", strings.NewReader("{}"))
			testutil.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			testutil.NoError(t, err)
			resp.Body.Close()
			testutil.True(t, strings.Contains(string(body), "message_stop"), "body %q", body)
			got := <-seen
			afterSent := tc.configured && !tc.h2
			testutil.True(t, got.proto == map[bool]int{false: 1, true: 2}[tc.h2], "served over HTTP/%d", got.proto)
			testutil.True(t, got.returned == afterSent, "the work ran after the handler returned: %v", got.returned)
			if !tc.h2 {
				testutil.True(t, strings.HasSuffix(got.written, lastChunk) == afterSent,
					"configured %v: when the work ran, the server had written %q", tc.configured, got.written)
			}
		})
	}
}

// TestRecordStartsOnceResponseWritten: the proxy served as the proxy
// command serves it (ConfigureServer) starts a pending record's goroutine
// only once its response, a streamed answer, is written whole.
func TestRecordStartsOnceResponseWritten(t *testing.T) {
	t.Parallel()
	f := &fakeUpstream{}
	b := setup(t, testPolicy(t), anthropicFake(f, func(map[string]any) turn { return turn{text: "done"} }), nil)
	wl := newWroteListener(t)
	started := make(chan string, 4)
	b.px.recordGo = func(fn func()) {
		started <- wl.written()
		go fn()
	}
	url := wl.serve(t, b.px.Handler(), b.px.ConfigureServer)
	req, err := http.NewRequest("POST", url+"/v1/messages", strings.NewReader(
		`{"model":"m","max_tokens":10,"stream":true,"tools":[{"name":"Read"}],"messages":[{"role":"user","content":"task"}]}`))
	testutil.NoError(t, err)
	req.Header.Set("x-api-key", secretKey)
	req.Header.Set(SessionHeader, "sent-record")
	resp, err := http.DefaultClient.Do(req)
	testutil.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	testutil.NoError(t, err)
	resp.Body.Close()
	testutil.True(t, resp.StatusCode == 200 && strings.Contains(string(body), "message_stop"), "status %d, body %q", resp.StatusCode, body)
	got := <-started
	testutil.True(t, strings.HasSuffix(got, "0\r\n\r\n"), "the record started before the response was written whole: %q", got)
}
