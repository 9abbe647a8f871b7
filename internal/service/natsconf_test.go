package service

import (
	"bufio"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prunesched/prunesched/internal/testutil"
)

// TestClusterConfigsParse checks that deploy/nats holds three JetStream
// nodes of one cluster whose routes authenticate: a cluster
// authorization with the route user and its password from the
// environment, and no route in the files (a route URL carries the
// password, so the routes are given with --routes).
func TestClusterConfigsParse(t *testing.T) {
	files := deployNodeConfigs(t)
	setDeployPasswords(t)
	names := map[string]bool{}
	for _, f := range files {
		opts, err := server.ProcessConfigFile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !opts.JetStream || opts.StoreDir == "" {
			t.Errorf("%s: JetStream with a store dir wanted", f)
		}
		if opts.Cluster.Name != "prunesched" || opts.Cluster.Port == 0 {
			t.Errorf("%s: cluster %q on port %d, want prunesched on a port", f, opts.Cluster.Name, opts.Cluster.Port)
		}
		if opts.Cluster.Username != "route" || opts.Cluster.Password != deployPasswords["PS_ROUTE_PASSWORD"] {
			t.Errorf("%s: cluster authorization user %q, want route with $PS_ROUTE_PASSWORD", f, opts.Cluster.Username)
		}
		if len(opts.Routes) != 0 {
			t.Errorf("%s: %d routes in the file; they carry the route password: give them with --routes", f, len(opts.Routes))
		}
		names[opts.ServerName] = true
	}
	if len(names) != 3 {
		t.Errorf("server names not distinct: %v", names)
	}
}

// deployNodeConfigs returns deploy/nats's three node configs.
func deployNodeConfigs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../deploy/nats/n*.conf")
	if err != nil || len(files) != 3 {
		t.Fatalf("want three node configs in deploy/nats, got %v (%v)", files, err)
	}
	return files
}

// startDeployCluster starts deploy/nats's three nodes in this process,
// each from its config file as parsed by nats-server, on free loopback
// ports and temporary storage, routed to each other with the route
// credentials, as the README's commands and deploy/compose.yaml start
// them. It returns the servers once they elected a JetStream meta leader.
func startDeployCluster(t *testing.T) []*server.Server {
	t.Helper()
	setDeployPasswords(t)
	files := deployNodeConfigs(t)
	ports := make([]int, len(files))
	var routes []string
	for i := range files {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		routes = append(routes, fmt.Sprintf("nats-route://route:%s@127.0.0.1:%d", deployPasswords["PS_ROUTE_PASSWORD"], ports[i]))
	}
	var srvs []*server.Server
	for i, f := range files {
		opts, err := server.ProcessConfigFile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", -1, 0
		opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", ports[i]
		opts.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		opts.StoreDir = t.TempDir()
		opts.NoLog, opts.NoSigs = true, true
		srv, err := server.NewServer(opts)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
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
		if leader && routed {
			return nil
		}
		return fmt.Errorf("the deploy cluster has not formed (meta leader %v, all routed %v)", leader, routed)
	})
	return srvs
}

// TestDeployClusterRoutesAuthenticated: deploy/nats's nodes form a
// cluster over routes carrying the route credentials, and refuse a route
// that carries none or a wrong password.
func TestDeployClusterRoutesAuthenticated(t *testing.T) {
	srvs := startDeployCluster(t)
	addr := srvs[0].ClusterAddr().String()
	for name, creds := range map[string]string{
		"no credentials":   ``,
		"a wrong password": `"user":"route","pass":"guess",`,
	} {
		if reply := routeConnect(t, addr, creds); !strings.Contains(reply, "Authorization Violation") {
			t.Errorf("a route with %s: answered %q, want an authorization violation", name, reply)
		}
	}
}

// routeConnect opens a route connection to addr, sends CONNECT with the
// fields creds adds and a PING, and returns the first line the server
// answers after its INFO.
func routeConnect(t *testing.T, addr, creds string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	if info, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(info, "INFO ") {
		t.Fatalf("route %s: first line %q (%v), want INFO", addr, info, err)
	}
	connect := `CONNECT {` + creds + `"verbose":false,"pedantic":false,"name":"intruder","cluster":"prunesched"}` + "\r\nPING\r\n"
	if _, err := c.Write([]byte(connect)); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "connection closed: " + err.Error()
		}
		if !strings.HasPrefix(line, "INFO ") {
			return strings.TrimSpace(line)
		}
	}
}
