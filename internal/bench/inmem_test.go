package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/bench/replay"
	"github.com/prunesched/prunesched/internal/decide"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/proxy"
)

// sharedTraces finds the shared traces: $PRUNESCHED_TRACES, or ../shared/traces
// beside the checkout (the main checkout or a worktree under /work/wt).
func sharedTraces(t *testing.T) []string {
	t.Helper()
	dirs := []string{os.Getenv("PRUNESCHED_TRACES"), "../../../shared/traces", "../../../../shared/traces"}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if paths, err := FindTraces(d); err == nil {
			return paths
		}
	}
	t.Skip("no shared traces (set PRUNESCHED_TRACES)")
	return nil
}

// wayRig is one prunesched proxy (deciding in memory, or through the log
// first) in front of a fake upstream that answers each replayed turn and
// records the body it was sent.
type wayRig struct {
	svc *service.Service
	px  *proxy.Proxy
	reg *prometheus.Registry
	url string
	up  string

	mu      sync.Mutex
	answers map[string]replay.Turn
	bodies  map[string][]byte
}

func startWay(t *testing.T, pol policy.Policy, mod func(*proxy.Config)) *wayRig {
	t.Helper()
	r := startService(t, pol)
	r.startProxy(t, service.NewProxyBackend(r.svc.Store, r.svc.Pipeline), mod)
	return r
}

func logFirst(c *proxy.Config)    { c.LogFirst = true }
func exactCounts(c *proxy.Config) { c.ExactCounts = true }

// startService starts prunesched and the fake upstream, without a proxy.
func startService(t *testing.T, pol policy.Policy) *wayRig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	r := &wayRig{svc: svc, answers: map[string]replay.Turn{}, bodies: map[string][]byte{}}
	r.up = serveTest(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		key := req.Header.Get(turnHeader)
		r.mu.Lock()
		r.bodies[key] = body
		turn, ok := r.answers[key]
		r.mu.Unlock()
		if !ok {
			http.Error(w, "unknown turn", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", turn.ContentType)
		_, _ = w.Write(turn.Answer)
	}))
	return r
}

func serveTest(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// startProxy starts a proxy over be in front of the rig's upstream (a
// previous one is left as it is: stop it first).
func (r *wayRig) startProxy(t *testing.T, be proxy.Backend, mod func(*proxy.Config)) {
	t.Helper()
	r.reg = prometheus.NewRegistry()
	cfg := proxy.Config{Upstream: r.up, Backend: be, Registry: r.reg, Budget: time.Hour}
	if mod != nil {
		mod(&cfg)
	}
	px, err := proxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.px = px
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = px.Close(ctx)
	})
	r.url = serveTest(t, px.Handler())
}

func (r *wayRig) send(t *testing.T, api replay.API, session, key string, turn replay.Turn) {
	t.Helper()
	if err := r.trySend(api, session, key, turn); err != nil {
		t.Fatal(err)
	}
}

// trySend sends one turn through the proxy and reads the whole answer.
func (r *wayRig) trySend(api replay.API, session, key string, turn replay.Turn) error {
	return r.trySendTo(r.url, api, session, key, turn)
}

// trySendTo sends one turn to base (the proxy or the upstream) and reads
// the whole answer.
func (r *wayRig) trySendTo(base string, api replay.API, session, key string, turn replay.Turn) error {
	r.mu.Lock()
	r.answers[key] = turn
	r.mu.Unlock()
	req, err := http.NewRequest(http.MethodPost, base+api.Path(), bytes.NewReader(turn.Body))
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(api.SessionHeader(), session)
	req.Header.Set(turnHeader, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d, %v", key, resp.StatusCode, err)
	}
	return nil
}

// body is the body the upstream received for a turn.
func (r *wayRig) body(key string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bodies[key]
}

