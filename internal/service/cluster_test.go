//go:build cluster

package service

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/pipeline"
)

// freePort returns a loopback TCP port free at the time of the call.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startCluster starts a three-node JetStream cluster in this process, on
// loopback, with file storage under t.TempDir(), the way nats-server's own
// tests do (createJetStreamClusterExplicit): explicit routes between the
// three cluster listeners. The route ports are picked free (freePort) and
// then closed for the servers to bind, so another socket can take one in
// between (an outgoing connection's local port, under the earlier
// subtests' many connections): that node never becomes ready. Such a
// cluster is shut down and started again on fresh ports, at most three
// times.
func startCluster(t *testing.T) []*server.Server {
	t.Helper()
	for attempt := 1; ; attempt++ {
		srvs, err := tryStartCluster(t)
		if err == nil {
			for _, srv := range srvs {
				t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
			}
			// Wait for a JetStream meta leader.
			testutil.Eventually(t, func() error {
				for _, s := range srvs {
					if s.JetStreamIsLeader() {
						return nil
					}
				}
				return errors.New("no JetStream meta leader")
			})
			return srvs
		}
		if attempt == 3 {
			t.Fatalf("start a three-node cluster, attempt %d: %v", attempt, err)
		}
		t.Logf("start a three-node cluster, attempt %d: %v; again on fresh ports", attempt, err)
	}
}

// tryStartCluster starts the three nodes on fresh ports and waits until
// each accepts connections; on failure it shuts down what it started.
func tryStartCluster(t *testing.T) ([]*server.Server, error) {
	t.Helper()
	ports := []int{freePort(t), freePort(t), freePort(t)}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	var srvs []*server.Server
	stop := func() {
		for _, srv := range srvs {
			srv.Shutdown()
			srv.WaitForShutdown()
		}
	}
	for i, p := range ports {
		opts := nodeOptions(fmt.Sprintf("ps-n%d", i+1), filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i+1)), -1, p, routes)
		srv, err := server.NewServer(opts)
		if err != nil {
			stop()
			return nil, fmt.Errorf("new server ps-n%d: %w", i+1, err)
		}
		srv.Start()
		srvs = append(srvs, srv)
	}
	for _, s := range srvs {
		if !s.ReadyForConnections(10 * time.Second) {
			stop()
			return nil, fmt.Errorf("%s not ready (route ports %v)", s.Name(), ports)
		}
	}
	return srvs, nil
}

// nodeOptions are the options of one node of the test cluster: named
// name, storing under dir, its client listener on clientPort (-1: any
// free one), its route listener on port, routes to every node's.
func nodeOptions(name, dir string, clientPort, port int, routes []string) *server.Options {
	return &server.Options{
		ServerName: name,
		Host:       "127.0.0.1",
		Port:       clientPort,
		JetStream:  true,
		StoreDir:   dir,
		MaxPayload: store.DefaultMaxPayload,
		NoSigs:     true,
		NoLog:      true,
		Cluster:    server.ClusterOpts{Name: "prunesched", Host: "127.0.0.1", Port: port},
		Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
	}
}

func clusterURLs(srvs []*server.Server) string {
	var urls []string
	for _, s := range srvs {
		urls = append(urls, s.ClientURL())
	}
	return strings.Join(urls, ",")
}

// worker is a `prunesched worker` process.
type worker struct {
	name string
	cmd  *exec.Cmd
	addr string // HTTP address
	log  string // stderr file
	done chan error
}

func startWorker(t *testing.T, bin, name, comp, urls string, extra ...string) *worker {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"worker", comp, "--nats", urls, "--replicas", "3", "--listen", "127.0.0.1:0",
		"--pinned-ttl", "2s", "--ack-wait", "2s", "--lag-interval", "1s"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &worker{name: name, cmd: cmd, log: logPath, done: make(chan error, 1)}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, a, ok := strings.Cut(sc.Text(), " on http://"); ok {
				addrc <- a
			}
		}
	}()
	go func() { w.done <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(string(b), "\n")
			t.Logf("--- %s log (last 30 lines)\n%s", name, strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
	})
	select {
	case w.addr = <-addrc:
	case err := <-w.done:
		b, _ := os.ReadFile(logPath)
		t.Fatalf("%s exited: %v\n%s", name, err, b)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start", name)
	}
	return w
}

