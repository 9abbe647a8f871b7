package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/internal/configtest"
	"github.com/prunesched/prunesched/policy"
)

// newPipelineT is NewFromConfig failing the test on an error.
func newPipelineT(t testing.TB, st *store.Store, cfg Config) *Pipeline {
	t.Helper()
	p, err := NewFromConfig(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigValidate: every invalid field is reported by name; the
// defaulted zero value and every documented special value are valid.
func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none: valid
	}{
		{"zero value", Config{}, nil},
		{"documented values", Config{Partitions: []int{0, 3}, PinnedTTL: time.Second, LagInterval: time.Minute,
			ProjectionBytes: -1, WorkerFacts: 10, IdleAfter: -1}, nil},
		{"negative partition", Config{Partitions: []int{-1}}, []string{"partitions: -1 out of range 0-1023"}},
		{"partition past the maximum", Config{Partitions: []int{events.MaxPartitions}}, []string{"partitions: 1024 out of range"}},
		{"partition twice", Config{Partitions: []int{2, 2}}, []string{"partitions: 2 listed twice"}},
		{"negative pinned ttl", Config{PinnedTTL: -time.Second}, []string{"pinned ttl: negative (-1s)"}},
		{"negative lag interval", Config{LagInterval: -time.Second}, []string{"lag interval: -1s, want positive"}},
		{"negative worker facts", Config{WorkerFacts: -1}, []string{"worker facts: -1"}},
		{"every error at once", Config{PinnedTTL: -1, WorkerFacts: -1, LagInterval: -1},
			[]string{"pinned ttl", "worker facts", "lag interval"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.setDefaults(8)
			err := cfg.Validate()
			if len(tc.want) == 0 {
				configtest.Check(t, err)
				return
			}
			configtest.Check(t, err, append(tc.want, "pipeline config: ")...)
		})
	}
}

// TestConfigDefaults: the zero value gets every documented default.
func TestConfigDefaults(t *testing.T) {
	var cfg Config
	cfg.setDefaults(3)
	if cfg.Logger == nil || cfg.LagInterval != DefaultLagInterval || cfg.IdleAfter != DefaultIdleAfter ||
		cfg.ProjectionBytes != DefaultProjectionBytes || cfg.WorkerFacts != DefaultWorkerFacts ||
		len(cfg.Partitions) != 3 || cfg.Partitions[2] != 2 {
		t.Errorf("defaults %+v", cfg)
	}
}

// TestNewFromConfigRefusesPartitionsTheStreamLacks: a partition past the
// stream's count is an error naming the field, not a worker that waits on
// nothing.
func TestNewFromConfigRefusesPartitionsTheStreamLacks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, _, _ := startStore(t, ctx, store.Config{Partitions: 2})
	_, err := NewFromConfig(st, Config{Policy: policy.Default(), Partitions: []int{1, 2}})
	if err == nil || !strings.Contains(err.Error(), "partitions: 2: the stream has partitions 0-1") {
		t.Fatalf("err %v", err)
	}
	_, err = NewFromConfig(st, Config{Policy: policy.Default(), LagInterval: -1})
	if err == nil || !strings.Contains(err.Error(), "lag interval") {
		t.Fatalf("err %v", err)
	}
}