// settle waits for the proxy's log writes and the pipeline, and returns
// the session's log.
func (r *wayRig) settle(t *testing.T, session string) []events.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := r.px.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.svc.Pipeline.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	var id string
	for _, s := range r.svc.Pipeline.Projection.Sessions() {
		if strings.HasPrefix(s.Session, session) {
			id = s.Session
		}
	}
	if id == "" {
		t.Fatalf("no session %s", session)
	}
	evs, err := r.svc.Store.ReadSession(ctx, events.DefaultTenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// applications returns the session's applications in log order, each
// encoded without what differs between runs by construction: its id and
// request (the proxy names each request with a random id), its stream
// sequence and the time (the request's arrival).
func applications(t *testing.T, evs []events.Event) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		a, ok := e.Data.(*events.Application)
		if !ok {
			continue
		}
		cp := *a
		// Marks caused by a model request derive their ids from the
		// request's (random) id: compared by what they apply (Items).
		cp.Request, cp.Marks = "", nil
		ev := events.New("x", e.Tenant, "s", time.Unix(0, 0).UTC(), &cp)
		b, err := events.EncodeValidated(ev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// TestInMemoryDecidesAsTheLog replays the shared traces' real request
// sequences (bench/replay, as `bench --only proxy-replay` does) through
// three proxies: one deciding through the log first (Config.LogFirst, the
// path before issue 28), one deciding in memory on exact token counts
// (Config.ExactCounts) and writing the log after forwarding, and the
// default (in memory, large new payloads decided on estimated counts).
// The first two must forward byte-identical bodies, request by request,
// and their logs must hold the same applications. For both in-memory
// proxies no decision may differ from the pipeline's decision from the
// log (prunesched_proxy_decision_divergences_total), and both cores run
// over their logs' facts (what analyze does) must reproduce the logged
// applications.
//
// Under -race, or with -short, it replays the first 12 requests of each
// Claude Code sequence, not streamed; otherwise every trace in every wire
// shape, the first 60 requests of each (about two minutes on 2 busy
// cores, 25 s idle; .ci/run's non-race stage runs it so);
// PRUNESCHED_REPLAY_ALL=1 replays every request.
func TestInMemoryDecidesAsTheLog(t *testing.T) {
	t.Parallel()
	small := raceEnabled || testing.Short()
	var formats []string // all
	if small {
		formats = []string{importers.FormatClaudeCode}
	}
	sessions := sharedSessions(t, formats...)
	limit := 60
	if small {
		limit = 12
	}
	if os.Getenv("PRUNESCHED_REPLAY_ALL") == "1" {
		limit = 0
	}
	pol := policy.Default()
	old, mem, est := startWay(t, pol, logFirst), startWay(t, pol, exactCounts), startWay(t, pol, nil)
	seqs := 0
	for _, s := range sessions {
		if small && s.format != importers.FormatClaudeCode {
			continue
		}
		seq := s.seq.Head(limit) // only the turns replayed
		for _, api := range replayShapes(s.format) {
			for _, stream := range []bool{false, true} {
				if small && stream {
					continue
				}
				turns := seq.Build(api, stream)
				if len(turns) == 0 {
					continue
				}
				seqs++
				session := fmt.Sprintf("eq-%s-%d-%s-%v", s.name, s.index, api, stream)
				for i, turn := range turns {
					key := session + "/" + strconv.Itoa(i)
					old.send(t, api, session, key, turn)
					mem.send(t, api, session, key, turn)
					est.send(t, api, session, key, turn)
					if a, b := old.body(key), mem.body(key); !bytes.Equal(a, b) {
						t.Fatalf("%s: the body forwarded differs (log first %d bytes, in memory %d bytes) at byte %d", key, len(a), len(b), firstDiff(a, b))
					}
				}
				oldLog, memLog := old.settle(t, session), mem.settle(t, session)
				oa, ma := applications(t, oldLog), applications(t, memLog)
				if strings.Join(oa, "\n") != strings.Join(ma, "\n") {
					t.Fatalf("%s: applications differ: log first %d, in memory %d\n%s\n%s", session, len(oa), len(ma), strings.Join(oa, "\n"), strings.Join(ma, "\n"))
				}
				checkAnalyze(t, session, pol, mem, memLog)
				checkAnalyze(t, session, pol, est, est.settle(t, session))
			}
		}
	}
	for _, r := range []*wayRig{mem, est} {
		if d := testutil.ToFloat64(mustCounter(t, r.reg, "prunesched_proxy_decision_divergences_total")); d != 0 {
			t.Fatalf("%v in-memory decisions differ from the pipeline's", d)
		}
		// One load per session (its first request): no state went stale.
		if n, want := testutil.ToFloat64(mustCounter(t, r.reg, "prunesched_proxy_session_loads_total")), len(r.svc.Pipeline.Projection.Sessions()); int(n) != want {
			t.Fatalf("%v session loads for %d sessions: some state went stale", n, want)
		}
	}
	t.Logf("%d sequences: bodies and applications identical", seqs)
}

// checkAnalyze runs both cores over the log's facts (what analyze and the
// lab run) and compares their applications with the log's.
func checkAnalyze(t *testing.T, session string, pol policy.Policy, r *wayRig, log []events.Event) {
	t.Helper()
	var facts, logged []events.Event
	for _, e := range log {
		if e.IsFact() {
			// The workers take the tenant from the subject: "" is the
			// default tenant's.
			if e.Tenant == "" {
				e.Tenant = events.DefaultTenant
			}
			facts = append(facts, e)
		} else if _, ok := e.Data.(*events.Application); ok {
			logged = append(logged, e)
		}
	}
	ctx := context.Background()
	_, apps := decide.Run(pol, facts, func(h string) ([]byte, error) { return r.svc.Store.GetBlob(ctx, h) })
	want, got := applications(t, logged), applications(t, apps)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Fatalf("%s: the cores over the log decide %d applications, the log holds %d\n%s\n%s", session, len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range logged {
		if logged[i].ID != apps[i].ID {
			t.Fatalf("%s: application %d: id %s from the cores, %s in the log", session, i, apps[i].ID, logged[i].ID)
		}
	}
}

func mustCounter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name}, func() float64 { return mf.GetMetric()[0].GetCounter().GetValue() })
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// killedBackend is a Backend whose log writes fail once killed: the proxy
// process "dies" (kill -9) after forwarding a request, before its log
// write. Reads still work (a fresh proxy reads the same log).
type killedBackend struct {
	proxy.Backend
	logs interface {
		ReadSession(ctx context.Context, tenant, session string) ([]events.Event, error)
		Tokens() events.TokenCounter
		PutBlob(ctx context.Context, hash string, data []byte) error
	}
	killed chan struct{}
}

func (k *killedBackend) dead() bool {
	select {
	case <-k.killed:
		return true
	default:
		return false
	}
}

func (k *killedBackend) Append(ctx context.Context, evs []events.Event) ([]events.Event, error) {
	if k.dead() {
		return nil, fmt.Errorf("killed")
	}
	return k.Backend.Append(ctx, evs)
}

func (k *killedBackend) DecideLive(ctx context.Context, tenant, session string, lastFact uint64, at time.Time, req string) (*events.Event, error) {
	if k.dead() {
		return nil, fmt.Errorf("killed")
	}
	return k.Backend.DecideLive(ctx, tenant, session, lastFact, at, req)
}

func (k *killedBackend) ReadSession(ctx context.Context, tenant, session string) ([]events.Event, error) {
	return k.logs.ReadSession(ctx, tenant, session)
}

func (k *killedBackend) Tokens() events.TokenCounter { return k.logs.Tokens() }

func (k *killedBackend) PutBlob(ctx context.Context, hash string, data []byte) error {
	if k.dead() {
		return fmt.Errorf("killed")
	}
	return k.logs.PutBlob(ctx, hash, data)
}

// TestKillAfterForwardingLosesNothing kills the proxy between forwarding a
// request and writing it to the log (every log write of the process fails
// from then on, and the process is dropped), starts a fresh proxy on the
// same log, and goes on with the sequence. The client resends the whole
// conversation, so the next request restores what the dead proxy never
// wrote: the session's items, the bodies forwarded from then on and the
// final bundle are those of an uninterrupted run. What cannot come back
// is the lost request's own model request (its usage), which only the
// dead proxy saw.
func TestKillAfterForwardingLosesNothing(t *testing.T) {
	t.Parallel()
	turns := claudeCodeTurns(t, 24)
	if len(turns) < 8 {
		t.Skip("no Claude Code trace long enough")
	}
	kill := len(turns) / 2
	pol := policy.Default()
	const session = "kill"
	api := replay.Anthropic

	whole := startWay(t, pol, nil)
	for i, turn := range turns {
		whole.send(t, api, session, session+"/"+strconv.Itoa(i), turn)
	}
	wholeLog := whole.settle(t, session)

	cut := startService(t, pol)
	be := &killedBackend{Backend: service.NewProxyBackend(cut.svc.Store, cut.svc.Pipeline), logs: cut.svc.Store, killed: make(chan struct{})}
	cut.startProxy(t, be, nil)
	for i, turn := range turns[:kill] {
		cut.send(t, api, session, session+"/"+strconv.Itoa(i), turn)
	}
	// The writes queued before the request the kill hits are in the log
	// (a kill loses every queued write: the facts come back with the next
	// request, the model requests' usage does not).
	cut.settle(t, session)
	close(be.killed)
	cut.send(t, api, session, session+"/"+strconv.Itoa(kill), turns[kill])
	// The process is gone: nothing it still had queued reaches the log.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = cut.px.Close(ctx)
	cut.startProxy(t, service.NewProxyBackend(cut.svc.Store, cut.svc.Pipeline), nil)
	for i := kill + 1; i < len(turns); i++ {
		key := session + "/" + strconv.Itoa(i)
		cut.send(t, api, session, key, turns[i])
		if want, got := whole.body(key), cut.body(key); !bytes.Equal(want, got) {
			t.Errorf("%s: the body forwarded after the restart differs from the uninterrupted run's at byte %d", key, firstDiff(want, got))
		}
	}
	cutLog := cut.settle(t, session)
	items := func(log []events.Event) []string {
		var out []string
		for _, e := range log {
			if e.IsFact() {
				if _, ok := e.Data.(*events.ModelRequest); !ok {
					out = append(out, e.ID)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	if a, b := items(wholeLog), items(cutLog); !slices.Equal(a, b) {
		t.Errorf("items differ: uninterrupted %d, killed and restarted %d", len(a), len(b))
	}
	if a, b := countRequests(wholeLog), countRequests(cutLog); b != a-1 {
		t.Errorf("model requests: uninterrupted %d, killed and restarted %d (want one fewer: the lost request's)", a, b)
	}
	bundle := func(r *wayRig) string {
		var out bytes.Buffer
		for _, s := range r.svc.Pipeline.Projection.Sessions() {
			if !strings.HasPrefix(s.Session, session) {
				continue
			}
			r.svc.Pipeline.Projection.View(s.Tenant, s.Session, func(ps *projections.Session) {
				for _, it := range ps.Snapshot().Bundle().Items {
					fmt.Fprintf(&out, "%s %s\n", it.ID, it.Placeholder)
				}
			})
		}
		return out.String()
	}
	if a, b := bundle(whole), bundle(cut); a != b {
		t.Errorf("bundles differ:\n%s\n---\n%s", a, b)
	}
}

func countRequests(log []events.Event) int {
	n := 0
	for _, e := range log {
		if _, ok := e.Data.(*events.ModelRequest); ok {
			n++
		}
	}
	return n
}

// TestEvictedSessionDecidesTheSame replays a shared trace through two
// proxies deciding in memory; the second drops every session's in-memory
// state after each request (Proxy.EvictIdle with a 1 ns idle time) so each
// request rebuilds it from the log. The bodies forwarded and the
// applications logged must be identical.
func TestEvictedSessionDecidesTheSame(t *testing.T) {
	t.Parallel()
	turns := claudeCodeTurns(t, 30)
	if len(turns) == 0 {
		t.Skip("no Claude Code trace")
	}
	pol := policy.Default()
	kept := startWay(t, pol, nil)
	evicted := startWay(t, pol, func(c *proxy.Config) { c.SessionIdle = time.Nanosecond })
	const session = "evict"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dropped := 0
	for i, turn := range turns {
		key := session + "/" + strconv.Itoa(i)
		kept.send(t, replay.Anthropic, session, key, turn)
		evicted.send(t, replay.Anthropic, session, key, turn)
		if want, got := kept.body(key), evicted.body(key); !bytes.Equal(want, got) {
			t.Fatalf("%s: the body forwarded after a rebuild from the log differs at byte %d", key, firstDiff(want, got))
		}
		if err := evicted.px.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		dropped += evicted.px.EvictIdle()
	}
	if dropped < len(turns) {
		t.Fatalf("%d states dropped over %d requests", dropped, len(turns))
	}
	if a, b := applications(t, kept.settle(t, session)), applications(t, evicted.settle(t, session)); strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("applications differ: kept %d, evicted %d", len(a), len(b))
	}
}

// claudeCodeTurns is the first shared Claude Code trace's request
// sequence (Anthropic Messages, not streamed), its first limit requests.
func claudeCodeTurns(t *testing.T, limit int) []replay.Turn {
	t.Helper()
	for _, s := range sharedSessions(t, importers.FormatClaudeCode) {
		if s.index == 0 && s.format == importers.FormatClaudeCode {
			return s.seq.Head(limit).Build(replay.Anthropic, false)
		}
	}
	return nil
}

// TestConcurrentSessions sends 50 sessions at once through one proxy with
// the default 200 ms budget, each replaying the first 30 requests of a
// shared Claude Code trace against an instant upstream, first through a
// proxy deciding through the log first (Config.LogFirst), then through
// one deciding in memory, and reports for each the share of requests
// that failed open, the requests per second and the p50 / p99 time
// through the proxy. It reports; it asserts no timing (the machine is
// shared). Skipped with -short.
func TestConcurrentSessions(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("load test: not with -short or -race")
	}
	turns := claudeCodeTurns(t, 30)
	if len(turns) == 0 {
		t.Skip("no Claude Code trace")
	}
	const sessions = 50
	for _, way := range []struct {
		name string
		mod  func(*proxy.Config)
	}{{"log first", func(c *proxy.Config) { c.LogFirst, c.Budget = true, proxy.DefaultBudget }}, {"in memory", func(c *proxy.Config) { c.Budget = proxy.DefaultBudget }}} {
		r := startWay(t, policy.Default(), way.mod)
		times, elapsed := r.sessionsAtOnce(t, "conc", sessions, turns, false)
		failed := 0.0
		mfs, err := r.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "prunesched_proxy_requests_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" && l.GetValue() == "fail_open" {
						failed += m.GetCounter().GetValue()
					}
				}
			}
		}
		p50, p99 := pctMs(times)
		t.Logf("%s: %d sessions x %d requests: %.1f%% failed open, %.0f requests/s, p50 %.2f ms, p99 %.2f ms through the proxy",
			way.name, sessions, len(turns), 100*failed/float64(len(times)), float64(len(times))/elapsed.Seconds(), p50, p99)
	}
}

