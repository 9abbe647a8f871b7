package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/policy"
)

// Pipeline wires the three workers to one store.
type Pipeline struct {
	Store       *store.Store
	Eligibility *EligibilityWorker
	Scheduler   *SchedulerWorker
	Projection  *ProjectionWorker
	Metrics     *Metrics
	Policy      policy.Policy

	cfg    Config
	logger *slog.Logger
	prog   *progress
}

// New builds the single-process pipeline over st. reg receives the metrics
// (pass a fresh prometheus.NewRegistry(); nil disables metrics). Nothing in
// its configuration can be invalid, so it cannot fail.
func New(st *store.Store, p policy.Policy, logger *slog.Logger, reg prometheus.Registerer) *Pipeline {
	cfg := Config{Policy: p, Logger: logger, Registry: reg}
	cfg.setDefaults(st.Partitions())
	return build(st, cfg)
}

// NewFromConfig builds the pipeline over st as cfg says, after filling
// cfg's defaults; an invalid field (see Config.Validate) is an error
// naming it.
func NewFromConfig(st *store.Store, cfg Config) (*Pipeline, error) {
	cfg.setDefaults(st.Partitions())
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, p := range cfg.Partitions {
		if p >= st.Partitions() {
			return nil, fmt.Errorf("pipeline config: partitions: %d: the stream has partitions 0-%d", p, st.Partitions()-1)
		}
	}
	return build(st, cfg), nil
}

// build builds the pipeline over st from a defaulted, valid cfg.
func build(st *store.Store, cfg Config) *Pipeline {
	var met *Metrics
	if cfg.Registry != nil {
		met = NewMetrics(cfg.Registry)
	}
	lg := &Log{Store: st}
	prog := newProgress()
	parts := partitioning{owned: cfg.Partitions, pinnedTTL: cfg.PinnedTTL, prog: prog}
	logger := cfg.Logger
	elig := NewEligibilityWorker(lg, cfg.Policy, logger.With("worker", "eligibility"), met).withPartitions(parts)
	elig.state.maxFacts = cfg.WorkerFacts
	proj := NewProjectionWorker(st.JS(), logger.With("worker", "projection"), met)
	proj.SetEviction(st, cfg.ProjectionBytes)
	if cfg.Registry != nil {
		registerProjectionMemory(cfg.Registry, proj)
	}
	sched := NewSchedulerWorker(lg, cfg.Policy, logger.With("worker", "scheduler"), met,
		func(err error) bool { return errors.Is(err, store.ErrConflict) }).withPartitions(parts).withEligibility(elig)
	sched.state.maxFacts = cfg.WorkerFacts
	return &Pipeline{
		Store:       st,
		Eligibility: elig,
		Scheduler:   sched,
		Projection:  proj,
		Metrics:     met,
		Policy:      cfg.Policy,
		cfg:         cfg,
		logger:      logger,
		prog:        prog,
	}
}

// Partitions returns the partitions this pipeline's workers consume.
func (p *Pipeline) Partitions() []int { return slices.Clone(p.cfg.Partitions) }

// partitioning says which partitions a worker consumes and how.
type partitioning struct {
	owned     []int
	pinnedTTL time.Duration
	// prog, when set, learns every batch the workers finish, so waiters
	// in this process are woken instead of polling.
	prog *progress
}

// consumeOptions are the store options of the partition consumer durable
// (a store.ConsumeBatch consumer with up to partitionMaxAckPending facts in
// flight), and the pinned priority group when several processes share
// partitions. No ack hook: nobody needs every batch's acknowledgement
// confirmed (a round trip per batch; ConsumeBatch then confirms only when
// the consumer goes idle): waiters in this process learn a batch's end
// from the worker's own state (see waitFloor), and those asking the
// server poll its ack floor. Delivery order
// after a failure or failover is not guaranteed; the workers rebuild a
// session from the log instead of trusting it (see EligibilityWorker).
//
// stale is called when the partition's consumer delivered to another
// process in between (see store.WithGapHook): the worker's cached session
// cores missed those facts and must be rebuilt from the log.
func (pt partitioning) consumeOptions(met *Metrics, component, durable string, stale func()) []store.ConsumeOption {
	opts := []store.ConsumeOption{
		store.WithMaxAckPending(partitionMaxAckPending),
		store.WithMaxBatch(partitionMaxBatch),
		store.WithDecodeErrorHook(func(error) { met.decodeError(component) }),
		store.WithGapHook(stale),
	}
	if pt.pinnedTTL > 0 {
		opts = append(opts, store.WithPinnedGroup(PriorityGroup, pt.pinnedTTL))
	}
	return opts
}

