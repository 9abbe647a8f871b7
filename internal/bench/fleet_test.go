package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/internal/bench/replay"
	"github.com/prunesched/prunesched/internal/decide"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/pipeline"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/proxy"
	"github.com/prunesched/prunesched/scheduler"
)

// fleetRig is prunesched on one embedded JetStream server (the workers,
// as a worker process runs them) and a fake upstream, with proxies that
// each have their own connection, store and (not consuming) pipeline, as
// separate proxy processes would, and one identity key.
type fleetRig struct {
	t   *testing.T
	svc *service.Service
	pol policy.Policy
	key []byte
	// one is a single proxy over the service itself (the baseline), else
	// the proxies are a fleet.
	one bool
	// connect opens a proxy's own connection to the log; replicas is the
	// log's replica count.
	connect  func() (*nats.Conn, error)
	replicas int

	mu      sync.Mutex
	answers map[string]replay.Turn
	bodies  map[string][]byte
	// hold, when set for a key, blocks the upstream's answer to it:
	// reached is closed when the request arrived, release ends it.
	hold map[string]*gate
	up   string

	proxies []*fleetProxy
}

// gate blocks one stage of one request.
type gate struct {
	reached, release chan struct{}
	once, opened     sync.Once
}

// open releases the gate (again: no effect).
func (g *gate) open() { g.opened.Do(func() { close(g.release) }) }

func newGate() *gate { return &gate{reached: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) pass() {
	g.once.Do(func() { close(g.reached) })
	<-g.release
}

// fleetProxy is one proxy of the rig.
type fleetProxy struct {
	px  *proxy.Proxy
	reg *prometheus.Registry
	url string
	be  *fleetBackend
	now atomic.Int64 // Config.Now, set per request (unix nanoseconds)
	// expireHold makes the fleet hold end at once (holdNow).
	expireHold atomic.Bool
}

// fleetBackend forwards to a proxy's backend; it can block the guarded
// publish (appendGate) and die (every write fails, as for a killed
// process).
type fleetBackend struct {
	proxy.Backend
	// tailStarted is closed once the proxy's tail of the log first ran
	// (its started callback: from then on it vouches for what it
	// delivers); tailOnce closes it.
	tailStarted chan struct{}
	tailOnce    sync.Once

	inner interface {
		ReadSession(ctx context.Context, tenant, session string) ([]events.Event, error)
		ReadSessionLeader(ctx context.Context, tenant, session string) ([]events.Event, error)
		Tokens() events.TokenCounter
		PutBlob(ctx context.Context, hash string, data []byte) error
		SessionFacts(tenant, session string, lastFact uint64) (int, bool)
		FactsAndApplicationsAfter(ctx context.Context, tenant, session string, after, lastFact uint64) ([]events.Event, error)
		AppendAfter(ctx context.Context, evs []events.Event, expect uint64) ([]events.Event, error)
		TailFactsAndApplications(ctx context.Context, started func(), want func(tenant, session string) bool, fn func(seq uint64, tenant, session string, e *events.Event)) error
		FirstFactSeq(ctx context.Context, tenant, session string) (uint64, error)
	}
	appendGate atomic.Pointer[gate]
	// appended, when set, is closed once the next guarded append returned.
	appended atomic.Pointer[chan struct{}]
	// recordGate blocks the next append of a response's record (facts
	// with a model request).
	recordGate atomic.Pointer[gate]
	dead       atomic.Bool
}

var errKilled = fmt.Errorf("killed")

func (b *fleetBackend) ReadSession(ctx context.Context, tenant, session string) ([]events.Event, error) {
	return b.inner.ReadSession(ctx, tenant, session)
}
func (b *fleetBackend) ReadSessionLeader(ctx context.Context, tenant, session string) ([]events.Event, error) {
	return b.inner.ReadSessionLeader(ctx, tenant, session)
}
func (b *fleetBackend) Tokens() events.TokenCounter { return b.inner.Tokens() }
func (b *fleetBackend) PutBlob(ctx context.Context, hash string, data []byte) error {
	if b.dead.Load() {
		return errKilled
	}
	return b.inner.PutBlob(ctx, hash, data)
}
func (b *fleetBackend) SessionFacts(tenant, session string, lastFact uint64) (int, bool) {
	return b.inner.SessionFacts(tenant, session, lastFact)
}
func (b *fleetBackend) FactsAndApplicationsAfter(ctx context.Context, tenant, session string, after, lastFact uint64) ([]events.Event, error) {
	return b.inner.FactsAndApplicationsAfter(ctx, tenant, session, after, lastFact)
}
func (b *fleetBackend) TailFactsAndApplications(ctx context.Context, started func(), want func(tenant, session string) bool, fn func(seq uint64, tenant, session string, e *events.Event)) error {
	return b.inner.TailFactsAndApplications(ctx, func() {
		started()
		b.tailOnce.Do(func() { close(b.tailStarted) })
	}, want, fn)
}
func (b *fleetBackend) FirstFactSeq(ctx context.Context, tenant, session string) (uint64, error) {
	return b.inner.FirstFactSeq(ctx, tenant, session)
}
func (b *fleetBackend) AppendAfter(ctx context.Context, evs []events.Event, expect uint64) ([]events.Event, error) {
	if g := b.appendGate.Swap(nil); g != nil {
		g.pass()
	}
	for _, e := range evs {
		if _, ok := e.Data.(*events.ModelRequest); ok {
			if g := b.recordGate.Swap(nil); g != nil {
				g.pass()
			}
			break
		}
	}
	if b.dead.Load() {
		return nil, errKilled
	}
	if c := b.appended.Swap(nil); c != nil {
		defer close(*c)
	}
	return b.inner.AppendAfter(ctx, evs, expect)
}

// onAppended returns a channel closed once the proxy's next guarded
// append returned.
func (b *fleetBackend) onAppended() <-chan struct{} {
	c := make(chan struct{})
	b.appended.Store(&c)
	return c
}
func (b *fleetBackend) Append(ctx context.Context, evs []events.Event) ([]events.Event, error) {
	if b.dead.Load() {
		return nil, errKilled
	}
	return b.Backend.Append(ctx, evs)
}
func (b *fleetBackend) DecideLive(ctx context.Context, tenant, session string, lastFact uint64, at time.Time, req string) (*events.Event, error) {
	if b.dead.Load() {
		return nil, errKilled
	}
	return b.Backend.DecideLive(ctx, tenant, session, lastFact, at, req)
}

func startFleet(t *testing.T, pol policy.Policy, n int, one bool) *fleetRig {
	t.Helper()
	return startFleetOn(t, service.Config{DataDir: t.TempDir(), Policy: pol}, nil, n, one)
}

// startFleetOn is startFleet with the workers' service started with cfg
// and the proxies' connections made by connect (nil: in-process
// connections to the service's embedded server).
func startFleetOn(t *testing.T, cfg service.Config, connect func() (*nats.Conn, error), n int, one bool) *fleetRig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc, err := service.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	key, err := proxy.NewIdentityKey()
	if err != nil {
		t.Fatal(err)
	}
	if connect == nil {
		connect = func() (*nats.Conn, error) { return svc.Embedded.Connect("proxy") }
	}
	r := &fleetRig{t: t, svc: svc, pol: cfg.Policy, key: key, one: one, connect: connect, replicas: max(cfg.Replicas, 1),
		answers: map[string]replay.Turn{}, bodies: map[string][]byte{}, hold: map[string]*gate{}}
	r.up = serveTest(t, http.HandlerFunc(r.upstream))
	for range n {
		r.addProxy(ctx)
	}
	return r
}

