package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/jsask"
)

// SessionRef names one session present on the log.
type SessionRef struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	// Facts is the number of fact events the session has.
	Facts uint64 `json:"facts"`
}

// ReadSession returns one session's events (facts, marks and applications)
// in log order, decoded strictly, with Seq set. It reads up to the session's
// last event at the time of the call, so it terminates while writers keep
// appending. A session with no events gives an empty slice. A message that
// does not decode, or whose subject does not match its envelope, stops the
// read with an error naming its stream sequence.
func (s *Store) ReadSession(ctx context.Context, tenant, session string) ([]events.Event, error) {
	return s.ReadSessionAfter(ctx, tenant, session, 0)
}

// ReadAll replays the whole stream in log order from stream sequence fromSeq
// (inclusive; 0 or 1 means from the start) up to the stream's last sequence
// at the time of the call, calling fn for each event with Seq set. It is how
// projections are rebuilt. It returns the last sequence it covered: the
// stream's last sequence at the call when it completes (0 for an empty
// stream), or the last sequence fn accepted when fn or decoding fails.
// Resume with lastSeq+1.
func (s *Store) ReadAll(ctx context.Context, fromSeq uint64, fn func(events.Event) error) (lastSeq uint64, err error) {
	until, err := s.StreamLastSeq(ctx)
	if err != nil {
		return 0, fmt.Errorf("read all: %w", err)
	}
	if fromSeq == 0 {
		fromSeq = 1
	}
	if until < fromSeq {
		return until, nil
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: fromSeq}
	last, err := s.replay(ctx, cfg, until, fn)
	if err != nil {
		return last, fmt.Errorf("read all from %d: %w", fromSeq, err)
	}
	return until, nil
}

// replay runs an ordered consumer with cfg and calls fn for each event up to
// and including stream sequence until, which must be a sequence the consumer
// delivers (the last matching message at the time of the call). It returns
// the last sequence fn accepted.
func (s *Store) replay(ctx context.Context, cfg jetstream.OrderedConsumerConfig, until uint64, fn func(events.Event) error) (uint64, error) {
	return s.replayRaw(ctx, cfg, until, func(subject string, seq uint64, data []byte) error {
		e, err := decodeMsg(subject, seq, data)
		if err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return fmt.Errorf("event %s at seq %d: %w", e.ID, seq, err)
		}
		return nil
	})
}

// readAheadMessages bounds the messages a read buffers ahead of its
// caller, beside Config.ReadBufferBytes: a 32 KB channel per read.
const readAheadMessages = 4096

// replayRaw is replay handing fn each message's subject, stream sequence
// and stored bytes, undecoded.
func (s *Store) replayRaw(ctx context.Context, cfg jetstream.OrderedConsumerConfig, until uint64, fn func(subject string, seq uint64, data []byte) error) (uint64, error) {
	cons, err := s.js.OrderedConsumer(ctx, events.StreamName, cfg)
	if err != nil {
		return 0, fmt.Errorf("create ordered consumer: %w", err)
	}
	// The read-ahead is bounded in bytes and in messages. With bytes
	// alone the client sizes its channel for a million messages: 8 MB
	// allocated and cleared on every read, which made a new session's
	// first read (the workers', the proxy's) cost milliseconds of CPU for
	// two events (BenchmarkReadSessionNew).
	it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(readAheadMessages, s.cfg.ReadBufferBytes))
	if err != nil {
		return 0, fmt.Errorf("start ordered consumer: %w", err)
	}
	defer s.stopOrdered(cons, it)

	var last uint64
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return last, fmt.Errorf("next message after seq %d: %w", last, err)
		}
		seq, err := StreamSeq(msg)
		if err != nil {
			return last, fmt.Errorf("message after seq %d: %w", last, err)
		}
		if seq > until {
			// Only possible if until was not delivered; stop at the bound.
			return last, nil
		}
		if err := fn(msg.Subject(), seq, msg.Data()); err != nil {
			return last, err
		}
		last = seq
		if seq >= until {
			return last, nil
		}
	}
}

// stopOrdered stops the iterator and deletes the ephemeral consumer instead
// of leaving it to the server's inactivity cleanup.
func (s *Store) stopOrdered(cons jetstream.Consumer, it jetstream.MessagesContext) {
	it.Stop()
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.js.DeleteConsumer(ctx, events.StreamName, info.Name); err != nil {
		s.log.Debug("delete ordered consumer", slog.String("consumer", info.Name), slog.Any("err", err))
	}
}

// decodeMsg decodes one stored event strictly and checks that the subject
// it was stored on is the one its envelope implies.
func decodeMsg(subject string, seq uint64, data []byte) (events.Event, error) {
	e, err := events.Decode(data)
	if err != nil {
		return events.Event{}, fmt.Errorf("decode seq %d (%s): %w", seq, subject, err)
	}
	if !checkSubject(subject, e) {
		return events.Event{}, fmt.Errorf("decode seq %d: event %s belongs on %s, stored on %s", seq, e.ID, events.SubjectOf(e), subject)
	}
	e.Seq = seq
	return e, nil
}

