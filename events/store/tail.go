package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
)

// TailFactsAndApplications follows the log from now on: every fact and
// application stored after the call, in log order, until ctx ends. For
// each it calls fn with its stream sequence and, when want says its
// session is wanted, the session and the event decoded; otherwise the
// session is empty and only the position moved. An event of a wanted
// session that does not decode comes with its session and a nil event.
// started is called once the consumer runs: every fact and application
// stored after that is delivered. It reads with one ordered consumer, which resumes after the
// last sequence it delivered when the connection or the stream leader
// changes. A fleet proxy learns with it what the other proxies append to
// the sessions it holds, without asking the log at each request. It
// returns ctx's error, or the error that stopped the consumer.
func (s *Store) TailFactsAndApplications(ctx context.Context, started func(), want func(tenant, session string) bool, fn func(seq uint64, tenant, session string, e *events.Event)) error {
	cons, err := s.js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.KindFilter(events.KindFact), events.KindFilter(events.KindApply)},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return fmt.Errorf("tail the log: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxBytes(s.cfg.ReadBufferBytes))
	if err != nil {
		return fmt.Errorf("tail the log: %w", err)
	}
	defer s.stopOrdered(cons, it)
	started()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return fmt.Errorf("tail the log: %w", err)
			}
			return fmt.Errorf("tail the log: next: %w", err)
		}
		seq, err := StreamSeq(msg)
		if err != nil {
			return fmt.Errorf("tail the log: %w", err)
		}
		tenant, session, _, perr := events.ParseSubject(msg.Subject())
		if perr != nil || !want(tenant, session) {
			fn(seq, "", "", nil)
			continue
		}
		e, err := decodeMsg(msg.Subject(), seq, msg.Data())
		if err != nil {
			// The session's reader meets the event (and its error) when
			// it reads the log itself.
			fn(seq, tenant, session, nil)
			continue
		}
		fn(seq, tenant, session, &e)
	}
}