func (r *fleetRig) upstream(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	key := req.Header.Get(turnHeader)
	r.mu.Lock()
	r.bodies[key] = body
	turn, ok := r.answers[key]
	g := r.hold[key]
	r.mu.Unlock()
	if g != nil {
		g.pass()
	}
	if !ok {
		http.Error(w, "unknown turn", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", turn.ContentType)
	_, _ = w.Write(turn.Answer)
}

// addProxy starts one more proxy: over the service's own store and
// pipeline for the baseline, else over a connection, store and pipeline
// of its own, in fleet mode.
func (r *fleetRig) addProxy(ctx context.Context) *fleetProxy {
	t := r.t
	t.Helper()
	fp := &fleetProxy{reg: prometheus.NewRegistry()}
	var be proxy.Backend
	if r.one {
		be = service.NewProxyBackend(r.svc.Store, r.svc.Pipeline)
	} else {
		nc, err := r.connect()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		st, err := store.Open(ctx, nc, store.Config{Tokens: r.svc.Tokens, Replicas: r.replicas}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := proxy.JoinFleet(ctx, st.JS(), r.key, r.replicas); err != nil {
			t.Fatal(err)
		}
		inner := service.NewProxyBackend(st, pipeline.New(st, r.pol, nil, nil))
		fb := &fleetBackend{Backend: inner, tailStarted: make(chan struct{})}
		fb.inner = inner
		fp.be, be = fb, fb
	}
	cfg := proxy.Config{Upstream: r.up, Backend: be, Registry: fp.reg, Budget: time.Hour, IdentityKey: r.key, Fleet: !r.one, Logger: testLogger(t), Policy: &r.pol,
		Now: func() time.Time { return time.Unix(0, fp.now.Load()).UTC() },
		RecordTimer: func(d time.Duration) <-chan time.Time {
			if d == proxy.DefaultFleetHold && fp.expireHold.Load() {
				c := make(chan time.Time, 1)
				c <- time.Time{}
				return c
			}
			return time.After(d)
		}}
	px, err := proxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fp.px = px
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = px.Close(ctx)
	})
	fp.url = serveTest(t, px.Handler())
	r.proxies = append(r.proxies, fp)
	return fp
}

// fleetBase is the time of send 0; send i arrives i seconds later. It is
// the time the tests start (the budget counts from a request's time),
// the same for both runs of a comparison.
var fleetBase = time.Now().UTC().Truncate(time.Second)

// send sends turn as send number i (its upstream key) to proxy fp at
// fleetBase + at seconds.
func (r *fleetRig) send(ctx context.Context, fp *fleetProxy, api replay.API, session string, i, at int, turn replay.Turn) error {
	key := session + "/" + strconv.Itoa(i)
	r.mu.Lock()
	r.answers[key] = turn
	r.mu.Unlock()
	fp.now.Store(fleetBase.Add(time.Duration(at) * time.Second).UnixNano())
	return r.post(ctx, fp.url, api, session, key, turn)
}

// post sends turn to the proxy (or balancer) at base under upstream key
// key and reads the whole answer.
func (r *fleetRig) post(ctx context.Context, base string, api replay.API, session, key string, turn replay.Turn) error {
	return postTurn(ctx, http.DefaultClient, base, api, session, key, turn.Body)
}

// settle waits for every live proxy's writes and the workers, and
// returns the session's log.
func (r *fleetRig) settle(session string) []events.Event {
	t := r.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, fp := range r.proxies {
		if fp.be != nil && fp.be.dead.Load() {
			continue
		}
		if err := fp.px.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.svc.Pipeline.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := r.svc.Store.ReadSession(ctx, events.DefaultTenant, session)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// holdNow makes the proxy's fleet hold expire at once from now on: the
// end of a response no longer waits for its record.
func (fp *fleetProxy) holdNow() { fp.expireHold.Store(true) }

// sum is a counter's total over the rig's proxies.
func (r *fleetRig) sum(name string) float64 {
	total := 0.0
	for _, fp := range r.proxies {
		total += r.sumOf(fp, name)
	}
	return total
}

// waitTails waits until every fleet proxy's tail of the log has run
// (fleetBackend.tailStarted), or ctx ends (a failure).
func (r *fleetRig) waitTails(ctx context.Context) {
	r.t.Helper()
	for _, fp := range r.proxies {
		if fp.be == nil {
			continue
		}
		select {
		case <-fp.be.tailStarted:
		case <-ctx.Done():
			r.t.Fatal("a fleet proxy's tail of the log never started")
		}
	}
}

// sumOf is sum for one proxy of the rig.
func (r *fleetRig) sumOf(fp *fleetProxy, name string) float64 {
	mfs, err := fp.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

// sendAll sends turns as sends from, from+1, ... (each at its number's
// time), send n to proxy pick(n), and fails the test on an error.
func (r *fleetRig) sendAll(ctx context.Context, session string, turns []replay.Turn, from int, pick func(n int) *fleetProxy) {
	r.t.Helper()
	for i, turn := range turns {
		n := from + i
		if err := r.send(ctx, pick(n), replay.Anthropic, session, n, n, turn); err != nil {
			r.t.Fatal(err)
		}
	}
}

// roundRobin picks proxy n mod the fleet's size.
func (r *fleetRig) roundRobin(n int) *fleetProxy { return r.proxies[n%len(r.proxies)] }

// checkFleet fails if a request of the fleet failed open, and returns
// how many blocks the baseline replaced (none: the comparison showed
// nothing).
func checkFleet(t *testing.T, base *baseline, fleet *fleetRig) float64 {
	t.Helper()
	noneFailedOpen(t, fleet)
	return base.replaced
}

// noneFailedOpen fails if a request of the fleet failed open.
func noneFailedOpen(t *testing.T, fleet *fleetRig) {
	t.Helper()
	if f := fleet.sum("prunesched_proxy_fail_open_total"); f != 0 {
		t.Fatalf("%v requests failed open in the fleet", f)
	}
}

// baseline is what one proxy did with a session's requests, sent one
// after the other: the fleet tests compare their fleet's run with it.
type baseline struct {
	bodies   map[string][]byte // the bodies forwarded, by send key
	log      []events.Event    // the session's log, settled
	replaced float64           // blocks replaced
}

// baselines holds the one-proxy runs already made in this test binary,
// by policy, session and number of requests. A run is deterministic
// (the same requests give the same bodies, decisions and log), so every
// fleet test of a session compares with one run made once instead of
// starting a server and replaying the session again (five tests did,
// one of them twice).
var baselines = struct {
	mu   sync.Mutex
	runs map[string]*baselineRun
}{runs: map[string]*baselineRun{}}

// baselineRun is one baseline being made: done is closed when b is set,
// or left nil because the test making it failed.
type baselineRun struct {
	done chan struct{}
	b    *baseline
}

// oneProxy returns the baseline of turns sent as session through one
// proxy under pol (each send n at its number's time), made by the first
// test that asks and shared by the others, which wait for it.
func oneProxy(t *testing.T, pol policy.Policy, session string, turns []replay.Turn) *baseline {
	t.Helper()
	key := fmt.Sprintf("%s/%s/%d", pol.Version(), session, len(turns))
	baselines.mu.Lock()
	run, made := baselines.runs[key]
	if !made {
		run = &baselineRun{done: make(chan struct{})}
		baselines.runs[key] = run
	}
	baselines.mu.Unlock()
	if made {
		<-run.done
		if run.b == nil {
			t.Fatalf("%s: the one-proxy baseline failed in the test that made it", session)
		}
		return run.b
	}
	defer close(run.done)
	r := startFleet(t, pol, 1, true)
	r.sendAll(context.Background(), session, turns, 0, r.roundRobin)
	b := &baseline{bodies: map[string][]byte{}, log: r.settle(session), replaced: r.sum("prunesched_proxy_blocks_replaced_total")}
	r.mu.Lock()
	for k, body := range r.bodies {
		b.bodies[k] = body
	}
	r.mu.Unlock()
	run.b = b
	return b
}

// mustHavePruned fails when the baselines replaced no block.
func mustHavePruned(t *testing.T, replaced float64) {
	t.Helper()
	if replaced == 0 {
		t.Fatal("nothing was pruned: the comparison shows nothing")
	}
}

// logShape is the session's log as two runs must agree on it: facts and
// applications in log order, without what differs by construction (the
// random request ids, the ids and marks derived from them, stream
// sequences, the times of the response records, taken from the clock).
// Marks are the workers' and follow from the facts.
func logShape(t *testing.T, evs []events.Event) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		switch d := e.Data.(type) {
		case *events.Application:
			out = append(out, applications(t, []events.Event{e})...)
		case *events.ModelRequest:
			cp := *d
			cp.Request = ""
			b, _ := json.Marshal(cp)
			out = append(out, "model_request "+string(b))
		default:
			if !e.IsFact() {
				continue
			}
			b, _ := json.Marshal(withoutExactCount(d))
			at := e.Time.Format(time.RFC3339)
			if m, ok := d.(*events.Message); ok && m.Role == events.RoleAssistant {
				at = "" // recorded from the response, at the clock's time
			}
			if _, ok := d.(*events.ToolCall); ok {
				at = "" // a call comes from the response (or its echo)
			}
			out = append(out, fmt.Sprintf("%s %s %s %s", e.Type, e.ID, at, b))
		}
	}
	return out
}

// withoutExactCount is a fact's payload without the tokenizer's count of
// an estimated payload: one proxy adds it after forwarding, for the
// economics only; a fleet publishes a request's facts before forwarding,
// with the count its decision used and nothing after (docs/proxy.md).
// Decisions never read it, so the comparison leaves it out.
func withoutExactCount(d events.Payload) events.Payload {
	switch p := d.(type) {
	case *events.Message:
		cp := *p
		cp.TokensExact = 0
		return &cp
	case *events.ToolCall:
		cp := *p
		cp.InputTokensExact = 0
		return &cp
	case *events.ToolResult:
		if p.OutputRef != nil {
			cp, ref := *p, *p.OutputRef
			ref.TokensExact = 0
			cp.OutputRef = &ref
			return &cp
		}
	}
	return d
}

// fleetSequences returns up to max real request sequences of the shared
// traces' Claude Code sessions, each cut at limit requests.
func fleetSequences(t *testing.T, max, limit int) map[string][]replay.Turn {
	t.Helper()
	out := map[string][]replay.Turn{}
	for _, s := range sharedSessions(t, importers.FormatClaudeCode) {
		if s.format != importers.FormatClaudeCode || len(out) >= max {
			continue
		}
		if turns := s.seq.Head(limit).Build(replay.Anthropic, false); len(turns) > 4 {
			out[fmt.Sprintf("fl-%s-%d", s.name, s.index)] = turns
		}
	}
	if len(out) == 0 {
		t.Skip("no Claude Code sequence in the shared traces")
	}
	return out
}

// compareRuns fails unless the fleet's forwarded bodies (by send number)
// and log shape are the baseline's.
func compareRuns(t *testing.T, session string, sends int, base *baseline, fleet *fleetRig) {
	t.Helper()
	for i := range sends {
		key := session + "/" + strconv.Itoa(i)
		a := base.bodies[key]
		fleet.mu.Lock()
		b := fleet.bodies[key]
		fleet.mu.Unlock()
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: the body forwarded differs (one proxy %d bytes, fleet %d bytes) at byte %d", key, len(a), len(b), firstDiff(a, b))
		}
	}
	fleetLog := fleet.settle(session)
	want, got := logShape(t, base.log), logShape(t, fleetLog)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		n := min(len(want), len(got))
		i := 0
		for i < n && want[i] == got[i] {
			i++
		}
		w, g := "(end)", "(end)"
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		t.Fatalf("%s: the logs differ (one proxy %d events, fleet %d) at event %d:\none proxy: %s\nfleet:     %s", session, len(want), len(got), i, w, g)
	}
	// The proxies published their own applications: the cores over the
	// log's facts (what the workers and analyze run) decide the same.
	checkAnalyze(t, session, fleet.pol, &wayRig{svc: fleet.svc}, fleetLog)
}

