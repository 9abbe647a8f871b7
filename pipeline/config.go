package pipeline

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

// Config configures a Pipeline. The zero value (plus a Policy) is the
// single-process mode: every partition, no priority groups, no metrics.
type Config struct {
	// Policy drives the eligibility and scheduler cores.
	Policy policy.Policy
	// Logger receives worker logs. Default: discard.
	Logger *slog.Logger
	// Registry receives the metrics (a fresh prometheus.NewRegistry());
	// nil disables metrics.
	Registry prometheus.Registerer
	// Partitions lists the partitions this process's eligibility and
	// scheduler workers consume. Empty means all of the stream's partitions
	// (the single-process mode).
	Partitions []int
	// PinnedTTL, when positive, makes every partition consumer a
	// pinned-client priority-group consumer (group PriorityGroup): several
	// processes may consume the same partition, one at a time, and a
	// process that stops pulling for PinnedTTL loses the partition to
	// another. Zero: plain durable consumers (one process per partition);
	// negative is invalid.
	PinnedTTL time.Duration
	// LagInterval is how often consumer lag is polled for the metrics.
	// Default DefaultLagInterval.
	LagInterval time.Duration
	// ProjectionBytes is the projection's memory budget (estimated): past
	// it, the least recently used sessions are evicted and rebuilt from
	// the log when next viewed. Zero: DefaultProjectionBytes; negative:
	// never evict.
	ProjectionBytes int64
	// WorkerFacts bounds, per partition, the facts observed by the
	// sessions the eligibility and scheduler workers hold in memory (zero:
	// DefaultWorkerFacts; negative is invalid); least recently used sessions are forgotten past
	// it and rebuilt from the log on their next fact.
	WorkerFacts int
	// IdleAfter is the idle sweep's interval: every IdleAfter the
	// sessions no fact or reader used since the previous sweep (idle for
	// one to two intervals) are evicted from the three workers and
	// rebuilt from the log on demand (see EvictIdle). Zero:
	// DefaultIdleAfter; negative: no sweep.
	IdleAfter time.Duration
}

// DefaultIdleAfter is the idle sweep's default interval: a session idle
// for 10 to 20 minutes (longer than the 5-minute prompt cache) keeps only
// its compact form.
const DefaultIdleAfter = 10 * time.Minute

// DefaultLagInterval is how often consumer lag is polled by default.
const DefaultLagInterval = 5 * time.Second

// setDefaults fills every unset field with its documented default;
// partitions is the stream's partition count (an empty Partitions means
// all of them).
func (c *Config) setDefaults(partitions int) {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.LagInterval == 0 {
		c.LagInterval = DefaultLagInterval
	}
	if c.IdleAfter == 0 {
		c.IdleAfter = DefaultIdleAfter
	}
	if c.ProjectionBytes == 0 {
		c.ProjectionBytes = DefaultProjectionBytes
	}
	if c.WorkerFacts == 0 {
		c.WorkerFacts = DefaultWorkerFacts
	}
	if len(c.Partitions) == 0 {
		for p := 0; p < partitions; p++ {
			c.Partitions = append(c.Partitions, p)
		}
	}
}

// Validate reports every invalid field, each by name. NewFromConfig calls
// it after filling the defaults (and then checks Partitions against the
// stream's partition count).
func (c Config) Validate() error {
	var errs []error
	seen := map[int]bool{}
	for _, p := range c.Partitions {
		if p < 0 || p >= events.MaxPartitions {
			errs = append(errs, fmt.Errorf("partitions: %d out of range 0-%d", p, events.MaxPartitions-1))
		} else if seen[p] {
			errs = append(errs, fmt.Errorf("partitions: %d listed twice", p))
		}
		seen[p] = true
	}
	if c.PinnedTTL < 0 {
		errs = append(errs, fmt.Errorf("pinned ttl: negative (%s)", c.PinnedTTL))
	}
	if c.LagInterval <= 0 {
		errs = append(errs, fmt.Errorf("lag interval: %s, want positive", c.LagInterval))
	}
	if c.WorkerFacts < 0 {
		errs = append(errs, fmt.Errorf("worker facts: %d, want at least 1", c.WorkerFacts))
	}
	if len(errs) > 0 {
		return fmt.Errorf("pipeline config: %w", errors.Join(errs...))
	}
	return nil
}