// kill9 kills the process without letting it clean up.
func (w *worker) kill9(t *testing.T) {
	t.Helper()
	if err := w.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-w.done
	w.done <- errors.New("killed")
}

// input is the test's sessions: the sample renamed several times, and a
// couple of real Claude Code traces when ../shared/traces is present.
func clusterInput(t *testing.T) [][]events.Event {
	t.Helper()
	f, err := os.Open(sample)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	base, err := events.DecodeJSONL(f, "sample-session.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]events.Event
	for i := 0; i < 6; i++ {
		s := slices.Clone(base)
		for j := range s {
			s[j].Session = fmt.Sprintf("sample-%d", i)
		}
		out = append(out, s)
	}
	for _, name := range []string{"entirecli-60-1ac0eb4d69-0.jsonl", "entirecli-13-db96e5c261-0.jsonl"} {
		path := filepath.Join("..", "..", "..", "shared", "traces", "claude-code", name)
		if _, err := os.Stat(path); err != nil {
			t.Logf("trace %s not present: skipped", path)
			continue
		}
		sessions, err := importers.Import(path, importers.FormatAuto)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		for _, s := range sessions {
			out = append(out, s.Events)
		}
	}
	return out
}

// chunks interleaves the sessions' events in batches of n, round robin.
func chunks(sessions [][]events.Event, n int) [][]events.Event {
	var out [][]events.Event
	for off := 0; ; off += n {
		any := false
		for _, s := range sessions {
			if off < len(s) {
				out = append(out, s[off:min(off+n, len(s))])
				any = true
			}
		}
		if !any {
			return out
		}
	}
}

// appendRetry appends a batch, retrying through a server going away (the
// append is idempotent by event id within the duplicates window).
//
// Each attempt has its own short deadline: while the cluster elects new
// stream leaders after a server goes down, a request can hang until its
// deadline, and one hung attempt must not use up the test's whole budget.
// The deadline is longer than the store's publish timeout, so an attempt is
// cut in its prepare phase (blobs, before any event is published), never
// half way through publishing a batch (a retry would reorder its facts).
func appendRetry(t *testing.T, ctx context.Context, st *store.Store, evs []events.Event) {
	t.Helper()
	attempt := 0
	testutil.Eventually(t, func() error {
		attempt++
		actx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if _, err := st.Append(actx, evs); err != nil {
			t.Logf("append attempt %d: %v (retrying)", attempt, err)
			return fmt.Errorf("append: %w", err)
		}
		return nil
	}, testutil.Within(2*time.Minute), testutil.Until(ctx))
}

// views fetches what the API shows of a session: decisions and bundles.
func views(t *testing.T, base, session string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, path := range map[string]string{
		"decisions": "/v1/sessions/" + session + "/decisions",
		"text":      "/v1/sessions/" + session + "/bundle?format=text",
		"anthropic": "/v1/sessions/" + session + "/bundle?format=anthropic",
		"openai":    "/v1/sessions/" + session + "/bundle?format=openai",
	} {
		code, b := httpDo(t, "GET", base+path, nil)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, b)
		}
		out[name] = b
	}
	return out
}

// requestTimeout bounds one request of the test to the cluster. While a
// server goes away and the cluster elects new leaders, a request can go
// unanswered; with the test's own deadline it would wait minutes (the
// cluster answers a new one at once).
const requestTimeout = 5 * time.Second

// bounded runs f with a context of at most requestTimeout.
func bounded[T any](ctx context.Context, f func(ctx context.Context) (T, error)) (T, error) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return f(rctx)
}

