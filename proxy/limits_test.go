package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveWith serves the bench's proxy on a second server with the given
// server settings and returns its URL.
func serveWith(t *testing.T, b *bench, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require_NoError(t, err)
	srv.Handler = b.px.Handler()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestStreamExemptFromWriteTimeout: a streamed answer is not cut off by
// the server's write timeout (here one nanosecond, so any write bounded by
// it fails): the proxy bounds each write instead, so the client receives
// the whole stream unchanged.
func TestStreamExemptFromWriteTimeout(t *testing.T) {
	t.Parallel()
	f := &fakeUpstream{}
	b := setup(t, testPolicy(t), anthropicFake(f, readScript("/p")), nil)
	url := serveWith(t, b, &http.Server{WriteTimeout: time.Nanosecond})
	body := []byte(`{"model":"m","stream":true,"max_tokens":10,"tools":[{"name":"Read","input_schema":{"type":"object"}}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`)
	get := func(url string) []byte {
		req, _ := http.NewRequest("POST", url+"/v1/messages", bytes.NewReader(body))
		req.Header.Set("X-Claude-Code-Session-Id", "wt-1")
		resp, err := http.DefaultClient.Do(req)
		require_NoError(t, err)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		require_NoError(t, err)
		return out
	}
	direct := get(b.upstream.URL)
	via := get(url)
	norm := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("msg_fake_2"), []byte("msg_fake_1")) }
	require_True(t, len(direct) > 0 && bytes.Equal(norm(direct), norm(via)), "stream cut or changed:\n%s\n---\n%s", direct, via)
}

// TestProxyBodyTooLarge: a body over the maximum gets 413 naming the
// limit (it got 400 "could not read the request body").
func TestProxyBodyTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t, testPolicy(t), anthropicFake(&fakeUpstream{}, readScript("/p")), func(c *Config) { c.MaxBodyBytes = 1000 })
	resp, err := http.Post(b.url+"/v1/messages", "application/json", strings.NewReader(`{"model":"m","messages":[],"pad":"`+strings.Repeat("x", 2000)+`"}`))
	require_NoError(t, err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	require_True(t, resp.StatusCode == http.StatusRequestEntityTooLarge && strings.Contains(string(out), "1000 bytes"),
		"oversized body: %d %s", resp.StatusCode, out)
}

// TestProxySlowBodyCutOff: a client that stalls mid-body is answered 408
// and disconnected once the read timeout passes (nothing is timed: the
// test waits for the server to end the connection; the deadline is a
// guard against a hung run).
func TestProxySlowBodyCutOff(t *testing.T) {
	t.Parallel()
	b := setup(t, testPolicy(t), anthropicFake(&fakeUpstream{}, readScript("/p")), nil)
	url := serveWith(t, b, &http.Server{ReadTimeout: 100 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	require_NoError(t, err)
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":")
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require_NoError(t, err)
	out, _ := io.ReadAll(resp.Body)
	require_True(t, resp.StatusCode == http.StatusRequestTimeout && strings.Contains(string(out), "read timeout"), "slow body: %d %s", resp.StatusCode, out)
	_, err = conn.Read(make([]byte, 1))
	require_True(t, err != nil, "the connection stayed open")
}