// fleetPolicy applies marks at the next request, so real sequences prune
// often and every difference shows.
func fleetPolicy(t *testing.T) policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte("name: fleet-test\nscheduler:\n  mode: next_request\n"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// alternationLimit is how many requests of each sequence the
// alternation tests replay (fewer under the race detector or -short).
func alternationLimit() int {
	if raceEnabled || testing.Short() {
		return 24
	}
	return 40
}

// TestFleetAlternates sends each real request sequence through two, then
// three proxies of a fleet in turn (a balancer without session affinity)
// and through one proxy: the bodies forwarded, the decisions and the log
// must be the same, and no request may fail open. Under -race, or with
// -short, each sequence's first 24 requests; otherwise 40 (.ci/run's
// non-race stage).
func TestFleetAlternates(t *testing.T) {
	t.Parallel()
	seqs := fleetSequences(t, 2, alternationLimit())
	pol := fleetPolicy(t)
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d-proxies", n), func(t *testing.T) {
			fleet := startFleet(t, pol, n, false)
			ctx := context.Background()
			replaced := 0.0
			for session, turns := range seqs {
				fleet.sendAll(ctx, session, turns, 0, fleet.roundRobin)
				base := oneProxy(t, pol, session, turns)
				compareRuns(t, session, len(turns), base, fleet)
				replaced += checkFleet(t, base, fleet)
			}
			mustHavePruned(t, replaced)
			// What another proxy appended is taken at the request
			// (a catch-up) or before it, as the tail delivers it (an
			// advance): which one, the timing decides.
			if c := fleet.sum("prunesched_proxy_fleet_catchups_total") + fleet.sum("prunesched_proxy_fleet_advances_total"); c == 0 {
				t.Fatal("no proxy took what another appended: the alternation was not exercised")
			}
			if c := fleet.sum("prunesched_proxy_fleet_warm_starts_total"); c == 0 {
				t.Fatal("no proxy built a session it met for the first time from its tail's warm copy")
			}
		})
	}
}

