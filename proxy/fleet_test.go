package proxy

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/jsask/jsasktest"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"

	"github.com/prunesched/prunesched/internal/service"
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
	testutil.NoError(t, err)
	t.Cleanup(svc.Close)
	js := svc.Store.JS()
	key, err := NewIdentityKey()
	testutil.NoError(t, err)
	other, err := NewIdentityKey()
	testutil.NoError(t, err)
	testutil.NoError(t, JoinFleet(ctx, js, key, 1))
	testutil.NoError(t, JoinFleet(ctx, js, append([]byte(nil), key...), 1))
	err = JoinFleet(ctx, js, other, 1)
	testutil.True(t, errors.Is(err, ErrFleetKey), "another key joined: %v", err)
	msg := err.Error()
	testutil.True(t, strings.Contains(msg, KeyFingerprint(other)) && strings.Contains(msg, KeyFingerprint(key)) && strings.Contains(msg, "proxy-identity.key"),
		"the error names neither fingerprint nor the fix: %s", msg)
	testutil.True(t, !strings.Contains(msg, string(other)) && !strings.Contains(strings.ToLower(msg), hex.EncodeToString(other)), "the error shows the key")
	err = JoinFleet(ctx, js, nil, 1)
	testutil.True(t, errors.Is(err, ErrFleetKey), "a random key joined: %v", err)
	testutil.True(t, KeyFingerprint(key) != KeyFingerprint(other) && len(KeyFingerprint(key)) == 16, "fingerprints")
}

// TestJoinFleetReadsTheKeyAtTheLeader: a proxy joining a fleet reads the
// fleet's key fingerprint at the bucket's stream leader (a key-value get
// may be answered by a replica, and one behind the leader may not hold
// the key yet: the proxy would refuse to start with the right key), and asks
// again when the read goes unanswered (the leader being elected).
func TestJoinFleetReadsTheKeyAtTheLeader(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Policy: testPolicy(t)})
	testutil.NoError(t, err)
	t.Cleanup(svc.Close)
	key, err := NewIdentityKey()
	testutil.NoError(t, err)
	other, err := NewIdentityKey()
	testutil.NoError(t, err)
	testutil.NoError(t, JoinFleet(ctx, svc.Store.JS(), key, 1))

	nc := svc.Store.JS().Conn()
	r := jsasktest.Start(t, nc)
	leaderGet := "STREAM.MSG.GET.KV_" + FleetBucket
	r.Arm(jsasktest.FirstOf(leaderGet))
	js := r.JetStream(t, nc)
	testutil.NoError(t, JoinFleet(ctx, js, key, 1))
	testutil.True(t, r.Count(leaderGet) >= 2, "%d reads at the leader, want the unanswered one and another", r.Count(leaderGet))
	err = JoinFleet(ctx, js, other, 1)
	testutil.True(t, errors.Is(err, ErrFleetKey), "another key joined: %v", err)
}

// TestNoWorkerBounded: with no eligibility or scheduler worker running
// (they crashed, or were never started), no proxy waits for one beyond
// its bounds. Deciding through the log (LogFirst), the request waits for
// the workers up to the budget and then goes upstream unchanged (failing
// open at stage timeout). Deciding in memory in a fleet, requests are
// decided and pruned without the workers, the proxy publishes their
// applications itself, and no response's end waits for a worker.
func TestNoWorkerBounded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pol := testPolicy(t)
	svc, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Policy: pol, Workers: []string{"projection"}})
	testutil.NoError(t, err)
	t.Cleanup(svc.Close)
	f := &fakeUpstream{}
	up := httptest.NewServer(okUpstream(f))
	t.Cleanup(up.Close)
	start := func(mod func(*Config)) (string, *prometheus.Registry, *Proxy) {
		reg := prometheus.NewRegistry()
		cfg := Config{Upstream: up.URL, Backend: service.NewProxyBackend(svc.Store, svc.Pipeline), Registry: reg, Policy: &pol}
		mod(&cfg)
		px, err := New(cfg)
		testutil.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = px.Close(ctx)
		})
		srv := httptest.NewServer(px.Handler())
		t.Cleanup(srv.Close)
		return srv.URL, reg, px
	}
	body := rereadBody
	send := func(url, session string, n int) string {
		t.Helper()
		return postSession(t, ctx, f, url, session, strings.NewReader(body(n)))
	}
	total := func(reg *prometheus.Registry, name string) float64 {
		mfs, err := reg.Gather()
		testutil.NoError(t, err)
		sum := 0.0
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.GetMetric() {
					sum += m.GetCounter().GetValue()
				}
			}
		}
		return sum
	}

	logFirst, lreg, _ := start(func(c *Config) { c.LogFirst, c.Budget = true, 100*time.Millisecond })
	testutil.True(t, send(logFirst, "lf", 1) == body(1), "log first: the body changed")
	testutil.True(t, total(lreg, "prunesched_proxy_fail_open_total") == 1, "log first: the wait for the workers did not fail open")

	fleet, freg, fpx := start(func(c *Config) { c.Fleet, c.Budget = true, time.Hour })
	send(fleet, "fl", 1)
	pruned := send(fleet, "fl", 2)
	testutil.True(t, pruned != body(2) && strings.Contains(pruned, "prunesched"), "fleet: the duplicate read was not pruned without the workers: %s", pruned)
	testutil.True(t, total(freg, "prunesched_proxy_fail_open_total") == 0, "fleet: a request failed open")
	testutil.NoError(t, fpx.Flush(ctx))
	evs, err := svc.Store.ReadSession(ctx, "default", "fl")
	testutil.NoError(t, err)
	apps := 0
	for _, e := range evs {
		if _, ok := e.Data.(*events.Application); ok {
			apps++
		}
	}
	testutil.True(t, apps == 1, "fleet: %d applications in the log without the workers, want the proxy's 1", apps)
}

