package service

import (
	"testing"

	"github.com/prunesched/prunesched/internal/api"
	"github.com/prunesched/prunesched/internal/configtest"
)

// TestConfigValidate: every invalid field is reported by name; the
// embedded and external setups are valid.
func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none: valid
	}{
		{"embedded", Config{DataDir: "d"}, nil},
		{"embedded with a NATS listener and the API on loopback", Config{DataDir: "d", NATSListen: "127.0.0.1:-1", HTTPListen: "127.0.0.1:0"}, nil},
		{"external NATS, no data dir", Config{NATSURL: "nats://127.0.0.1:4222"}, nil},
		{"API beyond loopback with auth", Config{DataDir: "d", HTTPListen: "0.0.0.0:8080", Auth: &api.Auth{}}, nil},
		{"embedded without a data dir", Config{}, []string{"service config: ", "data dir: required"}},
		{"bad NATS listen address", Config{DataDir: "d", NATSListen: "nohost"}, []string{"service config: ", "nats listen: ", `"nohost"`}},
		{"bad NATS listen port", Config{DataDir: "d", NATSListen: "127.0.0.1:70000"}, []string{"nats listen: "}},
		{"API beyond loopback without auth", Config{DataDir: "d", HTTPListen: "0.0.0.0:8080"},
			[]string{"refusing to serve the HTTP API on 0.0.0.0:8080 without authentication"}},
		{"every field at once", Config{NATSListen: "nohost"}, []string{"data dir", "nats listen"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.setDefaults()
			configtest.Check(t, cfg.Validate(), tc.want...)
		})
	}
}

// TestConfigDefaults: a logger always, a body budget only with the API.
func TestConfigDefaults(t *testing.T) {
	c := Config{DataDir: "d"}
	c.setDefaults()
	if c.Logger == nil || c.Bodies != nil {
		t.Errorf("defaults without the API: %+v", c)
	}
	c = Config{DataDir: "d", HTTPListen: "127.0.0.1:0"}
	c.setDefaults()
	if c.Bodies == nil {
		t.Error("no body budget with the API")
	}
}