// Partition consumers: facts delivered ahead of the worker, and the most
// one batch handles.
const (
	partitionMaxAckPending = 1024
	partitionMaxBatch      = 256
)

// runPartitions runs fn for every partition concurrently until ctx ends or
// one fails; it returns the first failure.
func runPartitions(ctx context.Context, parts []int, fn func(ctx context.Context, p int) error) error {
	fns := make([]func(context.Context) error, len(parts))
	for i, p := range parts {
		fns[i] = func(ctx context.Context) error {
			if err := fn(ctx, p); err != nil {
				return fmt.Errorf("partition %d: %w", p, err)
			}
			return nil
		}
	}
	return runAll(ctx, fns...)
}

// runAll runs every fn concurrently until ctx ends or one fails (which
// cancels the others); it returns the first failure.
func runAll(ctx context.Context, fns ...func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(fns))
	for _, fn := range fns {
		go func() {
			err := fn(ctx)
			if err != nil {
				cancel()
			}
			errc <- err
		}()
	}
	var first error
	for range fns {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// runTogether runs this process's eligibility and scheduler workers
// together. A partition whose shape (claimPartitionShape) is shared gets
// one shared durable, DurableName(DurableJudge, p): the eligibility
// worker judges each batch (its marks stored) before the scheduler takes
// it, and the facts are acknowledged once for both, so each fact is
// delivered and acknowledged once instead of twice and one consumer
// state is kept instead of two. A partition whose shape is each kind's
// own durables (a store from before the shared durable, or workers of
// one kind running in other processes, which claimed it first) keeps the
// two durables, with their positions: nothing is judged again and
// nothing skipped.
func (p *Pipeline) runTogether(ctx context.Context) error {
	if len(p.cfg.Partitions) == 0 {
		return errors.New("no partitions to consume")
	}
	eligFeed, schedFeed := p.Eligibility.feeder(nil, nil), p.Scheduler.feeder()
	lg := &Log{Store: p.Store}
	return runPartitions(ctx, p.cfg.Partitions, func(ctx context.Context, part int) error {
		ef, sf := eligFeed(ctx, part), schedFeed(ctx, part)
		shape, err := claimPartitionShape(ctx, lg, part, shapeShared)
		if err != nil {
			return err
		}
		if shape != shapeShared {
			return runAll(ctx,
				func(ctx context.Context) error { return p.Eligibility.consumeOwn(ctx, part, ef) },
				func(ctx context.Context) error { return p.Scheduler.consumeOwn(ctx, part, sf) })
		}
		durable := DurableName(DurableJudge, part)
		return p.Store.ConsumeBatch(ctx, durable, events.PartitionFilter(events.KindFact, part),
			func(ctx context.Context, evs []events.Event) error {
				if err := ef.handle(ctx, evs); err != nil {
					return err
				}
				return sf.handle(ctx, evs)
			},
			p.Eligibility.parts.consumeOptions(p.Metrics, DurableJudge, durable, func() { ef.dropped(); sf.dropped() })...)
	})
}

// Partition shapes: which durables consume a partition's facts, claimed
// once per partition through JetStream (store.ClaimPartitionShape).
const (
	// shapeShared is one durable shared by the two kinds,
	// DurableName(DurableJudge, p), run by a process running both.
	shapeShared = DurableJudge
	// shapeOwn is each kind's own durable, DurableName(DurableEligibility,
	// p) and DurableName(DurableScheduler, p).
	shapeOwn = "own"
)

// shapeLog is what choosing a partition's shape needs from the log.
type shapeLog interface {
	HasConsumer(ctx context.Context, durable string) (bool, error)
	ClaimPartitionShape(ctx context.Context, part int, propose func(ctx context.Context) (string, error)) (string, error)
}

// claimPartitionShape returns partition part's shape, claiming want for
// it when no process has claimed one: the claim is atomic (a key-value
// create), so of the processes starting at once on a new partition
// exactly one shape wins, and every process reads it. A partition whose
// facts a durable already consumes (a store from before the claims)
// claims the shape of that durable instead of want, so it keeps its
// position: the shared durable if it exists, else each kind's own.
func claimPartitionShape(ctx context.Context, lg shapeLog, part int, want string) (string, error) {
	shape, err := lg.ClaimPartitionShape(ctx, part, func(ctx context.Context) (string, error) {
		for _, d := range []string{DurableJudge, DurableEligibility, DurableScheduler} {
			ok, err := lg.HasConsumer(ctx, DurableName(d, part))
			if err != nil {
				return "", err
			}
			if ok && d == DurableJudge {
				return shapeShared, nil
			}
			if ok {
				return shapeOwn, nil
			}
		}
		return want, nil
	})
	if err != nil {
		return "", fmt.Errorf("partition %d: shape: %w", part, err)
	}
	return shape, nil
}

// Run runs the selected workers ("eligibility", "scheduler", "projection";
// none means all) until ctx ends or one fails. The eligibility and
// scheduler workers selected together share one durable per partition
// where the store allows it (see runTogether). With metrics it also polls
// the lag of the consumers it runs.
func (p *Pipeline) Run(ctx context.Context, only ...string) error {
	want := func(name string) bool {
		return len(only) == 0 || slices.Contains(only, name)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 3)
	n := 0
	start := func(name string, on bool, run func(context.Context) error) {
		if !on {
			return
		}
		n++
		go func() {
			err := run(ctx)
			if err != nil && ctx.Err() == nil {
				err = fmt.Errorf("%s worker: %w", name, err)
			} else {
				err = nil
			}
			errc <- err
		}()
	}
	if want("eligibility") && want("scheduler") && p.Scheduler.elig == p.Eligibility {
		// The scheduler asks this eligibility worker, not an ack floor:
		// they can share a durable (a floor would move only after both).
		start("eligibility and scheduler", true, p.runTogether)
	} else {
		start("eligibility", want("eligibility"), p.Eligibility.Run)
		start("scheduler", want("scheduler"), p.Scheduler.Run)
	}
	start("projection", want("projection"), p.Projection.Run)
	var wg sync.WaitGroup
	if p.Metrics != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.pollLag(ctx, want)
		}()
	}
	if p.cfg.IdleAfter > 0 {
		wg.Go(func() { p.sweepIdle(ctx) })
	}
	var first error
	for i := 0; i < n; i++ {
		if err := <-errc; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	cancel()
	wg.Wait()
	return first
}