// leaderCounter is a fleet proxy's Backend that counts the reads of a
// session's last fact at the stream's leader.
type leaderCounter struct {
	*service.ProxyBackend
	reads atomic.Int64
	// asked receives a value at each read, when there is room.
	asked chan struct{}
}

func (b *leaderCounter) LastFactSeq(ctx context.Context, tenant, session string) (uint64, error) {
	b.reads.Add(1)
	select {
	case b.asked <- struct{}{}:
	default:
	}
	return b.ProxyBackend.LastFactSeq(ctx, tenant, session)
}

// TestFleetAsksTheLeaderOnce: requests of one conversation alternate
// between two fleet proxies, and each request asks the stream's leader
// for the session's last fact once: a session's first request at a
// proxy reads it while the state is built (not once more for the lane
// and again for the request), and a later one reads it while its body is
// read (earlyRead), its catch-up taking that answer: its body is sent
// only once the proxy has asked. The pruned bodies are those of one
// proxy.
func TestFleetAsksTheLeaderOnce(t *testing.T) {
	t.Parallel()
	r := newFleetRig(t)
	ctx, svc, f := r.ctx, r.svc, r.f
	start := func(fleet bool) (string, *leaderCounter, *Proxy) {
		lc := &leaderCounter{ProxyBackend: service.NewProxyBackend(svc.Store, svc.Pipeline), asked: make(chan struct{}, 1)}
		url, px := r.start(lc, fleet)
		return url, lc, px
	}
	body := rereadBody
	// send posts request n; with asked, its body only once the proxy
	// has asked the leader.
	send := func(url, session string, n int, asked chan struct{}) string {
		t.Helper()
		return postSession(t, ctx, f, url, session, bodyAfter(ctx, body(n), asked))
	}
	one, _, _ := start(false)
	a, ca, apx := start(true)
	b, cb, bpx := start(true)
	for n := range 6 {
		want := send(one, "one", n, nil)
		url, lc, px := a, ca, apx
		if n%2 == 1 {
			url, lc, px = b, cb, bpx
		}
		if n >= 2 {
			// The proxy's tail has delivered the other proxy's facts: a
			// request decided while its tail still lagged the log is
			// decided again after reading the session (errNotCurrent),
			// which asks the leader a second time by design.
			last, err := svc.Store.LastSeq(ctx, events.DefaultTenant, "fleet", events.KindFact)
			testutil.NoError(t, err)
			r.tailAt(px, last)
		}
		before := lc.reads.Load()
		var asked chan struct{}
		if n >= 2 {
			// Each proxy holds the session's state since its first.
			asked = lc.asked
		}
		select {
		case <-lc.asked:
		default:
		}
		got := send(url, "fleet", n, asked)
		testutil.True(t, got == want, "request %d: the fleet forwarded another body than one proxy:\n%s\nwant\n%s", n, got, want)
		testutil.True(t, lc.reads.Load()-before == 1, "request %d asked the leader %d times", n, lc.reads.Load()-before)
	}
}

// bodyAfter is a request body that a client sends only once ready
// receives (nil: at once).
func bodyAfter(ctx context.Context, body string, ready <-chan struct{}) io.Reader {
	if ready == nil {
		return strings.NewReader(body)
	}
	pr, pw := io.Pipe()
	go func() {
		select {
		case <-ready:
			_, _ = io.WriteString(pw, body)
			pw.Close()
		case <-ctx.Done():
			pw.CloseWithError(ctx.Err())
		}
	}()
	return pr
}