// TestThroughputSweep sends 1, 2, 4, 8 and 16 sessions at once through one
// proxy deciding in memory (default budget), each the first 100 requests
// of a shared Claude Code trace against an instant upstream, each request
// sent straight to the upstream and then through the proxy, and reports
// at each level the proxied requests per second and the p50 / p99 added
// latency (time through the proxy minus the same request's direct time;
// the sessions' first requests left out). The highest rate whose p99
// added stays at or under 5 ms is what one proxy sustains at that bound
// on this machine (issue 28, item 6). It reports; it asserts no timing.
// Skipped with -short or -race.
func TestThroughputSweep(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("load test: not with -short or -race")
	}
	turns := claudeCodeTurns(t, 100)
	if len(turns) == 0 {
		t.Skip("no Claude Code trace")
	}
	r := startWay(t, policy.Default(), func(c *proxy.Config) { c.Budget = proxy.DefaultBudget })
	best := 0.0
	for _, n := range []int{1, 2, 4, 8, 16} {
		added, proxied := r.addedAtOnce(t, fmt.Sprintf("sweep-%d", n), n, turns)
		p50, p99 := pctMs(added)
		rate := float64(len(added)) / proxied.Seconds()
		if p99 <= 5 {
			best = max(best, rate)
		}
		t.Logf("%2d sessions at once: %.0f proxied requests/s, added p50 %.2f ms, p99 %.2f ms", n, rate, p50, p99)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := r.px.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	t.Logf("highest rate at p99 added <= 5 ms: %.0f requests/s (0: no level met it)", best)
}