// TestFleetAdvances: requests alternate between two proxies, and each
// is sent only once the proxy it goes to has fed its state what the
// other appended since, from its tail of the log, between the requests
// (proxy/fleet.go, advance): the request's catch-up then finds its state
// current or nearly. The bodies forwarded and the log equal one proxy's.
func TestFleetAdvances(t *testing.T) {
	t.Parallel()
	seqs := fleetSequences(t, 2, alternationLimit())
	pol := fleetPolicy(t)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.HangDeadline)
	defer cancel()
	replaced := 0.0
	for session, turns := range seqs {
		fleet := startFleet(t, pol, 2, false)
		// A session a proxy takes before its tail runs stays unvouched
		// for (fresh) until a catch-up completes it while the tail runs:
		// no advance feeds it meanwhile, and the wait below would last
		// until the deadline (a loaded machine starts the tails late).
		// The proxies' tails run before the session's first request.
		fleet.waitTails(ctx)
		advances := func(fp *fleetProxy) float64 { return fleet.sumOf(fp, "prunesched_proxy_fleet_advances_total") }
		var mark float64 // the next proxy's advances before the last send
		for n, turn := range turns {
			fp := fleet.roundRobin(n)
			// The other proxy answered request n-1; from the session's
			// third request fp holds the session, and its tail advances
			// it past request n-1 (the wait ends with the test's
			// deadline at the latest).
			for n >= 2 && advances(fp) == mark && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			mark = advances(fleet.roundRobin(n + 1))
			if err := fleet.send(ctx, fp, replay.Anthropic, session, n, n, turn); err != nil {
				t.Fatal(err)
			}
		}
		if ctx.Err() != nil {
			t.Fatal("a proxy never advanced its state from its tail")
		}
		// The one-proxy run is fetched last: while another test makes
		// it, this one has run its fleet.
		base := oneProxy(t, pol, session, turns)
		compareRuns(t, session, len(turns), base, fleet)
		replaced += checkFleet(t, base, fleet)
	}
	mustHavePruned(t, replaced)
}