// buildWatcher is a fleet proxy's Backend that tells when a session's
// state is being built (its warm start asks for the session's first
// fact, its rebuild reads the session at the leader), and counts the
// reads of the session's last fact at the leader and of whole sessions.
// With older, it answers that a session's first fact is older than any
// the proxy's tail saw (a session that began before it ran).
type buildWatcher struct {
	*service.ProxyBackend
	// building receives a value at each build, when there is room.
	building        chan struct{}
	reads, rebuilds atomic.Int64
	older           bool
}

func (b *buildWatcher) built() {
	select {
	case b.building <- struct{}{}:
	default:
	}
}

func (b *buildWatcher) FirstFactSeq(ctx context.Context, tenant, session string) (uint64, error) {
	b.built()
	seq, err := b.ProxyBackend.FirstFactSeq(ctx, tenant, session)
	if b.older && seq > 1 {
		seq = 1
	}
	return seq, err
}

func (b *buildWatcher) ReadSessionLeader(ctx context.Context, tenant, session string) ([]events.Event, error) {
	b.built()
	b.rebuilds.Add(1)
	return b.ProxyBackend.ReadSessionLeader(ctx, tenant, session)
}

func (b *buildWatcher) LastFactSeq(ctx context.Context, tenant, session string) (uint64, error) {
	b.reads.Add(1)
	return b.ProxyBackend.LastFactSeq(ctx, tenant, session)
}

// TestFleetBuildsAsTheHeadersArrive: a session's first request at a
// proxy of a fleet has its state built as its headers arrive, before its
// body (earlyBuild): each such request's body is sent only once the
// proxy has started building the session (a new session read from the
// log at a; a warm start from the tail's copy at b; a read of the whole
// session at c, which started after the session did; their span
// references wait for the body's outputs: TestBodyOutputsLater). The
// request asks the leader for the session's last fact once, as without
// the early build. The forwarded bodies are those of one proxy.
func TestFleetBuildsAsTheHeadersArrive(t *testing.T) {
	t.Parallel()
	r := newFleetRig(t)
	ctx, svc, f := r.ctx, r.svc, r.f
	watch := func() *buildWatcher {
		return &buildWatcher{ProxyBackend: service.NewProxyBackend(svc.Store, svc.Pipeline), building: make(chan struct{}, 1)}
	}
	one, _ := r.start(service.NewProxyBackend(svc.Store, svc.Pipeline), false)
	wa, wb, wc := watch(), watch(), watch()
	a, apx := r.start(wa, true)
	b, bpx := r.start(wb, true)
	var c string
	var cpx *Proxy
	order := []*buildWatcher{wa, wb, wc, wa, wb, wc}
	for n := range order {
		want := postSession(t, ctx, f, one, "one", strings.NewReader(rereadBody(n)))
		w := order[n]
		url, px := map[*buildWatcher]string{wa: a, wb: b}[w], map[*buildWatcher]*Proxy{wa: apx, wb: bpx}[w]
		if w == wc {
			if c == "" {
				// c starts after the session did: no warm copy.
				c, cpx = r.start(wc, true)
			}
			url, px = c, cpx
		}
		var ready chan struct{}
		if n < 3 {
			// The session's first request at this proxy.
			ready = w.building
		} else {
			// The proxy's tail has delivered the other proxies' facts
			// (as in TestFleetAsksTheLeaderOnce): a request decided while
			// its tail still lagged the log is decided again after
			// reading the session, which asks the leader a second time
			// by design.
			last, err := svc.Store.LastSeq(ctx, events.DefaultTenant, "fleet", events.KindFact)
			testutil.NoError(t, err)
			r.tailAt(px, last)
		}
		reads := w.reads.Load()
		got := postSession(t, ctx, f, url, "fleet", bodyAfter(ctx, rereadBody(n), ready))
		testutil.True(t, got == want, "request %d: the fleet forwarded another body than one proxy:\n%s\nwant\n%s", n, got, want)
		testutil.True(t, w.reads.Load()-reads == 1, "request %d asked the leader %d times", n, w.reads.Load()-reads)
	}
}

// TestFleetWarmCopyRefused: a proxy whose warm copy of a session the
// log says is not whole (the session's first fact is older than the
// copy's) feeds the copy while it asks, then drops what it fed and reads
// the session from the log: its forwarded bodies are those of one proxy.
func TestFleetWarmCopyRefused(t *testing.T) {
	t.Parallel()
	r := newFleetRig(t)
	ctx, svc, f := r.ctx, r.svc, r.f
	one, _ := r.start(service.NewProxyBackend(svc.Store, svc.Pipeline), false)
	a, _ := r.start(service.NewProxyBackend(svc.Store, svc.Pipeline), true)
	wb := &buildWatcher{ProxyBackend: service.NewProxyBackend(svc.Store, svc.Pipeline), older: true}
	b, bpx := r.start(wb, true)
	for n := range 4 {
		url := a
		if n%2 == 1 {
			url = b
		}
		if n == 1 {
			last, err := svc.Store.LastSeq(ctx, events.DefaultTenant, "fleet", events.KindFact)
			testutil.NoError(t, err)
			r.tailAt(bpx, last)
			_, _, warm := bpx.tail.warmed(events.DefaultTenant, "fleet")
			testutil.True(t, warm, "b's tail holds no warm copy of the session")
		}
		want := postSession(t, ctx, f, one, "one", strings.NewReader(rereadBody(n)))
		got := postSession(t, ctx, f, url, "fleet", strings.NewReader(rereadBody(n)))
		testutil.True(t, got == want, "request %d: the fleet forwarded another body than one proxy:\n%s\nwant\n%s", n, got, want)
	}
	testutil.True(t, wb.rebuilds.Load() == 1, "b read the session whole %d times, want once (its warm copy refused)", wb.rebuilds.Load())
}