// Evicted counts the sessions one idle sweep evicted, per worker.
type Evicted struct {
	Eligibility int `json:"eligibility"`
	Scheduler   int `json:"scheduler"`
	Projection  int `json:"projection"`
}

// EvictIdle is one idle sweep: it evicts from the three workers the
// sessions no fact or reader used since the previous sweep, down to their
// compact form (the projection keeps the session's key, the eligibility
// and scheduler workers the partition's handled watermark, the scheduler
// the session's pending-mark summary for its gauges), and reports how many
// each evicted. An evicted session is rebuilt from the log on demand (a
// view, its next fact, a live decision), to the same state: decisions do
// not depend on eviction. Run calls it every Config.IdleAfter; the store's
// fact-id index is bounded on its own (store.Config.IDCacheEntries).
func (p *Pipeline) EvictIdle() Evicted {
	return Evicted{
		Eligibility: p.Eligibility.EvictIdle(),
		Scheduler:   p.Scheduler.EvictIdle(),
		Projection:  p.Projection.EvictIdle(),
	}
}

// sweepIdle runs EvictIdle every IdleAfter until ctx ends.
func (p *Pipeline) sweepIdle(ctx context.Context) {
	t := time.NewTicker(p.cfg.IdleAfter)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ev := p.EvictIdle(); ev != (Evicted{}) {
				p.logger.Debug("idle sessions evicted", "eligibility", ev.Eligibility, "scheduler", ev.Scheduler, "projection", ev.Projection)
			}
		}
	}
}