// checkSubject checks that an event was stored on a subject of its own
// session and kind (either form, with or without the partition token).
func checkSubject(subject string, e events.Event) bool {
	tenant, session, kind, err := events.ParseSubject(subject)
	return err == nil && tenant == e.TenantOrDefault() && session == e.Session && kind == events.KindOf(e.Type)
}

// Sessions lists the sessions that have at least one fact, sorted by tenant
// then session. It reads the stream's per-subject counts, not the events.
func (s *Store) Sessions(ctx context.Context) ([]SessionRef, error) {
	return s.sessionsOn(ctx, events.KindFilter(events.KindFact))
}

// SessionsWithMarks lists the sessions of partition p that have at least
// one mark (Facts counts their marks here), sorted like Sessions. The
// scheduler uses it to find the marks that may still wait after a restart.
func (s *Store) SessionsWithMarks(ctx context.Context, p int) ([]SessionRef, error) {
	return s.sessionsOn(ctx, events.PartitionFilter(events.KindMark, p))
}

// sessionsOn lists the sessions with messages on filter and their counts.
func (s *Store) sessionsOn(ctx context.Context, filter string) ([]SessionRef, error) {
	info, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("list sessions: stream info: %w", err)
	}
	out := make([]SessionRef, 0, len(info.State.Subjects))
	for subj, n := range info.State.Subjects {
		tenant, session, _, err := events.ParseSubject(subj)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, SessionRef{Tenant: tenant, Session: session, Facts: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tenant != out[j].Tenant {
			return out[i].Tenant < out[j].Tenant
		}
		return out[i].Session < out[j].Session
	})
	return out, nil
}

// StreamLastSeq returns the event stream's last sequence (0 when empty).
// The stream's leader answers; the request is sent again every
// Config.RequestAgain while unanswered (jsask.Ask), so a wait polling it
// outlives the stream's leader election.
func (s *Store) StreamLastSeq(ctx context.Context) (uint64, error) {
	info, err := jsask.Ask(ctx, s.cfg.RequestAgain, func(ctx context.Context) (*jetstream.StreamInfo, error) {
		return s.stream.Info(ctx)
	})
	if err != nil {
		return 0, fmt.Errorf("stream last seq: %w", err)
	}
	return info.State.LastSeq, nil
}

// MarksSince returns the session's marks stored after stream sequence
// afterSeq, in order, decoded strictly with Seq set. Everything the stream
// leader held when the call began is included: the leader answers the
// session's last mark (the stream allows no direct gets: a lagging replica
// could hide a mark already stored, see StreamConfig), and the marks up to
// it are read with single gets from the leader while they are few
// (marksByGet), then in one batch with an ordered consumer bounded by that
// last mark (which waits for a lagging replica instead of missing marks).
// No mark after afterSeq costs one request; one mark, two.
func (s *Store) MarksSince(ctx context.Context, tenant, session string, afterSeq uint64) ([]events.Event, error) {
	subj, err := s.sessionSubject(tenant, session, events.KindMark)
	if err != nil {
		return nil, fmt.Errorf("marks since: %w", err)
	}
	last, err := s.LastSeq(ctx, tenant, session, events.KindMark)
	if err != nil {
		return nil, fmt.Errorf("marks of %s: %w", subj, err)
	}
	out, err := s.readAfter(ctx, subj, afterSeq, last, marksByGet)
	if err != nil {
		return nil, fmt.Errorf("marks of %s: %w", subj, err)
	}
	return out, nil
}