// TestFleetBuildWithoutBody: a session's state built as a request's
// headers arrived, whose body then does not parse, is built all the
// same (its outputs read from the blob store): the request goes upstream
// unchanged, and the session's next request at that proxy is decided on
// the state built, as by one proxy.
func TestFleetBuildWithoutBody(t *testing.T) {
	t.Parallel()
	r := newFleetRig(t)
	ctx, svc, f := r.ctx, r.svc, r.f
	one, _ := r.start(service.NewProxyBackend(svc.Store, svc.Pipeline), false)
	wa, wb := &buildWatcher{ProxyBackend: service.NewProxyBackend(svc.Store, svc.Pipeline)}, &buildWatcher{ProxyBackend: service.NewProxyBackend(svc.Store, svc.Pipeline), building: make(chan struct{}, 1)}
	a, _ := r.start(wa, true)
	b, _ := r.start(wb, true)
	for n := range 2 {
		want := postSession(t, ctx, f, one, "one", strings.NewReader(rereadBody(n)))
		got := postSession(t, ctx, f, a, "fleet", strings.NewReader(rereadBody(n)))
		testutil.True(t, got == want, "request %d at a: the fleet forwarded another body than one proxy", n)
	}
	broken := `{"model":"m","messages":[`
	got := postSession(t, ctx, f, b, "fleet", bodyAfter(ctx, broken, wb.building))
	testutil.True(t, got == broken, "a body that does not parse was changed: %s", got)
	want := postSession(t, ctx, f, one, "one", strings.NewReader(rereadBody(2)))
	got = postSession(t, ctx, f, b, "fleet", strings.NewReader(rereadBody(2)))
	testutil.True(t, got == want, "request 2 at b: the fleet forwarded another body than one proxy:\n%s\nwant\n%s", got, want)
}

// rereadBody is an Anthropic request whose conversation reads one file n
// times: each read after the first a provable duplicate.
func rereadBody(n int) string {
	file := strings.Repeat(`func A() int { return 1 } // the same file, read again\n`, 40)
	msgs := `{"role":"user","content":"hello"}`
	for i := range n {
		msgs += fmt.Sprintf(`,{"role":"assistant","content":[{"type":"tool_use","id":"t%d","name":"Read","input":{"file_path":"/a.go"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"%s"}]}`, i, i, file)
	}
	return `{"model":"m","max_tokens":10,"tools":[{"name":"Read"}],"messages":[` + msgs + `]}`
}

// postSession posts body to the proxy at url as a Messages request of
// session, reads the answer, and returns the body f's upstream got last.
func postSession(t *testing.T, ctx context.Context, f *fakeUpstream, url, session string, body io.Reader) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/messages", body)
	testutil.NoError(t, err)
	req.Header.Set(SessionHeader, session)
	resp, err := http.DefaultClient.Do(req)
	testutil.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	testutil.True(t, resp.StatusCode == 200, "status %d", resp.StatusCode)
	reqs := f.requests()
	return string(reqs[len(reqs)-1].body)
}

// fleetRig is a service on an embedded JetStream, a fake upstream and an
// identity key, for proxies of one fleet (start) and one proxy to compare
// with.
type fleetRig struct {
	t   *testing.T
	ctx context.Context
	svc *service.Service
	f   *fakeUpstream
	up  *httptest.Server
	key []byte
	pol policy.Policy
}

func newFleetRig(t *testing.T) *fleetRig {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	r := &fleetRig{t: t, ctx: ctx, pol: testPolicy(t), f: &fakeUpstream{}}
	var err error
	r.svc, err = service.Start(ctx, service.Config{DataDir: t.TempDir(), Policy: r.pol})
	testutil.NoError(t, err)
	t.Cleanup(r.svc.Close)
	r.up = httptest.NewServer(okUpstream(r.f))
	t.Cleanup(r.up.Close)
	r.key, err = NewIdentityKey()
	testutil.NoError(t, err)
	return r
}