// waitPulling waits until every partition consumer of a worker kind
// (prefix) has a pull request waiting: the first worker of that kind is
// consuming every partition (the server pins it at the first fact).
func waitPulling(t *testing.T, ctx context.Context, st *store.Store, prefix string) {
	t.Helper()
	testutil.Eventually(t, func() error {
		for p := 0; p < st.Partitions(); p++ {
			durable := pipeline.DurableName(prefix, p)
			ci, err := bounded(ctx, func(ctx context.Context) (*jetstream.ConsumerInfo, error) {
				c, err := st.JS().Consumer(ctx, events.StreamName, durable)
				if err != nil {
					return nil, err
				}
				return c.Info(ctx)
			})
			if err != nil {
				return fmt.Errorf("consumer %s: %w", durable, err)
			}
			if ci.NumWaiting == 0 {
				return fmt.Errorf("consumer %s: no pull request waiting", durable)
			}
		}
		return nil
	}, testutil.Within(60*time.Second), testutil.Until(ctx))

}

// fleetIdle reports whether every partition consumer is done and the
// projector has applied the whole stream.
func fleetIdle(ctx context.Context, st *store.Store, projector string) (bool, error) {
	last, err := bounded(ctx, st.StreamLastSeq)
	if err != nil {
		return false, err
	}
	for p := 0; p < st.Partitions(); p++ {
		for _, prefix := range []string{pipeline.DurableEligibility, pipeline.DurableScheduler} {
			lag, err := bounded(ctx, func(ctx context.Context) (uint64, error) {
				return st.ConsumerLag(ctx, pipeline.DurableName(prefix, p))
			})
			if err != nil || lag > 0 {
				return false, nil
			}
		}
	}
	resp, err := http.Get(projector + "/readyz")
	if err != nil {
		return false, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !bytes.Contains(b, []byte(fmt.Sprintf(`"projection_seq": %d`, last))) {
		return false, nil
	}
	again, err := bounded(ctx, st.StreamLastSeq)
	return err == nil && again == last, err
}

// TestClusterFleetMatchesEmbedded runs the workers as separate processes on
// a real three-node JetStream cluster (R3 stream), kills one eligibility
// worker with SIGKILL and shuts down one server while events flow, and
// checks that the decisions and bundles equal the embedded mode's on the
// same input, with every mark and application stored exactly once.
func TestClusterFleetMatchesEmbedded(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	input := clusterInput(t)
	var sessionNames []string
	total := 0
	for _, s := range input {
		sessionNames = append(sessionNames, s[0].Session)
		total += len(s)
	}
	t.Logf("input: %d sessions, %d events", len(input), total)

	// The reference: the same input through the embedded single process.
	want, embStore := embeddedViews(t, ctx, input)
	t.Logf("embedded reference done in %s", time.Since(start).Round(time.Millisecond))

	// The fleet.
	bin := buildBinary(t, ctx)
	t.Logf("binary built at %s", time.Since(start).Round(time.Millisecond))
	srvs, urls, st := clusterStore(t, ctx)
	info, err := st.JS().Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if r := info.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("stream replicas %d, want 3", r)
	}
	t.Logf("cluster up at %s", time.Since(start).Round(time.Millisecond))

	elig1 := startWorker(t, bin, "eligibility-1", "eligibility", urls)
	// The first worker pulls on every partition (it takes the pins at
	// the first facts), then its standby starts.
	waitPulling(t, ctx, st, pipeline.DurableEligibility)
	elig2 := startWorker(t, bin, "eligibility-2", "eligibility", urls)
	startWorker(t, bin, "scheduler-1", "scheduler", urls)
	startWorker(t, bin, "scheduler-2", "scheduler", urls)
	proj := startWorker(t, bin, "projector", "projector", urls)
	t.Logf("fleet up at %s", time.Since(start).Round(time.Millisecond))

	batches := chunks(input, 6)
	cut := len(batches) * 2 / 5
	for _, b := range batches[:cut] {
		appendRetry(t, ctx, st, b)
	}
	// Midway, while events still flow: SIGKILL the eligibility worker that
	// holds the partitions, and shut down one NATS server.
	testutil.Eventually(t, func() error {
		last, err := bounded(ctx, func(ctx context.Context) (uint64, error) {
			return st.LastSeq(ctx, "", sessionNames[0], events.KindMark)
		})
		if err != nil || last == 0 {
			return errors.New("no mark yet")
		}
		return nil
	}, testutil.Within(30*time.Second), testutil.Until(ctx))

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, b := range batches[cut : cut+(len(batches)-cut)/2] {
			appendRetry(t, ctx, st, b)
		}
	}()
	var lag uint64
	for p := 0; p < st.Partitions(); p++ {
		n, _ := bounded(ctx, func(ctx context.Context) (uint64, error) {
			return st.ConsumerLag(ctx, pipeline.DurableName(pipeline.DurableEligibility, p))
		})
		lag += n
	}
	t.Logf("eligibility lag when killing: %d events", lag)
	elig1.kill9(t)
	downed := srvs[1]
	downed.Shutdown()
	downed.WaitForShutdown()
	t.Logf("killed %s and shut down %s at %s", elig1.name, downed.Name(), time.Since(start).Round(time.Millisecond))
	wg.Wait()
	for _, b := range batches[cut+(len(batches)-cut)/2:] {
		appendRetry(t, ctx, st, b)
	}
	t.Logf("all %d batches appended at %s", len(batches), time.Since(start).Round(time.Millisecond))

	projector := "http://" + proj.addr
	waitFleetIdle(t, ctx, st, projector)
	t.Logf("fleet idle at %s", time.Since(start).Round(time.Millisecond))

	marks, apps := checkAgainstEmbedded(t, ctx, st, embStore, projector, want)
	if marks == 0 || apps == 0 {
		t.Fatal("the input produced no marks or no applications")
	}
	// Redeliveries happened (the killed worker's event) but were harmless.
	for p := 0; p < st.Partitions(); p++ {
		c, err := st.JS().Consumer(ctx, events.StreamName, pipeline.DurableName(pipeline.DurableEligibility, p))
		if err != nil {
			t.Fatal(err)
		}
		ci, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ci.Config.PriorityPolicy != jetstream.PriorityPolicyPinned || ci.Config.Replicas != 0 && ci.Config.Replicas != 3 {
			t.Errorf("consumer %s: policy %v replicas %d", ci.Name, ci.Config.PriorityPolicy, ci.Config.Replicas)
		}
		if ci.NumRedelivered > 0 {
			t.Logf("partition %d: %d redelivered", p, ci.NumRedelivered)
		}
	}
	// The standby took the killed worker's partitions over and judged facts.
	code, body := httpDo(t, "GET", "http://"+elig2.addr+"/metrics", nil)
	if code != 200 || !strings.Contains(string(body), pipeline.MetricDecisions+"{") {
		t.Errorf("eligibility-2 /metrics: %d, it judged nothing after the failover", code)
	}
	// Every worker serves /metrics.
	code, body = httpDo(t, "GET", projector+"/metrics", nil)
	if code != 200 || !strings.Contains(string(body), pipeline.MetricConsumerLag) {
		t.Errorf("projector /metrics: %d, no %s", code, pipeline.MetricConsumerLag)
	}
	t.Logf("total %s", time.Since(start).Round(time.Millisecond))
}

