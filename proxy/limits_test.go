package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/httplimit"
	"github.com/prunesched/prunesched/internal/testutil"
)

// serveWith serves the bench's proxy on a second server with the given
// server settings and returns its URL.
func serveWith(t *testing.T, b *bench, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.NoError(t, err)
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
		testutil.NoError(t, err)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		testutil.NoError(t, err)
		return out
	}
	direct := get(b.upstream.URL)
	via := get(url)
	norm := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("msg_fake_2"), []byte("msg_fake_1")) }
	testutil.True(t, len(direct) > 0 && bytes.Equal(norm(direct), norm(via)), "stream cut or changed:\n%s\n---\n%s", direct, via)
}

// TestProxyBodyOverLimitStreamed: a body over the proxy's body limit (the
// maximum, or the whole in-flight budget) fails open: it goes upstream
// byte for byte, streamed (a known length is not read before it goes; an
// unknown one is held only up to the limit), the client gets the
// upstream's answer, nothing is recorded, and the budget is whole again
// afterwards. It was 413.
func TestProxyBodyOverLimitStreamed(t *testing.T) {
	t.Parallel()
	up := &fakeUpstream{}
	budget := httplimit.NewBudget(4000)
	b := setup(t, testPolicy(t), anthropicFake(up, readScript("/p")), func(c *Config) { c.MaxBodyBytes = 1000; c.Bodies = budget })
	body := `{"model":"m","max_tokens":10,"tools":[{"name":"Read"}],"messages":[{"role":"user","content":"hi"}],"pad":"` + strings.Repeat("x", 5000) + `"}`
	for i, r := range []io.Reader{strings.NewReader(body), io.MultiReader(strings.NewReader(body))} {
		resp, err := http.Post(b.url+"/v1/messages", "application/json", r)
		testutil.NoError(t, err)
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		testutil.True(t, resp.StatusCode == http.StatusOK, "body %d over the limit: %d %s", i, resp.StatusCode, out)
		reqs := up.requests()
		testutil.True(t, len(reqs) == i+1 && string(reqs[i].body) == body, "body %d did not reach the upstream unchanged", i)
	}
	refs, err := b.svc.Store.Sessions(context.Background())
	testutil.NoError(t, err)
	testutil.True(t, len(refs) == 0, "a body over the limit was recorded: %v", refs)
	testutil.True(t, budget.Used() == 0, "budget still holds %d bytes", budget.Used())
	testutil.True(t, strings.Contains(b.logs.String(), "forwarded unchanged as a stream"), "fail-open not logged")
}

// blockingBackend holds Append until gate is closed, and says when an
// Append has started.
type blockingBackend struct {
	Backend
	entered chan struct{}
	once    sync.Once
	gate    chan struct{}
}

func (bb *blockingBackend) Append(ctx context.Context, evs []events.Event) ([]events.Event, error) {
	bb.once.Do(func() { close(bb.entered) })
	<-bb.gate
	return bb.Backend.Append(ctx, evs)
}

// TestProxyBackgroundWorkHoldsBudget: a request that fails open on its
// time budget goes upstream at once, but its body's bytes stay in the
// in-flight budget while the work on it goes on in the background (the
// append), and are given back when it ends: the background cannot hold
// bodies the budget no longer counts. Nothing is timed: the test waits
// for the append to start, and for the budget to empty once it is let go.
func TestProxyBackgroundWorkHoldsBudget(t *testing.T) {
	t.Parallel()
	budget := httplimit.NewBudget(1 << 20)
	bb := &blockingBackend{entered: make(chan struct{}), gate: make(chan struct{})}
	b := setup(t, testPolicy(t), anthropicFake(&fakeUpstream{}, readScript("/p")), func(c *Config) {
		bb.Backend = c.Backend
		c.Backend, c.Bodies, c.Budget = bb, budget, time.Millisecond
	})
	body := `{"model":"m","max_tokens":10,"tools":[{"name":"Read"}],"messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(b.url+"/v1/messages", "application/json", strings.NewReader(body))
	testutil.NoError(t, err)
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	testutil.True(t, resp.StatusCode == http.StatusOK, "status %d", resp.StatusCode)
	select {
	case <-bb.entered:
	case <-time.After(time.Minute): // guard against a hung run, not a measurement
		t.Fatal("the append never started")
	}
	testutil.True(t, budget.Used() == int64(len(body)), "budget holds %d bytes while the append runs, want %d", budget.Used(), len(body))
	close(bb.gate)
	testutil.Eventually(t, func() error {
		if n := budget.Used(); n != 0 {
			return fmt.Errorf("budget still holds %d bytes after the append", n)
		}
		return nil
	})
}

// TestDecodeBodyBounded: a gzip body that decodes to more than the body
// limit is refused (the proxy then fails open) instead of inflating
// without bound.
func TestDecodeBodyBounded(t *testing.T) {
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write(bytes.Repeat([]byte("x"), 1<<20))
	testutil.NoError(t, zw.Close())
	_, _, err := decodeBody(zb.Bytes(), "gzip", 1000)
	testutil.True(t, err != nil && strings.Contains(err.Error(), "over the 1000-byte body limit"), "1 MiB of gzip under a 1000-byte limit: %v", err)
	out, enc, err := decodeBody(zb.Bytes(), "gzip", 2<<20)
	testutil.True(t, err == nil && enc && len(out) == 1<<20, "within the limit: %d bytes, %v", len(out), err)
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
	testutil.NoError(t, err)
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":")
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	testutil.NoError(t, err)
	out, _ := io.ReadAll(resp.Body)
	testutil.True(t, resp.StatusCode == http.StatusRequestTimeout && strings.Contains(string(out), "read timeout"), "slow body: %d %s", resp.StatusCode, out)
	_, err = conn.Read(make([]byte, 1))
	testutil.True(t, err != nil, "the connection stayed open")
}

// TestLargeToolResultNotCopied: a cached parse keeps a large tool
// result's raw value in place in the body (a copy would hold a large output
// a third time, beside the body and its decoded text) and copies a small
// one (so a remembered block does not keep its body alive). A parse left
// for after forwarding (parseCheckedLater) keeps both in place until
// cacheParse, and makes the copy then.
func TestLargeToolResultNotCopied(t *testing.T) {
	for _, later := range []bool{false, true} {
		for _, n := range []int{100, largeRaw} {
			body := []byte(`{"model":"m","max_tokens":10,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"go"},` +
				`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"` + strings.Repeat("x", n) + `"}]}]}`)
			pc := &parseCache{}
			conv, err := parseCheckedLater(APIAnthropic, body, pc, later)
			testutil.NoError(t, err)
			var res *block
			for _, b := range conv.blocks {
				if b.kind == bToolResult {
					res = b
				}
			}
			at := &body[bytes.Index(body, []byte(`"xxx`))]
			inBody := func() bool { return &res.raw[0] == at }
			testutil.True(t, len(res.raw) == n+2, "tool result raw of %d bytes, want %d", len(res.raw), n+2)
			if later {
				testutil.True(t, inBody() && len(pc.entries) == 0, "later, %d-byte output: raw in the body %v, %d cached before cacheParse", n, inBody(), len(pc.entries))
				conv.cacheParse()
			}
			testutil.True(t, len(pc.entries) == 1, "later %v: %d cached", later, len(pc.entries))
			testutil.True(t, inBody() == (n >= largeRaw), "later %v, %d-byte output: raw in the body %v", later, n, inBody())
		}
	}
}