// start starts a proxy on be, in the fleet or alone, and returns its
// URL; a proxy of the fleet once its tail follows the log (as it does
// long before a session's requests in a running fleet).
func (r *fleetRig) start(be Backend, fleet bool) (string, *Proxy) {
	t := r.t
	// No budget a busy machine could exhaust: a request past it fails
	// open (its body unchanged, its record another than one proxy's).
	px, err := New(Config{Upstream: r.up.URL, Backend: be, Fleet: fleet, IdentityKey: r.key, Registry: prometheus.NewRegistry(), Policy: &r.pol, Budget: time.Hour})
	testutil.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = px.Close(ctx)
	})
	if fleet {
		r.tailAt(px, 0)
	}
	srv := httptest.NewServer(px.Handler())
	t.Cleanup(srv.Close)
	return srv.URL, px
}

// tailAt waits until the proxy's tail follows the log and has delivered
// stream sequence seq.
func (r *fleetRig) tailAt(px *Proxy, seq uint64) {
	r.t.Helper()
	waitFor(r.t, fmt.Sprintf("the proxy's tail to deliver seq %d", seq), func() bool {
		px.tail.mu.Lock()
		delivered := px.tail.seq
		px.tail.mu.Unlock()
		return px.tail.running() && delivered >= seq
	}, testutil.Until(r.ctx))
}

// laggingReplica is a fleet proxy's Backend whose reads that any replica
// may bound answer as a replica behind the stream's leader would: once
// stale is set, ReadSession (bounded by the session's last event as a
// direct get gives it, were the stream to allow them) stops at stream
// sequence stale. What the leader answers (LastFactSeq, ReadSessionLeader,
// the tail) is current.
type laggingReplica struct {
	*service.ProxyBackend
	stale atomic.Uint64
}

func (b *laggingReplica) ReadSession(ctx context.Context, tenant, session string) ([]events.Event, error) {
	evs, err := b.ProxyBackend.ReadSession(ctx, tenant, session)
	if stale := b.stale.Load(); err == nil && stale > 0 {
		i := 0
		for i < len(evs) && evs[i].Seq <= stale {
			i++
		}
		evs = evs[:i]
	}
	return evs, err
}

// TestFleetRebuildReadsThroughTheLeader: a proxy whose tail has passed a
// session's newest request (taken by another proxy) before it meets the
// session, without a warm copy, builds the session from a read bounded
// at the stream's leader: a read bounded by a replica behind the leader
// would stop short of that request, which the tail, having passed it
// before the session was watched, never feeds, and the proxy would
// decide the next request on a view without it. Its forwarded bodies are
// those of one proxy.
func TestFleetRebuildReadsThroughTheLeader(t *testing.T) {
	t.Parallel()
	r := newFleetRig(t)
	ctx, svc, f := r.ctx, r.svc, r.f
	start, tailAt := r.start, r.tailAt
	lastFact := func() uint64 {
		t.Helper()
		seq, err := svc.Store.LastSeq(ctx, events.DefaultTenant, "fleet", events.KindFact)
		testutil.NoError(t, err)
		return seq
	}
	body := rereadBody
	one, _ := start(service.NewProxyBackend(svc.Store, svc.Pipeline), false)
	b, _ := start(service.NewProxyBackend(svc.Store, svc.Pipeline), true)
	for n := range 2 {
		want := postSession(t, ctx, f, one, "one", strings.NewReader(body(n)))
		got := postSession(t, ctx, f, b, "fleet", strings.NewReader(body(n)))
		testutil.True(t, got == want, "request %d at b: the fleet forwarded another body than one proxy", n)
	}
	// The replica a's reads may reach stops here: request 2 is not in it.
	lagging := &laggingReplica{ProxyBackend: service.NewProxyBackend(svc.Store, svc.Pipeline)}
	lagging.stale.Store(lastFact())
	// a starts after the session did (no warm copy: it reads the session
	// at its first request), and its tail passes request 2, which b takes.
	a, apx := start(lagging, true)
	want := postSession(t, ctx, f, one, "one", strings.NewReader(body(2)))
	got := postSession(t, ctx, f, b, "fleet", strings.NewReader(body(2)))
	testutil.True(t, got == want, "request 2 at b: the fleet forwarded another body than one proxy")
	tailAt(apx, lastFact())
	for n := 3; n < 5; n++ {
		want := postSession(t, ctx, f, one, "one", strings.NewReader(body(n)))
		got := postSession(t, ctx, f, a, "fleet", strings.NewReader(body(n)))
		testutil.True(t, got == want, "request %d at a: the fleet forwarded another body than one proxy:\n%s\nwant\n%s", n, got, want)
	}
}