// addedAtOnce replays turns as n sessions at once, each request straight
// to the upstream and then through the rig's proxy, and returns each
// proxied request's added latency (without the sessions' first requests)
// and the time spent in proxied requests summed over the sessions divided
// by n (the wall time the proxied requests alone would take).
func (r *wayRig) addedAtOnce(t *testing.T, prefix string, n int, turns []replay.Turn) ([]time.Duration, time.Duration) {
	t.Helper()
	var (
		mu      sync.Mutex
		added   []time.Duration
		proxied time.Duration
		wg      sync.WaitGroup
	)
	for s := range n {
		wg.Go(func() {
			session := fmt.Sprintf("%s-%d", prefix, s)
			for i, turn := range turns {
				key := session + "/" + strconv.Itoa(i)
				t0 := time.Now()
				if err := r.trySendTo(r.up, replay.Anthropic, session, key, turn); err != nil {
					t.Error(err) // not Fatal: another goroutine than the test's
					return
				}
				t1 := time.Now()
				if err := r.trySendTo(r.url, replay.Anthropic, session, key, turn); err != nil {
					t.Error(err)
					return
				}
				via, direct := time.Since(t1), t1.Sub(t0)
				mu.Lock()
				proxied += via
				if i > 0 { // the session's first request starts it
					added = append(added, via-direct)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return added, proxied / time.Duration(n)
}

// sessionsAtOnce replays turns as n sessions at once through the rig's
// proxy and returns each request's time through it (without the sessions'
// first requests when skipFirst) and the time the whole took.
func (r *wayRig) sessionsAtOnce(t *testing.T, prefix string, n int, turns []replay.Turn, skipFirst bool) ([]time.Duration, time.Duration) {
	t.Helper()
	var (
		mu    sync.Mutex
		times []time.Duration
		wg    sync.WaitGroup
	)
	start := time.Now()
	for s := range n {
		wg.Go(func() {
			session := fmt.Sprintf("%s-%d", prefix, s)
			for i, turn := range turns {
				t0 := time.Now()
				if err := r.trySend(replay.Anthropic, session, session+"/"+strconv.Itoa(i), turn); err != nil {
					t.Error(err) // not Fatal: another goroutine than the test's
					return
				}
				d := time.Since(t0)
				if i == 0 && skipFirst {
					continue // the session's first request starts it
				}
				mu.Lock()
				times = append(times, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return times, time.Since(start)
}

// TestInMemorySessionMemory measures what a session's in-memory state
// costs the proxy (issue 28, item 7): 40 sessions, each the first 30
// requests of a shared Claude Code trace, through one proxy deciding in
// memory; then the pipeline's idle sweep (twice: a sweep evicts what the
// one before saw unused) and the live heap with the proxy holding every
// session's state; then the proxy's eviction (Proxy.EvictIdle) and the
// heap again. Held per session is what the eviction freed; idle per
// session is the heap still above the rig's before the sessions, over the
// sessions: what the log keeps of them (the store's fact-id index, the
// server's per-subject state, the workers' compact forms), since an
// evicted session leaves nothing in the proxy. It reports; it asserts
// only that every state was evicted. Skipped with -short or -race.
func TestInMemorySessionMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("memory measurement: not with -short or -race")
	}
	turns := claudeCodeTurns(t, 30)
	if len(turns) == 0 {
		t.Skip("no Claude Code trace")
	}
	r := startWay(t, policy.Default(), func(c *proxy.Config) { c.SessionIdle = time.Nanosecond })
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	settle := func() {
		t.Helper()
		if err := r.px.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.svc.Pipeline.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		r.svc.Pipeline.EvictIdle()
		r.svc.Pipeline.EvictIdle()
	}
	// A first session warms the rig (consumers, caches, the tokenizer).
	r.sessionsAtOnce(t, "warm", 1, turns, false)
	settle()
	r.px.EvictIdle()
	heap := func(ctx context.Context) int64 {
		// Not the rig's: the bodies its upstream recorded.
		r.mu.Lock()
		clear(r.bodies)
		r.mu.Unlock()
		return (&runner{}).settledHeap(ctx) // the server's caches expired
	}
	before := heap(ctx)
	const n = 40
	r.sessionsAtOnce(t, "mem", n, turns, false)
	settle()
	held := heap(ctx)
	if got := r.px.EvictIdle(); got < n {
		t.Fatalf("%d of %d session states evicted", got, n)
	}
	idle := heap(ctx)
	rest := fmt.Sprintf("%.1f KiB per session", float64(idle-before)/n/1024)
	if idle < before {
		rest = "below the heap's noise (" + rest + " measured)"
	}
	t.Logf("%d sessions of %d requests: live heap %.1f MiB before, %.1f MiB with the proxy holding them, %.1f MiB once evicted; held %.0f KiB per session; idle %s: the log's share, the proxy keeps nothing of an evicted session",
		n, len(turns), float64(before)/(1<<20), float64(held)/(1<<20), float64(idle)/(1<<20), float64(held-idle)/n/1024, rest)
}
