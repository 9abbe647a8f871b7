//go:build cluster

package bench

import (
	"context"
	"fmt"
	"net"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/internal/bench/replay"
	"github.com/prunesched/prunesched/internal/service"
	"github.com/prunesched/prunesched/internal/testutil"
)

// TestComposeFleetInProcess is deploy/compose.yaml in one process, where
// no Docker daemon runs: three JetStream nodes whose routes and clients
// authenticate (route user "route", service user "prunesched"), the
// pipeline workers on their own connection, two --fleet proxies each
// with its own connection, store and pipeline and one identity key, and
// a plain round-robin balancer in front of them (no session affinity).
// One real conversation sent through the balancer must be pruned as one
// proxy on an embedded log prunes it: the same forwarded bodies, facts
// and applications, and no request failing open.
func TestComposeFleetInProcess(t *testing.T) {
	seqs := fleetSequences(t, 2, 40)
	pol := fleetPolicy(t)
	const servicePW, routePW = "service-pw-0123456789", "route-pw-0123456789"
	srvs := startAuthCluster(t, servicePW, routePW)
	var urls []string
	for _, s := range srvs {
		u, _ := url.Parse(s.ClientURL())
		u.User = url.UserPassword(store.ServiceUser, servicePW)
		urls = append(urls, u.String())
	}
	natsURL := strings.Join(urls, ",")
	fleet := startFleetOn(t, service.Config{NATSURL: natsURL, Replicas: 3, Policy: pol},
		func() (*nats.Conn, error) { return nats.Connect(natsURL, nats.MaxReconnects(-1)) }, 2, false)
	// The balancer: round robin, responses streamed.
	var next atomic.Uint64
	var targets []*url.URL
	for _, fp := range fleet.proxies {
		u, _ := url.Parse(fp.url)
		targets = append(targets, u)
	}
	lb := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(targets[next.Add(1)%uint64(len(targets))])
			pr.Out.Host = pr.In.Host
		},
		FlushInterval: -1,
	}
	lbURL := serveTest(t, lb)
	ctx := context.Background()
	replaced := 0.0
	for session, turns := range seqs {
		base := oneProxy(t, pol, session, turns)
		for i, turn := range turns {
			at := fleetBase.Add(time.Duration(i) * time.Second).UnixNano()
			for _, fp := range fleet.proxies {
				fp.now.Store(at)
			}
			key := session + "/" + strconv.Itoa(i)
			fleet.mu.Lock()
			fleet.answers[key] = turn
			fleet.mu.Unlock()
			if err := fleet.post(ctx, lbURL, replay.Anthropic, session, key, turn); err != nil {
				t.Fatal(err)
			}
		}
		compareRuns(t, session, len(turns), base, fleet)
		replaced += checkFleet(t, base, fleet)
	}
	mustHavePruned(t, replaced)
	if c := fleet.sum("prunesched_proxy_fleet_catchups_total"); c == 0 {
		t.Fatal("no proxy caught up: the balancer did not alternate")
	}
}

// startAuthCluster starts three JetStream nodes on loopback whose routes
// authenticate as "route" and whose clients as the service user, and
// returns them once routed with a meta leader.
func startAuthCluster(t *testing.T, servicePW, routePW string) []*server.Server {
	t.Helper()
	ports := make([]int, 3)
	var routes []string
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		routes = append(routes, fmt.Sprintf("nats-route://route:%s@127.0.0.1:%d", routePW, ports[i]))
	}
	var srvs []*server.Server
	for i, p := range ports {
		opts := &server.Options{
			ServerName: fmt.Sprintf("ps-n%d", i+1), Host: "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: filepath.Join(t.TempDir(), strconv.Itoa(i)), MaxPayload: store.DefaultMaxPayload,
			NoSigs: true, NoLog: true,
			Users:   []*server.User{{Username: store.ServiceUser, Password: servicePW, Permissions: store.ServicePermissions()}},
			Cluster: server.ClusterOpts{Name: "prunesched", Host: "127.0.0.1", Port: p, Username: "route", Password: routePW},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		}
		srv, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		srv.Start()
		srvs = append(srvs, srv)
		t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	}
	testutil.Eventually(t, func() error {
		leader, routed := false, true
		for _, s := range srvs {
			leader = leader || s.JetStreamIsLeader()
			routed = routed && s.NumRoutes() >= len(srvs)-1
		}
		if !leader || !routed {
			return fmt.Errorf("the cluster has not formed (meta leader %v, all routed %v)", leader, routed)
		}
		return nil
	}, testutil.Within(time.Minute))
	return srvs
}