// TestFleetPublishesAfterForwarding: a fleet proxy publishes a request's
// facts and application after the request is written upstream, while the
// upstream works on the answer (fleet.go, rule 2), and the response's end
// waits for the log (rule 3). The proxy's guarded publish is held until
// the upstream has the request: a proxy that published before forwarding
// would never let it through (the test's deadline ends the wait). The
// upstream's answer is then held until the log holds the request's facts
// and its application. The run equals one proxy's.
func TestFleetPublishesAfterForwarding(t *testing.T) {
	t.Parallel()
	seqs := fleetSequences(t, 2, 24)
	pol := fleetPolicy(t)
	replaced := 0.0
	for session, turns := range seqs {
		t.Run(session, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.HangDeadline)
			defer cancel()
			base, fleet := oneProxy(t, pol, session, turns), startFleet(t, pol, 2, false)
			k := len(turns) / 2
			// What the log holds once request k's facts and application
			// are in: the baseline's events before its k-th model request.
			var facts []string
			apps, requests := 0, 0
			for _, e := range base.log {
				if _, ok := e.Data.(*events.ModelRequest); ok {
					// (its id derives from the random request id)
					if requests == k {
						break
					}
					requests++
					continue
				}
				if _, ok := e.Data.(*events.Application); ok {
					apps++
				} else if e.IsFact() {
					facts = append(facts, e.ID)
				}
			}
			fleet.sendAll(ctx, session, turns[:k], 0, fleet.roundRobin)
			a := fleet.roundRobin(k)
			pub, up := newGate(), newGate()
			a.be.appendGate.Store(pub)
			fleet.mu.Lock()
			fleet.hold[session+"/"+strconv.Itoa(k)] = up
			fleet.mu.Unlock()
			// A failed test lets the request go, so the rig can stop.
			defer up.open()
			defer pub.open()
			errc := make(chan error, 1)
			go func() { errc <- fleet.send(ctx, a, replay.Anthropic, session, k, k, turns[k]) }()
			select {
			case <-up.reached:
			case <-ctx.Done():
				t.Fatal("the upstream never got the request while the proxy's guarded publish was held: it publishes before forwarding")
			}
			<-pub.reached
			pub.open()
			testutil.Eventually(t, func() error {
				evs, err := fleet.svc.Store.ReadSession(ctx, events.DefaultTenant, session)
				if err != nil {
					return err
				}
				have, got := map[string]bool{}, 0
				for _, e := range evs {
					have[e.ID] = true
					if _, ok := e.Data.(*events.Application); ok {
						got++
					}
				}
				for _, id := range facts {
					if !have[id] {
						return fmt.Errorf("fact %s of request %d is not in the log while the upstream holds its answer", id, k)
					}
				}
				if got < apps {
					return fmt.Errorf("%d applications in the log while the upstream holds request %d's answer, want %d", got, k, apps)
				}
				return nil
			}, testutil.Until(ctx))
			up.open()
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			fleet.sendAll(ctx, session, turns[k+1:], k+1, fleet.roundRobin)
			compareRuns(t, session, len(turns), base, fleet)
			if n := fleet.sum("prunesched_proxy_fleet_publish_first_total"); n != 0 {
				t.Fatalf("%v requests published before forwarding in a conversation whose requests follow one another", n)
			}
			replaced += checkFleet(t, base, fleet)
		})
	}
	mustHavePruned(t, replaced)
}