// TestFleetConfigRefused: a proxy told it is in a fleet refuses to start
// where the fleet's rules could not run (deciding through the pipeline, or
// a backend without the fleet's operations), instead of running beside
// other proxies without them.
func TestFleetConfigRefused(t *testing.T) {
	t.Parallel()
	full := service.NewProxyBackend(nil, nil)
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"log first", Config{Backend: full, LogFirst: true}, "unset LogFirst"},
		{"no in-memory decision", Config{Backend: &failingBackend{}}, "cannot decide in memory"},
		{"no fleet operations", Config{Backend: struct {
			Backend
			logBackend
		}{full, full}}, "no fleet operations"},
		{"fleet backend", Config{Backend: full}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Upstream, c.cfg.Fleet = "http://127.0.0.1:1", true
			c.cfg.setDefaults()
			err := c.cfg.Validate()
			if c.want == "" {
				testutil.NoError(t, err)
				return
			}
			testutil.True(t, err != nil && strings.Contains(err.Error(), c.want), "error %v, want one containing %q", err, c.want)
		})
	}
}

// blobFailing is a buildWatcher whose blob store fails while fail is set.
type blobFailing struct {
	*buildWatcher
	fail  atomic.Bool
	fails atomic.Int64
}

func (b *blobFailing) Blob(ctx context.Context, hash string) ([]byte, error) {
	if b.fail.Load() {
		b.fails.Add(1)
		return nil, errors.New("injected blob store failure")
	}
	return b.buildWatcher.Blob(ctx, hash)
}

// TestFleetContentFailureDropsState: a proxy whose cores could not read a
// stored output while building a session's state (its request's body did
// not parse, and the blob store failed) judged that output's span
// references without it, which the log does not say. It drops the
// state instead of deciding on it: the session's next request there,
// the blob store back, is decided as by one proxy.
func TestFleetContentFailureDropsState(t *testing.T) {
	t.Parallel()
	r := newFleetRig(t)
	ctx, svc, f := r.ctx, r.svc, r.f
	one, _ := r.start(service.NewProxyBackend(svc.Store, svc.Pipeline), false)
	a, _ := r.start(service.NewProxyBackend(svc.Store, svc.Pipeline), true)
	wb := &blobFailing{buildWatcher: &buildWatcher{ProxyBackend: service.NewProxyBackend(svc.Store, svc.Pipeline), building: make(chan struct{}, 1)}}
	b, _ := r.start(wb, true)
	for n := range 3 {
		want := postSession(t, ctx, f, one, "one", strings.NewReader(spanBody(n)))
		got := postSession(t, ctx, f, a, "fleet", strings.NewReader(spanBody(n)))
		testutil.True(t, got == want, "request %d at a: the fleet forwarded another body than one proxy", n)
	}
	wb.fail.Store(true)
	broken := `{"model":"m","messages":[`
	got := postSession(t, ctx, f, b, "fleet", bodyAfter(ctx, broken, wb.building))
	testutil.True(t, got == broken, "a body that does not parse was changed: %s", got)
	testutil.True(t, wb.fails.Load() > 0, "the build read no output from the blob store")
	wb.fail.Store(false)
	want := postSession(t, ctx, f, one, "one", strings.NewReader(spanBody(3)))
	got = postSession(t, ctx, f, b, "fleet", strings.NewReader(spanBody(3)))
	testutil.True(t, got == want, "request 3 at b: the fleet forwarded another body than one proxy:\n%s\nwant\n%s", got, want)
}

// spanBody is an Anthropic request whose conversation reads a file whole
// and then, from its second request on, reads part of it again (a span
// reference to the first read), n turns in all.
func spanBody(n int) string {
	lines := func(from, to int) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			fmt.Fprintf(&b, `%6d→\tfunc handler%d(w http.ResponseWriter, r *http.Request) { serve(w, r, %d) }\n`, i, i, i)
		}
		return b.String()
	}
	msgs := `{"role":"user","content":"hello"}`
	for i := range n {
		input, out := `{"file_path":"/a.go"}`, lines(1, 60)
		if i > 0 {
			input, out = fmt.Sprintf(`{"file_path":"/a.go","offset":%d,"limit":30}`, 10+i), lines(10+i, 39+i)
		}
		msgs += fmt.Sprintf(`,{"role":"assistant","content":[{"type":"tool_use","id":"t%d","name":"Read","input":%s}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"%s"}]}`, i, input, i, out)
	}
	return `{"model":"m","max_tokens":10,"tools":[{"name":"Read"}],"messages":[` + msgs + `]}`
}