// pollLag sets the consumer lag gauges every LagInterval: NumPending +
// NumAckPending of each partition consumer this process runs (the
// shared durable's for both kinds where it runs one), and for the
// projection the stream's last sequence minus the last one it applied.
func (p *Pipeline) pollLag(ctx context.Context, want func(string) bool) {
	t := time.NewTicker(p.cfg.LagInterval)
	defer t.Stop()
	// shared holds the partitions found consumed by the shared durable,
	// whose lag is both kinds' (asked first from then on: one request per
	// kind and partition, as for the kinds' own).
	shared := map[int]bool{}
	lagOf := func(prefix string, part int) (uint64, error) {
		get := func(durable string) (uint64, error) { return p.Store.ConsumerLag(ctx, durable) }
		var lag uint64
		var asked bool
		var err error
		if shared[part] {
			lag, err = get(DurableName(DurableJudge, part))
			asked = true
		} else {
			lag, asked, err = kindDurable(prefix, part, get)
		}
		shared[part] = asked && err == nil
		return lag, err
	}
	for {
		for _, kind := range []struct{ worker, prefix string }{{"eligibility", DurableEligibility}, {"scheduler", DurableScheduler}} {
			if !want(kind.worker) {
				continue
			}
			for _, part := range p.cfg.Partitions {
				lag, err := lagOf(kind.prefix, part)
				if err != nil {
					continue // not created yet, or the server is away: keep the last value
				}
				p.Metrics.setLag(kind.worker, strconv.Itoa(part), float64(lag))
			}
		}
		if want("projection") {
			if last, err := p.Store.StreamLastSeq(ctx); err == nil {
				applied := p.Projection.Seq()
				lag := uint64(0)
				if last > applied {
					lag = last - applied
				}
				p.Metrics.setLag("projection", "all", float64(lag))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// partitionDone reports whether every fact of partition part has been
// judged and scheduled, whichever process consumes it: the shared
// durable, or both kinds' own, have nothing pending or unacknowledged. A
// partition no durable consumes yet is not done.
func (p *Pipeline) partitionDone(ctx context.Context, part int) (bool, error) {
	ok, found, err := p.consumerDone(ctx, DurableName(DurableJudge, part))
	if err != nil || found {
		return ok, err
	}
	for _, kind := range []string{DurableEligibility, DurableScheduler} {
		ok, _, err := p.consumerDone(ctx, DurableName(kind, part))
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// WaitIdle blocks until every fact has been judged and scheduled (in every
// partition, whichever process consumes it) and the projection has applied
// everything in the stream, with nothing published in between (a full
// quiet pass).
func (p *Pipeline) WaitIdle(ctx context.Context) error {
	delay := 2 * time.Millisecond
	for {
		last, err := p.Store.StreamLastSeq(ctx)
		if err != nil {
			return err
		}
		idle := true
		for part := 0; part < p.Store.Partitions() && idle; part++ {
			if idle, err = p.partitionDone(ctx, part); err != nil {
				return err
			}
		}
		if idle {
			if err := p.Projection.WaitSeq(ctx, last); err != nil {
				return err
			}
			again, err := p.Store.StreamLastSeq(ctx)
			if err != nil {
				return err
			}
			if again == last {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for pipeline to go idle: %w", ctx.Err())
		case <-time.After(delay):
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

// consumerDone reports whether the durable has nothing pending or
// unacknowledged (store.ConsumerLag is 0: one request, asked again while
// unanswered); found is false when the stream has no such durable.
func (p *Pipeline) consumerDone(ctx context.Context, durable string) (done, found bool, err error) {
	lag, err := p.Store.ConsumerLag(ctx, durable)
	if errors.Is(err, store.ErrNotFound) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return lag == 0, true, nil
}

// WaitSession blocks until the session's facts have been judged and
// scheduled (by the consumers of its partition) and the projection has
// caught up with the stream.
func (p *Pipeline) WaitSession(ctx context.Context, tenant, session string) error {
	last, err := p.Store.LastSeq(ctx, tenant, session, events.KindFact)
	if err != nil {
		return err
	}
	part := p.Store.PartitionOf(tenant, session)
	k := sessionKey{tenant, session}
	if tenant == "" {
		k.tenant = events.DefaultTenant
	}
	if err := p.Scheduler.waitEligibility(ctx, part, k, last); err != nil {
		return err
	}
	if err := p.Scheduler.waitFacts(ctx, part, k, last); err != nil {
		return err
	}
	streamLast, err := p.Store.StreamLastSeq(ctx)
	if err != nil {
		return err
	}
	return p.Projection.WaitSeq(ctx, streamLast)
}

// Log adapts the store to what the workers need.
type Log struct {
	*store.Store
}

// HasConsumer reports whether the stream has the durable consumer (a
// worker asks before consuming a partition whose facts may go to
// another shape of consumer).
func (l *Log) HasConsumer(ctx context.Context, durable string) (bool, error) {
	_, err := l.AckFloor(ctx, durable)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("consumer %s: %w", durable, err)
	}
	return true, nil
}

// registerProjectionMemory exports the projection's memory bound at work:
// its estimated bytes, the sessions held and evicted, and the evictions.
func registerProjectionMemory(reg prometheus.Registerer, w *ProjectionWorker) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "prunesched_projection_bytes",
			Help: "Estimated memory of the sessions the projection holds (bounded by --projection-bytes)."},
			func() float64 { b, _, _, _ := w.Memory(); return float64(b) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "prunesched_projection_sessions_held",
			Help: "Sessions the projection holds in memory."},
			func() float64 { _, h, _, _ := w.Memory(); return float64(h) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "prunesched_projection_sessions_evicted",
			Help: "Sessions the projection evicted; each is rebuilt from the log when next viewed."},
			func() float64 { _, _, e, _ := w.Memory(); return float64(e) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "prunesched_projection_evictions_total",
			Help: "Sessions evicted from the projection's memory."},
			func() float64 { _, _, _, n := w.Memory(); return float64(n) }),
	)
}