// TestFleetRace: two requests of one session in flight at once on two
// proxies, neither seen by the other's catch-up. Request k reaches proxy
// A, which decides it, forwards it and is held just before its guarded
// publish; the client's retry of k reaches proxy B, which decides on the
// same view, forwards, publishes and completes; then A goes on. A's
// publish finds the session extended: A's request is recorded as one
// that failed open (fleet.go, rule 2): nothing stored twice, no
// application or model request of A's. Both forwarded the same body, and
// the run (bodies, log) equals one proxy receiving k once; the log
// replays to every application it holds and no other.
func TestFleetRace(t *testing.T) {
	t.Parallel()
	seqs := fleetSequences(t, 2, 24)
	pol := fleetPolicy(t)
	ctx := context.Background()
	replaced := 0.0
	for session, turns := range seqs {
		t.Run(session, func(t *testing.T) {
			fleet := startFleet(t, pol, 2, false)
			k := len(turns) / 2
			a, b := fleet.proxies[0], fleet.proxies[1]
			fleet.sendAll(ctx, session, turns[:k], 0, fleet.roundRobin)
			g := newGate()
			a.be.appendGate.Store(g)
			retry := len(turns) + 1 // A's send, under a key of its own
			errc := make(chan error, 1)
			go func() { errc <- fleet.send(ctx, a, replay.Anthropic, session, retry, k, turns[k]) }()
			<-g.reached
			if err := fleet.send(ctx, b, replay.Anthropic, session, k, k, turns[k]); err != nil {
				t.Fatal(err)
			}
			close(g.release)
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			fleet.mu.Lock()
			ab, bb := fleet.bodies[session+"/"+strconv.Itoa(retry)], fleet.bodies[session+"/"+strconv.Itoa(k)]
			fleet.mu.Unlock()
			if !bytes.Equal(ab, bb) {
				t.Fatalf("A and B forwarded different bodies for the same request at byte %d", firstDiff(ab, bb))
			}
			fleet.sendAll(ctx, session, turns[k+1:], k+1, fleet.roundRobin)
			// The one-proxy run is fetched last: while another test makes
			// it, this one has run its fleet.
			base := oneProxy(t, pol, session, turns)
			compareRuns(t, session, len(turns), base, fleet)
			checkReplay(t, session, pol, fleet.svc, fleet.settle(session))
			if n := fleet.sum("prunesched_proxy_fleet_unrecorded_total"); n != 1 {
				t.Fatalf("%v requests recorded as failed open after a lost race, want 1", n)
			}
			if n := fleet.sum("prunesched_proxy_fleet_races_total"); n != 0 {
				t.Fatalf("%v requests decided again before forwarding, want 0", n)
			}
			replaced += checkFleet(t, base, fleet)
		})
	}
	mustHavePruned(t, replaced)
}