// TestProxySplicesSpanReferences: a read whose lines repeat an earlier
// read's, pruned by a span reference (L1, partial), goes upstream with
// each run replaced by its reference line and the rest verbatim, the
// same text a rendering of the log gives the item
// (projections.BundleItem.RenderedText), and counted as kept out.
func TestProxySplicesSpanReferences(t *testing.T) {
	t.Parallel()
	r := newFleetRig(t)
	ctx, svc, f := r.ctx, r.svc, r.f
	url, px := r.start(service.NewProxyBackend(svc.Store, svc.Pipeline), false)
	var got string
	for n := range 3 {
		got = postSession(t, ctx, f, url, "one", strings.NewReader(spanBody(n)))
	}
	testutil.NoError(t, px.Flush(ctx))
	testutil.NoError(t, svc.Pipeline.WaitIdle(ctx))
	var sent struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	testutil.NoError(t, json.Unmarshal([]byte(got), &sent))
	var results []struct {
		ID      string `json:"tool_use_id"`
		Content string `json:"content"`
	}
	last := sent.Messages[len(sent.Messages)-1].Content
	testutil.NoError(t, json.Unmarshal(last, &results))
	testutil.True(t, len(results) == 1 && results[0].ID == "t1", "last message: %s", last)
	var session string
	px.mu.Lock()
	for k := range px.sessions {
		session = k.session
	}
	px.mu.Unlock()
	var want string
	var spans int
	svc.Pipeline.Projection.View(events.DefaultTenant, session, func(s *projections.Session) {
		for _, bi := range s.Snapshot().Bundle().Items {
			if bi.ID != "t1" {
				continue
			}
			spans = len(bi.Spans)
			var err error
			want, err = bi.RenderedText(ctx, svc.Store)
			testutil.NoError(t, err)
		}
	})
	testutil.True(t, spans > 0, "t1 has no applied span reference in the log's projection")
	testutil.True(t, strings.Contains(results[0].Content, "[prunesched: lines"), "t1 went upstream without its reference line:\n%s", results[0].Content)
	testutil.True(t, results[0].Content == want, "t1 upstream:\n%s\nthe log's rendering:\n%s", results[0].Content, want)
}

// TestFleetAdvanceRunsAgain: an advance that gives way to the session's
// holder (its lock held, a write queued) while the tail delivers what
// another proxy appended runs again once the holder lets go, without
// waiting for the tail's next event of the session: the next request's
// catch-up then finds the state current (feeds nothing), and its body is
// one proxy's.
func TestFleetAdvanceRunsAgain(t *testing.T) {
	t.Parallel()
	holds := []struct {
		name string
		// hold blocks b's state and returns what lets it go.
		hold func(px *Proxy, st *sessState) (release func())
	}{
		{"lock", func(px *Proxy, st *sessState) func() {
			st.lock()
			return st.unlock
		}},
		{"queued-write", func(px *Proxy, st *sessState) func() {
			// A write that waits for its request's fate.
			w := &logWrite{fate: make(chan bool, 1), wrote: make(chan struct{})}
			px.enqueue(st, w)
			return func() { w.fate <- false }
		}},
	}
	for _, h := range holds {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			r := newFleetRig(t)
			ctx, svc, f := r.ctx, r.svc, r.f
			one, _ := r.start(service.NewProxyBackend(svc.Store, svc.Pipeline), false)
			a, _ := r.start(service.NewProxyBackend(svc.Store, svc.Pipeline), true)
			b, bpx := r.start(service.NewProxyBackend(svc.Store, svc.Pipeline), true)
			send := func(url string, n int) {
				t.Helper()
				want := postSession(t, ctx, f, one, "one", strings.NewReader(rereadBody(n)))
				got := postSession(t, ctx, f, url, "fleet", strings.NewReader(rereadBody(n)))
				testutil.True(t, got == want, "request %d: the fleet forwarded another body than one proxy:\n%s\nwant\n%s", n, got, want)
			}
			send(a, 0)
			send(b, 1)
			var key sessionKey
			bpx.mu.Lock()
			for k := range bpx.sessions {
				key = k
			}
			st := bpx.sessions[key]
			bpx.mu.Unlock()
			advances := func() float64 { return promtest.ToFloat64(bpx.met.fleet.advanced) }
			catchUps := func() float64 { return promtest.ToFloat64(bpx.met.fleet.catchUps) }
			// b's own request is in its state (its tail may deliver it
			// later: nothing to advance).
			release := h.hold(bpx, st)
			before := advances()
			send(a, 2)
			last, err := svc.Store.LastSeq(ctx, events.DefaultTenant, key.session, events.KindFact)
			testutil.NoError(t, err)
			r.tailAt(bpx, last)
			// The tail delivered request 2 to b, whose advance gave way.
			waitFor(t, "an advance to give way", func() bool { return st.again.Load() != nil }, testutil.Until(ctx))
			testutil.True(t, advances() == before, "b advanced while its session was held")
			release()
			waitFor(t, "the advance to run again", func() bool { return advances() > before }, testutil.Until(ctx))
			caught := catchUps()
			send(b, 3)
			testutil.True(t, catchUps() == caught, "b's catch-up fed what the advance should have")
		})
	}
}