// firstDiff returns the offset of the first byte where a and b differ and
// a window of each around it: long views share kilobytes of prefix, which
// a clip from the start would show instead of the difference.
func firstDiff(a, b []byte) (at int, wa, wb string) {
	for at < len(a) && at < len(b) && a[at] == b[at] {
		at++
	}
	window := func(x []byte) string {
		lo, hi := max(0, at-600), min(len(x), at+1400)
		return "..." + string(x[lo:hi]) + "..."
	}
	return at, window(a), window(b)
}

// embeddedViews replays input through the embedded single process and
// returns every session's views and the store holding its log.
func embeddedViews(t *testing.T, ctx context.Context, input [][]events.Event) (map[string]map[string][]byte, *store.Store) {
	t.Helper()
	emb := startT(t, t.TempDir())
	t.Cleanup(func() { emb.Close() })
	for _, s := range input {
		if _, err := emb.Store.Append(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := emb.Pipeline.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string][]byte{}
	for _, s := range input {
		want[s[0].Session] = views(t, "http://"+emb.HTTPAddr, s[0].Session)
	}
	return want, emb.Store
}

// checkAgainstEmbedded checks the cluster's log (st) and its projector's
// views against the embedded replay's (ref, want, by session): every
// session's facts in the same order (an append cut half way and retried
// would store a fact after later ones: then the logs differ, not the
// decisions), every view byte for byte, and every mark and application
// of the embedded log stored once, and no other. It returns the embedded
// log's marks and applications.
func checkAgainstEmbedded(t *testing.T, ctx context.Context, st, ref *store.Store, projector string, want map[string]map[string][]byte) (marks, apps int) {
	t.Helper()
	factOrder := func(st *store.Store, session string) []string {
		evs, err := st.ReadSession(ctx, "", session)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range evs {
			if e.IsFact() {
				ids = append(ids, e.ID)
			}
		}
		return ids
	}
	sessions := slices.Sorted(maps.Keys(want))
	for _, s := range sessions {
		got, exp := factOrder(st, s), factOrder(ref, s)
		if !slices.Equal(got, exp) {
			i := 0
			for i < min(len(got), len(exp)) && got[i] == exp[i] {
				i++
			}
			t.Errorf("session %s: the cluster log holds its facts in another order from fact %d: %v, embedded %v", s, i, got[i:min(len(got), i+4)], exp[i:min(len(exp), i+4)])
		}
	}
	for _, s := range sessions {
		got := views(t, projector, s)
		for _, name := range slices.Sorted(maps.Keys(want[s])) {
			if w := want[s][name]; !bytes.Equal(got[name], w) {
				at, g, e := firstDiff(got[name], w)
				t.Errorf("session %s: %s differs from the embedded mode at byte %d of %d/%d:\n%s\n--- embedded\n%s", s, name, at, len(got[name]), len(w), g, e)
			}
		}
	}
	ids := func(st *store.Store) map[string]int {
		out := map[string]int{}
		if _, err := st.ReadAll(ctx, 0, func(e events.Event) error {
			if !e.IsFact() {
				out[string(e.Type)+" "+e.Session+"/"+e.ID]++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got, exp := ids(st), ids(ref)
	for id, n := range got {
		if n != 1 {
			t.Errorf("%s stored %d times", id, n)
		}
		if exp[id] == 0 {
			t.Errorf("%s is not in the embedded log", id)
		}
	}
	for id := range exp {
		if got[id] == 0 {
			t.Errorf("%s lost on the cluster", id)
		}
		if strings.HasPrefix(id, string(events.TypeMark)+" ") {
			marks++
		} else {
			apps++
		}
	}
	t.Logf("marks and applications: cluster %d, embedded %d (%d marks)", len(got), len(exp), marks)
	return marks, apps
}

// buildBinary builds cmd/prunesched into a temporary directory.
func buildBinary(t *testing.T, ctx context.Context) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "prunesched")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../../cmd/prunesched").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// clusterStore starts a three-node cluster (startCluster) and opens the
// store on it with three replicas, through a connection given all three
// URLs; it returns the servers, the URLs and the store.
func clusterStore(t *testing.T, ctx context.Context) ([]*server.Server, string, *store.Store) {
	t.Helper()
	srvs := startCluster(t)
	urls := clusterURLs(srvs)
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return srvs, urls, openClusterStore(t, ctx, nc)
}

// openClusterStore opens the store with three replicas on nc, asking
// again while the cluster is not ready: the meta leader can be elected
// before it knows every peer (a loaded machine), and the stream's three
// replicas are placed once it does.
func openClusterStore(t *testing.T, ctx context.Context, nc *nats.Conn) *store.Store {
	t.Helper()
	var st *store.Store
	testutil.Eventually(t, func() error {
		var err error
		st, err = bounded(ctx, func(ctx context.Context) (*store.Store, error) {
			return store.Open(ctx, nc, store.Config{Replicas: 3}, nil)
		})
		return err
	}, testutil.Within(time.Minute), testutil.Until(ctx))
	return st
}

// waitFleetIdle waits until the fleet is idle (fleetIdle).
func waitFleetIdle(t *testing.T, ctx context.Context, st *store.Store, projector string) {
	t.Helper()
	testutil.Eventually(t, func() error {
		ok, err := fleetIdle(ctx, st, projector)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("fleet busy")
		}
		return nil
	}, testutil.Within(3*time.Minute), testutil.Until(ctx))

}

// downNode is a node of the test cluster shut down, with what starting it
// again on the same store and route port needs.
type downNode struct {
	name, dir  string
	clientPort int
	port       int
	routes     []string
}

// shutdownNode shuts srv, one of srvs, down (its Raft leaderships stepped
// down, as a clean shutdown does) and returns what restarting it needs.
func shutdownNode(srv *server.Server, srvs []*server.Server) downNode {
	d := downNode{name: srv.Name(), dir: srv.StoreDir(), clientPort: srv.Addr().(*net.TCPAddr).Port, port: srv.ClusterAddr().Port}
	if filepath.Base(d.dir) == server.JetStreamStoreDir {
		d.dir = filepath.Dir(d.dir) // the server adds it again
	}
	for _, s := range srvs {
		d.routes = append(d.routes, fmt.Sprintf("nats-route://%s", s.ClusterAddr()))
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	return d
}

// restart starts the node again, on the same ports, and shuts it down at
// cleanup.
func (d downNode) restart(t *testing.T) *server.Server {
	t.Helper()
	srv, err := server.NewServer(nodeOptions(d.name, d.dir, d.clientPort, d.port, d.routes))
	if err != nil {
		t.Fatalf("restart %s: %v", d.name, err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(30 * time.Second) {
		t.Fatalf("restart %s: not ready (route port %d taken?)", d.name, d.port)
	}
	return srv
}

// TestClusterWaitsOutliveLeaderElection: a wait's state requests (a
// durable's ack floor, the stream's last sequence) sent while the Raft
// groups that answer them have no leader are answered once a leader is
// elected, instead of failing at the caller's deadline. The cluster is
// shut down and one node started again: alone it has no quorum, its
// groups elect no leader and it answers nothing. The requests are sent to
// it then; a second node is started, and the groups elect leaders.
func TestClusterWaitsOutliveLeaderElection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	srvs, _, st := clusterStore(t, ctx)

	session := "waits-" + events.NewID()[:8]
	var evs []events.Event
	for i := range 4 {
		evs = append(evs, events.New(fmt.Sprintf("e%d", i), "", session, time.Date(2026, 12, 1, 10, 0, i, 0, time.UTC),
			&events.Message{Item: fmt.Sprintf("m%d", i), Role: events.RoleUser, Text: "hello"}))
	}
	appendRetry(t, ctx, st, evs)
	// Set-up requests are asked again whole: a young cluster on a loaded
	// machine can take longer than requestTimeout to answer one.
	var stored []events.Event
	testutil.Eventually(t, func() error {
		var err error
		stored, err = bounded(ctx, func(ctx context.Context) ([]events.Event, error) { return st.ReadSession(ctx, "", session) })
		if err == nil && len(stored) != len(evs) {
			err = fmt.Errorf("read %d events, want %d", len(stored), len(evs))
		}
		return err
	}, testutil.Within(time.Minute), testutil.Until(ctx))
	last := stored[len(stored)-1].Seq

	// A replicated durable that acknowledged the first two events, and its
	// leader.
	const durable = "waited"
	var leader string
	testutil.Eventually(t, func() error {
		ci, err := bounded(ctx, func(ctx context.Context) (*jetstream.ConsumerInfo, error) {
			c, err := st.JS().CreateOrUpdateConsumer(ctx, events.StreamName, jetstream.ConsumerConfig{
				Durable: durable, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: events.SubjectPrefix + ".>",
			})
			if err != nil {
				return nil, err
			}
			return c.Info(ctx)
		})
		if err != nil {
			return err
		}
		if ci.Cluster == nil || ci.Cluster.Leader == "" || len(ci.Cluster.Replicas) != 2 {
			return errors.New("the durable has no leader or not three replicas yet")
		}
		leader = ci.Cluster.Leader
		return nil
	}, testutil.Within(time.Minute), testutil.Until(ctx))
	testutil.Eventually(t, func() error {
		floor, err := bounded(ctx, func(ctx context.Context) (uint64, error) {
			c, err := st.JS().Consumer(ctx, events.StreamName, durable)
			if err != nil {
				return 0, err
			}
			if c.CachedInfo().AckFloor.Stream >= stored[1].Seq {
				return c.CachedInfo().AckFloor.Stream, nil
			}
			batch, err := c.Fetch(1, jetstream.FetchMaxWait(time.Second))
			if err != nil {
				return 0, err
			}
			for m := range batch.Messages() {
				if err := m.DoubleAck(ctx); err != nil {
					return 0, err
				}
			}
			return 0, batch.Error()
		})
		if err != nil {
			return err
		}
		if floor != stored[1].Seq {
			return fmt.Errorf("ack floor %d, want %d", floor, stored[1].Seq)
		}
		return nil
	}, testutil.Within(time.Minute), testutil.Until(ctx))

	// The survivor: a node other than the leader. The waiting store talks
	// to it alone, so each request it sends reaches a node of the groups.
	// The waiting store talks to one node only, reconnecting to it when it
	// is started again.
	first := srvs[2]
	nc, err := nats.Connect(first.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	testutil.NoError(t, err)
	t.Cleanup(nc.Close)
	waiter := openClusterStore(t, ctx, nc)

	var down []downNode
	for _, s := range srvs {
		down = append(down, shutdownNode(s, srvs))
	}
	down[2].restart(t)
	t.Logf("cluster shut down (the durable's leader was %s); %s started again alone", leader, down[2].name)
	testutil.Eventually(t, func() error {
		if !nc.IsConnected() {
			return errors.New("not reconnected")
		}
		return nil
	}, testutil.Within(time.Minute), testutil.Until(ctx))

	sent := nc.Stats().OutMsgs
	type answer struct {
		v   uint64
		err error
	}
	floorc, lastc := make(chan answer, 1), make(chan answer, 1)
	go func() {
		v, err := waiter.AckFloor(ctx, durable)
		floorc <- answer{v, err}
	}()
	go func() {
		v, err := waiter.StreamLastSeq(ctx)
		lastc <- answer{v, err}
	}()
	// Both requests went out while no group could elect a leader.
	testutil.Eventually(t, func() error {
		if n := nc.Stats().OutMsgs - sent; n < 2 {
			return fmt.Errorf("%d requests sent", n)
		}
		return nil
	}, testutil.Within(time.Minute), testutil.Until(ctx))
	down[0].restart(t)
	t.Logf("started %s again", down[0].name)

	floor := <-floorc
	testutil.NoError(t, floor.err)
	testutil.Equal(t, floor.v, stored[1].Seq, "ack floor")
	lastSeq := <-lastc
	testutil.NoError(t, lastSeq.err)
	testutil.Equal(t, lastSeq.v, last, "stream last seq")
}