// TestFleetInFlightPublishesFirst: request k reaches proxy A, which
// forwards it and publishes its facts and application; the upstream
// holds A's answer. The client's retry of k reaches proxy B, whose
// catch-up shows a request of the session in flight (its facts in the
// log, its record not yet): B publishes before forwarding (fleet.go,
// rule 2's exception), decided on a view that holds A's facts and
// application, and forwards A's body. Both requests are recorded, no fact
// twice, nothing fails open, and the log replays to every application it
// holds and no other; the conversation goes on through both proxies.
func TestFleetInFlightPublishesFirst(t *testing.T) {
	t.Parallel()
	seqs := fleetSequences(t, 2, 16)
	pol := fleetPolicy(t)
	ctx := context.Background()
	for session, turns := range seqs {
		t.Run(session, func(t *testing.T) {
			fleet := startFleet(t, pol, 2, false)
			k := len(turns) / 2
			a, b := fleet.proxies[0], fleet.proxies[1]
			fleet.sendAll(ctx, session, turns[:k], 0, fleet.roundRobin)
			up := newGate()
			fleet.mu.Lock()
			fleet.hold[session+"/"+strconv.Itoa(k)] = up
			fleet.mu.Unlock()
			published := a.be.onAppended()
			errc := make(chan error, 1)
			go func() { errc <- fleet.send(ctx, a, replay.Anthropic, session, k, k, turns[k]) }()
			<-up.reached
			<-published
			if err := fleet.send(ctx, b, replay.Anthropic, session, k+1, k+1, turns[k]); err != nil {
				t.Fatal(err)
			}
			close(up.release)
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			fleet.mu.Lock()
			ab, bb := fleet.bodies[session+"/"+strconv.Itoa(k)], fleet.bodies[session+"/"+strconv.Itoa(k+1)]
			fleet.mu.Unlock()
			if !bytes.Equal(ab, bb) {
				t.Fatalf("B forwarded another body than A for the same request, at byte %d", firstDiff(ab, bb))
			}
			if n := fleet.sum("prunesched_proxy_fleet_publish_first_total"); n != 1 {
				t.Fatalf("%v requests published before forwarding, want B's 1", n)
			}
			fleet.sendAll(ctx, session, turns[k+1:], k+2, fleet.roundRobin)
			evs := fleet.settle(session)
			requests := modelRequestsOnce(t, evs)
			if sent := len(turns) + 1; requests != sent {
				t.Fatalf("%d model requests in the log for %d requests sent", requests, sent)
			}
			checkReplay(t, session, pol, fleet.svc, evs)
			for _, name := range []string{"prunesched_proxy_fleet_unrecorded_total", "prunesched_proxy_fleet_races_total"} {
				if n := fleet.sum(name); n != 0 {
					t.Fatalf("%s = %v, want 0", name, n)
				}
			}
			noneFailedOpen(t, fleet)
		})
	}
}

