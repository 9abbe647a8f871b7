package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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

	logger *slog.Logger
}

// New builds the pipeline over st. reg receives the metrics (pass a fresh
// prometheus.NewRegistry(); nil disables metrics).
func New(st *store.Store, p policy.Policy, logger *slog.Logger, reg prometheus.Registerer) *Pipeline {
	var met *Metrics
	if reg != nil {
		met = NewMetrics(reg)
	}
	lg := &Log{Store: st}
	return &Pipeline{
		Store:       st,
		Eligibility: NewEligibilityWorker(lg, p, logger.With("worker", "eligibility"), met),
		Scheduler:   NewSchedulerWorker(lg, p, logger.With("worker", "scheduler"), met, func(err error) bool { return errors.Is(err, store.ErrConflict) }),
		Projection:  NewProjectionWorker(st.JS(), logger.With("worker", "projection"), met),
		Metrics:     met,
		Policy:      p,
		logger:      logger,
	}
}

// Run runs the selected workers ("eligibility", "scheduler", "projection";
// none means all) until ctx ends or one fails.
func (p *Pipeline) Run(ctx context.Context, only ...string) error {
	want := func(name string) bool {
		if len(only) == 0 {
			return true
		}
		for _, o := range only {
			if o == name {
				return true
			}
		}
		return false
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 3)
	n := 0
	start := func(name string, run func(context.Context) error) {
		if !want(name) {
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
	start("eligibility", p.Eligibility.Run)
	start("scheduler", p.Scheduler.Run)
	start("projection", p.Projection.Run)
	var first error
	for i := 0; i < n; i++ {
		if err := <-errc; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// WaitIdle blocks until every fact has been judged and scheduled and the
// projection has applied everything in the stream, with nothing published
// in between (a full quiet pass).
func (p *Pipeline) WaitIdle(ctx context.Context) error {
	delay := 2 * time.Millisecond
	for {
		last, err := p.Store.StreamLastSeq(ctx)
		if err != nil {
			return err
		}
		idle := true
		for _, d := range []string{DurableEligibility, DurableScheduler} {
			ok, err := p.consumerDone(ctx, d)
			if err != nil {
				return err
			}
			idle = idle && ok
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

func (p *Pipeline) consumerDone(ctx context.Context, durable string) (bool, error) {
	c, err := p.Store.JS().Consumer(ctx, events.StreamName, durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("consumer %s: %w", durable, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("consumer %s info: %w", durable, err)
	}
	return info.NumPending == 0 && info.NumAckPending == 0, nil
}

// WaitSession blocks until the session's facts have been judged and
// scheduled and the projection has caught up with the stream.
func (p *Pipeline) WaitSession(ctx context.Context, tenant, session string) error {
	last, err := p.Store.LastSeq(ctx, tenant, session, events.KindFact)
	if err != nil {
		return err
	}
	for _, d := range []string{DurableEligibility, DurableScheduler} {
		if err := waitAckFloor(ctx, p.Store, d, last); err != nil {
			return err
		}
	}
	streamLast, err := p.Store.StreamLastSeq(ctx)
	if err != nil {
		return err
	}
	return p.Projection.WaitSeq(ctx, streamLast)
}

func waitAckFloor(ctx context.Context, st interface {
	AckFloor(context.Context, string) (uint64, error)
}, durable string, seq uint64) error {
	delay := time.Millisecond
	for {
		floor, err := st.AckFloor(ctx, durable)
		if err == nil && floor >= seq {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to reach seq %d: %w", durable, seq, ctx.Err())
		case <-time.After(delay):
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

// Log adapts the store to what the workers need, adding a read of one
// session's marks since a sequence.
type Log struct {
	*store.Store
}

// MarksSince returns the session's marks stored after afterSeq, in order.
func (l *Log) MarksSince(ctx context.Context, tenant, session string, afterSeq uint64) ([]events.Event, error) {
	stream, err := l.JS().Stream(ctx, events.StreamName)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", events.StreamName, err)
	}
	subj := events.Subject(tenant, session, events.KindMark)
	var out []events.Event
	seq := afterSeq + 1
	for {
		raw, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("get mark after seq %d: %w", seq, err)
		}
		ev, err := events.Decode(raw.Data)
		if err != nil {
			return nil, fmt.Errorf("decode mark at seq %d: %w", raw.Sequence, err)
		}
		ev.Seq = raw.Sequence
		out = append(out, ev)
		seq = raw.Sequence + 1
	}
}
