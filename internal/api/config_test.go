package api

import (
	"testing"
	"time"

	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/configtest"
	"github.com/prunesched/prunesched/pipeline"
)

// TestConfigValidate: every invalid field is reported by name; a config
// with its three required fields and the defaults is valid.
func TestConfigValidate(t *testing.T) {
	ok := Config{Pipeline: &pipeline.Pipeline{}, Store: &store.Store{}, Tokens: &tokens.Counter{}}
	with := func(f func(*Config)) Config { c := ok; f(&c); return c }
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none: valid
	}{
		{"required fields", ok, nil},
		{"explicit limits", with(func(c *Config) { c.Timeout, c.MaxBodyBytes = time.Second, 1 }), nil},
		{"no pipeline", with(func(c *Config) { c.Pipeline = nil }), []string{"pipeline: required"}},
		{"no store", with(func(c *Config) { c.Store = nil }), []string{"store: required"}},
		{"no tokens", with(func(c *Config) { c.Tokens = nil }), []string{"tokens: required"}},
		{"negative timeout", with(func(c *Config) { c.Timeout = -time.Second }), []string{"timeout: negative (-1s)"}},
		{"negative body bound", with(func(c *Config) { c.MaxBodyBytes = -1 }), []string{"max body bytes: negative (-1)"}},
		{"zero value", Config{}, []string{"pipeline: required", "store: required", "tokens: required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.setDefaults()
			err := cfg.Validate()
			if len(tc.want) == 0 {
				configtest.Check(t, err)
				return
			}
			configtest.Check(t, err, append(tc.want, "api config: ")...)
			if _, err := New(tc.cfg); err == nil {
				t.Error("New accepted the invalid config")
			}
		})
	}
}

// TestConfigDefaults: the unset limits get their documented defaults.
func TestConfigDefaults(t *testing.T) {
	var c Config
	c.setDefaults()
	if c.Timeout != DefaultTimeout || c.MaxBodyBytes != MaxBodyBytes || c.Logger == nil {
		t.Errorf("defaults %+v", c)
	}
}