// checkReplay fails unless the log is its own source of truth: replayed
// as a rebuild replays it (scheduler.Replay: each application at the fact
// position it was decided at), the cores decide, at each application's
// position, that application byte for byte, and at each model request
// without one, none (which the workers would otherwise publish).
func checkReplay(t *testing.T, session string, pol policy.Policy, svc *service.Service, log []events.Event) {
	t.Helper()
	ctx := context.Background()
	s := decide.NewSession(pol, events.DefaultTenant, session, func(h string) (io.ReadCloser, error) {
		b, err := svc.Store.GetBlob(ctx, h)
		return io.NopCloser(bytes.NewReader(b)), err
	})
	norm := func(e events.Event) string {
		e.Seq = 0
		if e.Tenant == "" {
			e.Tenant = events.DefaultTenant
		}
		b, err := events.EncodeValidated(e)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var fails []string
	_, unplaced := scheduler.Replay(log, 0, scheduler.Replayer{
		Application: func(app events.Event) {
			a := app.Data.(*events.Application)
			got := s.Decide(app.Time, a.Request)
			if got == nil || norm(*got) != norm(app) {
				fails = append(fails, fmt.Sprintf("application %s at fact %d: the cores decide %v", app.ID, a.AfterIndex, got))
			}
		},
		Fact: func(f events.Event) {
			if f.Tenant == "" {
				f.Tenant = events.DefaultTenant
			}
			if _, app := s.Feed(f); app != nil {
				fails = append(fails, fmt.Sprintf("model request %s: the cores decide %s, the log holds no application for it", f.ID, app.ID))
			}
		},
	})
	if unplaced > 0 {
		fails = append(fails, fmt.Sprintf("%d applications at positions the replay never reached", unplaced))
	}
	if len(fails) > 0 {
		t.Fatalf("%s: the log does not replay to its applications:\n%s", session, strings.Join(fails, "\n"))
	}
}

// TestFleetProxyKilled: proxy A forwards request k (its facts are in the
// log, published before forwarding) and is killed while the upstream
// answers: none of its later writes happen, its client's connection
// breaks. The client retries k through the balancer, which picks B, and
// the conversation goes on there: the run equals one proxy's.
func TestFleetProxyKilled(t *testing.T) {
	t.Parallel()
	seqs := fleetSequences(t, 2, 24)
	pol := fleetPolicy(t)
	ctx := context.Background()
	replaced := 0.0
	for session, turns := range seqs {
		t.Run(session, func(t *testing.T) {
			fleet := startFleet(t, pol, 2, false)
			k := len(turns) / 2
			a, b := fleet.proxies[0], fleet.proxies[1]
			fleet.sendAll(ctx, session, turns[:k], 0, fleet.roundRobin)
			// A forwards k; the upstream holds it; A dies.
			killKey := session + "/killed"
			g := newGate()
			fleet.mu.Lock()
			fleet.hold[killKey] = g
			fleet.answers[killKey] = turns[k]
			fleet.mu.Unlock()
			cctx, cancel := context.WithCancel(ctx)
			errc := make(chan error, 1)
			go func() {
				a.now.Store(fleetBase.Add(time.Duration(k) * time.Second).UnixNano())
				req, _ := http.NewRequestWithContext(cctx, http.MethodPost, a.url+replay.Anthropic.Path(), bytes.NewReader(turns[k].Body))
				req.Header.Set(replay.Anthropic.SessionHeader(), session)
				req.Header.Set(turnHeader, killKey)
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				errc <- err
			}()
			<-g.reached
			a.be.dead.Store(true)
			cancel() // the client's connection breaks
			<-errc
			close(g.release)
			// The client retries k and goes on; the balancer has only B left.
			fleet.sendAll(ctx, session, turns[k:], k, func(int) *fleetProxy { return b })
			// The one-proxy run is fetched last: while another test makes
			// it, this one has run its fleet.
			base := oneProxy(t, pol, session, turns)
			compareRuns(t, session, len(turns), base, fleet)
			replaced += checkFleet(t, base, fleet)
		})
	}
	mustHavePruned(t, replaced)
}

// testLogger logs warnings and errors to the test's log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestFleetRecordLate: proxy A's record of request k is held past the
// fleet hold (request k's facts and application published), so the
// client's next request reaches B before the log holds A's record; B
// records the assistant's items itself. When A's record
// goes on, the items B stored stand (no fact id twice), A's model request
// is still stored (no fact lost), and nothing fails open.
func TestFleetRecordLate(t *testing.T) {
	t.Parallel()
	seqs := fleetSequences(t, 1, 8)
	pol := fleetPolicy(t)
	ctx := context.Background()
	for session, turns := range seqs {
		fleet := startFleet(t, pol, 2, false)
		a, b := fleet.proxies[0], fleet.proxies[1]
		k := len(turns) / 2
		fleet.sendAll(ctx, session, turns[:k], 0, fleet.roundRobin)
		g := newGate()
		a.be.recordGate.Store(g)
		// A's response ends once the hold expires (the record waits).
		// Its request's facts and application are published after
		// forwarding: B's request waits for them (were B first, A's
		// request would be recorded as failed open, TestFleetRace).
		published := a.be.onAppended()
		a.holdNow()
		if err := fleet.send(ctx, a, replay.Anthropic, session, k, k, turns[k]); err != nil {
			t.Fatal(err)
		}
		<-published
		<-g.reached
		if err := fleet.send(ctx, b, replay.Anthropic, session, k+1, k+1, turns[k+1]); err != nil {
			t.Fatal(err)
		}
		close(g.release)
		// The late record lands before the next request (one landing
		// while a request is in flight is TestFleetRace's case).
		if err := a.px.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		fleet.sendAll(ctx, session, turns[k+2:], k+2, func(int) *fleetProxy { return b })
		evs := fleet.settle(session)
		requests := modelRequestsOnce(t, evs)
		if sent := len(turns); requests != sent {
			t.Fatalf("%d model requests in the log for %d requests sent: one was lost", requests, sent)
		}
		noneFailedOpen(t, fleet)
	}
}

// modelRequestsOnce fails the test when a fact of evs is stored more than
// once, and returns how many model requests the log holds.
func modelRequestsOnce(t *testing.T, evs []events.Event) int {
	t.Helper()
	ids, requests := map[string]int{}, 0
	for _, e := range evs {
		if e.IsFact() {
			ids[e.ID]++
			if _, ok := e.Data.(*events.ModelRequest); ok {
				requests++
			}
		}
	}
	for id, n := range ids {
		if n > 1 {
			t.Fatalf("fact %s stored %d times", id, n)
		}
	}
	return requests
}