// readAfter reads the events on subject filter after stream sequence
// afterSeq through last (a sequence on filter): the first byGet with
// single gets from the leader (one request each), the rest in one batch
// with an ordered consumer bounded by last (a few requests to set up and
// delete, which a clustered stream makes slower than a few gets).
//
// A get asks for the next message on filter at or after a sequence, so
// the gaps between a session's events (other sessions' events, a deleted
// message) are skipped by the server. A get that finds nothing before
// last is not taken for the end: the server that answered may be behind
// the one that gave last (a leader just elected, still applying what it
// was sent), or last was removed since. The leader's last sequence on
// filter tells the two apart: below the sequence asked for, the read
// has reached the end; otherwise the rest is read with the ordered
// consumer, bounded by that sequence, which waits for a server behind
// instead of stopping short.
func (s *Store) readAfter(ctx context.Context, filter string, afterSeq, last uint64, byGet int) ([]events.Event, error) {
	var out []events.Event
	seq := afterSeq + 1
	for len(out) < byGet && seq <= last {
		raw, err := s.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			end, err := s.lastSeqLeader(ctx, filter)
			if err != nil {
				return nil, fmt.Errorf("no message at or after seq %d of %d: %w", seq, last, err)
			}
			if end < seq {
				return out, nil // the end: what was after seq is gone
			}
			last = min(last, end)
			break
		}
		if err != nil {
			return nil, fmt.Errorf("get after seq %d: %w", seq-1, err)
		}
		e, err := decodeMsg(raw.Subject, raw.Sequence, raw.Data)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		seq = raw.Sequence + 1
	}
	if seq > last {
		return out, nil
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq,
	}
	if _, err := s.replay(ctx, cfg, last, func(e events.Event) error {
		out = append(out, e)
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// FactsAndApplicationsAfter returns the session's facts and applications
// (no marks) after stream sequence afterSeq, in log order, with Seq set:
// what a reader that derives the marks itself (a proxy's cores) needs to
// catch up, read with single gets while they are few (marks are most of a
// session's events, and a get is one request where a consumer is several).
// The facts and the applications are read at once, each kind's gets in
// turn. A caller that has just read the session's last fact sequence
// (LastSeq) passes it as lastFact, which saves asking again; 0 asks.
func (s *Store) FactsAndApplicationsAfter(ctx context.Context, tenant, session string, afterSeq, lastFact uint64) ([]events.Event, error) {
	type read struct {
		evs []events.Event
		err error
	}
	apps := make(chan read, 1)
	go func() {
		evs, err := s.kindAfter(ctx, tenant, session, events.KindApply, afterSeq, 0)
		apps <- read{evs, err}
	}()
	out, err := s.kindAfter(ctx, tenant, session, events.KindFact, afterSeq, lastFact)
	a := <-apps
	if err != nil {
		return nil, err
	}
	if a.err != nil {
		return nil, a.err
	}
	out = append(out, a.evs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

// kindAfter returns the session's events of one kind after stream
// sequence afterSeq, through last (0: the kind's last at the call).
func (s *Store) kindAfter(ctx context.Context, tenant, session string, kind events.SubjectKind, afterSeq, last uint64) ([]events.Event, error) {
	subj, err := s.sessionSubject(tenant, session, kind)
	if err != nil {
		return nil, fmt.Errorf("read session: %w", err)
	}
	if last == 0 {
		// At the leader: a proxy's catch-up completes its tail of the
		// session with this read (proxy.fleetTail.complete), so it must
		// not stop short of an event the tail passed before.
		if last, err = s.LastSeqLeader(ctx, tenant, session, kind); err != nil {
			return nil, fmt.Errorf("read %s: %w", subj, err)
		}
	}
	if last <= afterSeq {
		return nil, nil
	}
	evs, err := s.readAfter(ctx, subj, afterSeq, last, catchUpByGet)
	if err != nil {
		return nil, fmt.Errorf("read %s after seq %d: %w", subj, afterSeq, err)
	}
	return evs, nil
}

// catchUpByGet is how many events ReadSessionAfter reads with single gets
// (from a sequence past 0) before it reads the rest with one consumer.
const catchUpByGet = 32

// marksByGet is how many marks MarksSince reads with single gets before it
// reads the rest with one consumer (a few requests to set up and delete).
const marksByGet = 4

// ReadSessionAfter returns the session's events (facts, marks and
// applications) after stream sequence afterSeq, in log order, decoded
// strictly, with Seq set: what a reader whose copy of the session is
// complete through afterSeq lacks (a proxy catching up with what another
// proxy appended). It reads up to the session's last event at the time of
// the call; nothing after afterSeq gives an empty slice for the cost of
// one request. ReadSession is ReadSessionAfter from 0.
func (s *Store) ReadSessionAfter(ctx context.Context, tenant, session string, afterSeq uint64) ([]events.Event, error) {
	return s.readSession(ctx, tenant, session, afterSeq, s.LastSeq)
}

// ReadSessionLeader is ReadSession bounded by the session's last event as
// the stream's leader knows it (LastSeqLeader), whatever the stream's
// configuration lets answer its gets: never short of an event a consumer
// delivered or a publish acknowledged before the call. A fleet proxy
// rebuilding a session needs that bound (its tail of the log keeps the
// session's events only from just before the read, so an event the read
// stopped short of would be in neither). It costs what ReadSession costs:
// one request to the leader, then the read.
func (s *Store) ReadSessionLeader(ctx context.Context, tenant, session string) ([]events.Event, error) {
	return s.readSession(ctx, tenant, session, 0, s.LastSeqLeader)
}

// readSession reads the session's events after stream sequence afterSeq
// through its last event as last (LastSeq, LastSeqLeader) gives it.
func (s *Store) readSession(ctx context.Context, tenant, session string, afterSeq uint64, last func(ctx context.Context, tenant, session string, kind events.SubjectKind) (uint64, error)) ([]events.Event, error) {
	filter, err := s.sessionSubject(tenant, session, "")
	if err != nil {
		return nil, fmt.Errorf("read session: %w", err)
	}
	until, err := last(ctx, tenant, session, "")
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", filter, err)
	}
	if until <= afterSeq {
		return []events.Event{}, nil
	}
	byGet := 0
	if afterSeq > 0 {
		// A reader catching up usually lacks a request's worth of events.
		byGet = catchUpByGet
	}
	out, err := s.readAfter(ctx, filter, afterSeq, until, byGet)
	if err != nil {
		return nil, fmt.Errorf("read session %s after seq %d: %w", filter, afterSeq, err)
	}
	return out, nil
}