// lateReader is a fleet proxy's Backend whose first read of a session's
// last fact once gate is set answers only after the proxy decided a
// request (the decide stage observed more than before times), and whose
// tail holds back its
// deliveries while paused is set.
type lateReader struct {
	*service.ProxyBackend
	px      atomic.Pointer[Proxy]
	gate    atomic.Bool
	before  atomic.Uint64
	paused  atomic.Bool
	resumed chan struct{}
}

func (b *lateReader) decided() uint64 {
	var m dto.Metric
	_ = b.px.Load().met.stages.WithLabelValues(string(APIAnthropic), StageDecide).(prometheus.Metric).Write(&m)
	return m.GetHistogram().GetSampleCount()
}

func (b *lateReader) LastFactSeq(ctx context.Context, tenant, session string) (uint64, error) {
	if b.gate.Swap(false) {
		for b.decided() == b.before.Load() {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}
	return b.ProxyBackend.LastFactSeq(ctx, tenant, session)
}

func (b *lateReader) TailFactsAndApplications(ctx context.Context, started func(), want func(tenant, session string) bool, fn func(seq uint64, tenant, session string, e *events.Event)) error {
	return b.ProxyBackend.TailFactsAndApplications(ctx, started, want, func(seq uint64, tenant, session string, e *events.Event) {
		if b.paused.Load() {
			select {
			case <-b.resumed:
			case <-ctx.Done():
			}
		}
		fn(seq, tenant, session, e)
	})
}

// TestFleetDecidesBeforeTheRead: a request whose proxy holds the
// session's state is decided while the read of the session's last fact
// at the stream's leader is still out (the read answers only once the
// proxy decided), and goes upstream once the read says the state was
// current: the body one proxy forwards. When the proxy's tail had not
// delivered what another proxy appended (held back), the read shows the
// log past the state: the decision is dropped unsent and the request
// decided again on the log, the same body again.
func TestFleetDecidesBeforeTheRead(t *testing.T) {
	t.Parallel()
	for _, behind := range []bool{false, true} {
		t.Run(fmt.Sprintf("behind=%v", behind), func(t *testing.T) {
			t.Parallel()
			r := newFleetRig(t)
			ctx, svc, f := r.ctx, r.svc, r.f
			one, _ := r.start(service.NewProxyBackend(svc.Store, svc.Pipeline), false)
			a, _ := r.start(service.NewProxyBackend(svc.Store, svc.Pipeline), true)
			lr := &lateReader{ProxyBackend: service.NewProxyBackend(svc.Store, svc.Pipeline), resumed: make(chan struct{})}
			b, bpx := r.start(lr, true)
			lr.px.Store(bpx)
			send := func(url string, n int) {
				t.Helper()
				want := postSession(t, ctx, f, one, "one", strings.NewReader(rereadBody(n)))
				got := postSession(t, ctx, f, url, "fleet", strings.NewReader(rereadBody(n)))
				testutil.True(t, got == want, "request %d: the fleet forwarded another body than one proxy:\n%s\nwant\n%s", n, got, want)
			}
			count := func(c prometheus.Counter) float64 { return promtest.ToFloat64(c) }
			send(a, 0)
			send(b, 1)
			if behind {
				lr.paused.Store(true)
			}
			send(a, 2)
			if !behind {
				// b's state takes request 2 from its tail before request 3.
				last, err := svc.Store.LastSeq(ctx, events.DefaultTenant, sessionOf(bpx), events.KindFact)
				testutil.NoError(t, err)
				r.tailAt(bpx, last)
				waitFor(t, "b to advance past request 2", func() bool {
					return bpx.held(events.DefaultTenant, sessionOf(bpx)).q.last() == last
				}, testutil.Until(ctx))
			}
			lr.before.Store(lr.decided())
			lr.gate.Store(true)
			send(b, 3)
			if behind {
				close(lr.resumed)
				testutil.True(t, count(bpx.met.fleet.behind) == 1 && count(bpx.met.fleet.early) == 0,
					"read behind %v, decided before the read %v; want 1, 0", count(bpx.met.fleet.behind), count(bpx.met.fleet.early))
			} else {
				testutil.True(t, count(bpx.met.fleet.early) == 1 && count(bpx.met.fleet.behind) == 0,
					"decided before the read %v, read behind %v; want 1, 0", count(bpx.met.fleet.early), count(bpx.met.fleet.behind))
			}
			send(a, 4)
			send(b, 5)
		})
	}
}

// sessionOf is the one session px holds.
func sessionOf(px *Proxy) string {
	px.mu.Lock()
	defer px.mu.Unlock()
	for k := range px.sessions {
		return k.session
	}
	return ""
}
