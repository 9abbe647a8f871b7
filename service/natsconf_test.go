package service

import (
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestClusterConfigsParse checks that deploy/nats holds three JetStream
// nodes of one cluster with routes to each other.
func TestClusterConfigsParse(t *testing.T) {
	files, err := filepath.Glob("../deploy/nats/n*.conf")
	if err != nil || len(files) != 3 {
		t.Fatalf("want three node configs in deploy/nats, got %v (%v)", files, err)
	}
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
		if opts.Cluster.Name != "prunesched" || len(opts.Routes) != 3 {
			t.Errorf("%s: cluster %q with %d routes, want prunesched with 3", f, opts.Cluster.Name, len(opts.Routes))
		}
		names[opts.ServerName] = true
	}
	if len(names) != 3 {
		t.Errorf("server names not distinct: %v", names)
	}
}
