package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/jsask"
)

// Append stores a batch of events in order and returns them in stored form
// (inline tool outputs moved to the blob store, token counts filled) with
// Seq set.
//
// Every event is validated and prepared before anything is published: a
// batch with an invalid event publishes nothing and returns an *EventError
// naming the event and (through *events.FieldError) the field. Blobs of
// valid outputs may already be stored by then; that is harmless, they are
// content-addressed.
//
// Facts are idempotent forever: a fact whose id the session already holds
// in the log is not published again and comes back with the stored copy's
// sequence, however long ago it was stored; so does a repeat of an id
// within the batch. The same id with different content (compared on the
// stored encoding) is an *EventError wrapping ErrIDConflict, and the whole
// batch is rejected before anything is published. Appends to one session
// are serialised within this process; the session's ids are cached (see
// Config.IDCacheEntries), and the facts another writer added since are read
// from the log at each append (unless Config.SoleWriter).
//
// Events are published asynchronously with at most Config.MaxPending in
// flight, each with Nats-Msg-Id = events.MsgID(e). An event the server
// reports as a duplicate (same id within the Duplicates window) is not an
// error: it is returned with the sequence of the copy already stored (a
// concurrent writer's copy of the same id is not compared: the server
// deduplicates it by id alone).
//
// Append is not atomic. On a publish failure it still waits for every
// outstanding acknowledgement, then returns the first failure (an
// *EventError) with no events; some of the batch may be stored. Retrying the
// same batch within the Duplicates window is safe (stored events come back
// as duplicates), but a retried event can then land after events that
// followed it in the batch.
func (s *Store) Append(ctx context.Context, evs []events.Event) ([]events.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	// Validate the input form first so a bad batch has no side effects.
	for i, e := range evs {
		if err := e.Validate(); err != nil {
			return nil, &EventError{Index: i, ID: e.ID, Err: err}
		}
	}
	if err := s.putOutputs(ctx, evs); err != nil {
		return nil, err
	}
	out, msgs, digests, err := s.prepareBatch(ctx, evs)
	if err != nil {
		return nil, err
	}
	// The facts' sessions stay locked in this process until their ids are
	// recorded. skip marks facts not to publish: stored before (Seq set)
	// or an earlier copy in this batch (alias). A conflict rejects the
	// batch before anything is published.
	locks, err := s.lockSessions(ctx, out)
	if err != nil {
		return nil, err
	}
	defer unlockSessions(locks)
	skip, alias, err := s.known(out, digests, locks)
	if err != nil {
		return nil, err
	}

	futs := make([]jetstream.PubAckFuture, len(msgs))
	var firstErr error
	for i, m := range msgs {
		if skip[i] {
			continue
		}
		if err := ctx.Err(); err != nil {
			firstErr = &EventError{Index: i, ID: out[i].ID, Err: fmt.Errorf("publish: %w", err)}
			break
		}
		// No Nats-Expected-Stream header: a subject belongs to one stream
		// (the server refuses overlapping subjects), and the ack names
		// the stream that stored it, which is checked below.
		f, err := s.js.PublishMsgAsync(m,
			jetstream.WithMsgID(events.MsgID(out[i])),
			jetstream.WithStallWait(s.cfg.PublishTimeout),
			// No automatic retry: a retried message would land after the
			// ones published behind it. The caller retries the batch.
			jetstream.WithRetryAttempts(0),
		)
		if err != nil {
			firstErr = &EventError{Index: i, ID: out[i].ID, Err: fmt.Errorf("publish to %s: %w", m.Subject, err)}
			break
		}
		futs[i] = f
	}

	// Wait for every future that was started, even after a failure, so no
	// acknowledgement is left dangling and the first failure is reported.
	dups := 0
	published, dup := make([]bool, len(futs)), make([]bool, len(futs))
	for i, f := range futs {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			if ack.Stream != events.StreamName {
				if firstErr == nil {
					firstErr = &EventError{Index: i, ID: out[i].ID, Err: fmt.Errorf("publish to %s: stored by stream %q, want %q", msgs[i].Subject, ack.Stream, events.StreamName)}
				}
				continue
			}
			out[i].Seq = ack.Sequence
			published[i] = true
			if ack.Duplicate {
				dups++
				dup[i] = true
			}
		case err := <-f.Err():
			if firstErr == nil {
				firstErr = &EventError{Index: i, ID: out[i].ID, Err: fmt.Errorf("publish to %s: %w", msgs[i].Subject, err)}
			}
		case <-ctx.Done():
			if firstErr == nil {
				firstErr = &EventError{Index: i, ID: out[i].ID, Err: fmt.Errorf("wait for ack: %w", ctx.Err())}
			}
		}
	}
	s.recordIDs(out, digests, published, dup, firstErr != nil, locks)
	if firstErr != nil {
		return nil, fmt.Errorf("append %d events: %w", len(evs), firstErr)
	}
	for i, j := range alias {
		out[i].Seq = out[j].Seq
	}
	if dups > 0 {
		s.log.Debug("append: duplicates acknowledged", slog.Int("events", len(evs)), slog.Int("duplicates", dups))
	}
	return out, nil
}

// AppendGuarded stores one event only if the last fact of its session is
// still at stream sequence expectLastFactSeq (0: the session has no fact
// yet). The server checks it atomically with the write (header
// Nats-Expected-Last-Subject-Sequence with
// Nats-Expected-Last-Subject-Sequence-Subject = the session's fact subject),
// so a scheduler's application is rejected if a new session fact landed
// since the cache-safe point it was decided at. A failed check returns an
// error wrapping ErrConflict.
//
// The expected-sequence check runs before deduplication on the server: a
// retried guarded fact that was already stored fails with ErrConflict (its
// own earlier copy moved the last fact), while a retried mark or application
// whose session facts did not move comes back as a duplicate with the
// original sequence.
func (s *Store) AppendGuarded(ctx context.Context, ev events.Event, expectLastFactSeq uint64) (events.Event, error) {
	if err := ev.Validate(); err != nil {
		return events.Event{}, &EventError{ID: ev.ID, Err: err}
	}
	stored, msg, err := s.prepare(ctx, ev)
	if err != nil {
		return events.Event{}, &EventError{ID: ev.ID, Err: err}
	}
	guard := events.StoredSubject(stored.TenantOrDefault(), stored.Session, events.KindFact, s.PartitionOf(stored.TenantOrDefault(), stored.Session))
	ack, err := s.js.PublishMsg(ctx, msg,
		jetstream.WithMsgID(events.MsgID(stored)),
		jetstream.WithExpectLastSequenceForSubject(expectLastFactSeq, guard),
	)
	if err != nil {
		if isWrongLastSequence(err) {
			return events.Event{}, fmt.Errorf("append guarded event %s: last fact of %s is not %d: %w (%v)",
				stored.ID, guard, expectLastFactSeq, ErrConflict, err)
		}
		return events.Event{}, fmt.Errorf("append guarded event %s to %s: %w", stored.ID, msg.Subject, err)
	}
	if ack.Stream != events.StreamName {
		return events.Event{}, fmt.Errorf("append guarded event %s to %s: stored by stream %q, want %q", stored.ID, msg.Subject, ack.Stream, events.StreamName)
	}
	stored.Seq = ack.Sequence
	return stored, nil
}

// LastSeq returns the stream sequence of the last event of a session on
// subjects of one kind, or 0 if there is none. An empty kind means any kind
// (the last event of the session). It is the client's message get: the
// event stream allows no direct gets (StreamConfig), so its leader
// answers; on a stream with direct gets any replica would, possibly
// behind the leader. A caller whose correctness needs the leader's answer
// whatever the stream's configuration (a fleet proxy's reads that a tail
// of the log completes) uses LastSeqLeader.
func (s *Store) LastSeq(ctx context.Context, tenant, session string, kind events.SubjectKind) (uint64, error) {
	subj, err := s.sessionSubject(tenant, session, kind)
	if err != nil {
		return 0, fmt.Errorf("last seq: %w", err)
	}
	m, err := jsask.Ask(ctx, s.cfg.RequestAgain, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return s.stream.GetLastMsgForSubject(ctx, subj)
	})
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, nil
		}
		return 0, fmt.Errorf("last seq of %s: %w", subj, err)
	}
	return m.Sequence, nil
}

// LastSeqLeader is LastSeq answered by the stream's leader whatever the
// stream's configuration: the JetStream API's message get, never a direct
// get, which any replica answers. The leader stored every event whose
// publish was acknowledged, so the last event it reports is never older
// than one a client saw acknowledged or a consumer delivered. A fleet
// proxy catching up before it decides reads it: a request forwarded on a
// view that missed the previous request's acknowledged record would be
// decided on a view the log does not hold. It costs one round trip to the
// leader; while the event stream allows no direct gets (StreamConfig),
// LastSeq is the same request.
func (s *Store) LastSeqLeader(ctx context.Context, tenant, session string, kind events.SubjectKind) (uint64, error) {
	subj, err := s.sessionSubject(tenant, session, kind)
	if err != nil {
		return 0, fmt.Errorf("last seq: %w", err)
	}
	return s.lastSeqLeader(ctx, subj)
}

// lastSeqLeader is LastSeqLeader for a subject (or a filter with
// wildcards) of the event stream.
func (s *Store) lastSeqLeader(ctx context.Context, subj string) (uint64, error) {
	seq, _, err := s.lastAtLeader(ctx, events.StreamName, subj, false)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last seq of %s: %w", subj, err)
	}
	return seq, nil
}

// lastAtLeader returns the last message on subj (a subject or a filter)
// in stream as the stream's leader holds it (jsask.LastAtLeader: never a
// direct get, which a replica behind the leader would answer), sent
// again every Config.RequestAgain while unanswered (jsask.Ask). It
// returns the message's sequence and, when data is true, its payload. No
// message is jetstream.ErrMsgNotFound. Without a deadline on ctx it waits
// at most Config.PublishTimeout.
func (s *Store) lastAtLeader(ctx context.Context, stream, subj string, data bool) (uint64, []byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.PublishTimeout)
		defer cancel()
	}
	type msg struct {
		seq  uint64
		data []byte
	}
	m, err := jsask.Ask(ctx, s.cfg.RequestAgain, func(ctx context.Context) (msg, error) {
		seq, data, err := jsask.LastAtLeader(ctx, s.js, stream, subj, data)
		return msg{seq, data}, err
	})
	return m.seq, m.data, err
}

// FirstSeq returns the stream sequence of the first event of a session on
// subjects of one kind (an empty kind: any), or 0 if there is none. Like
// LastSeq it is the client's message get (the leader answers while the
// stream allows no direct gets); were a replica behind the leader to
// answer, an event it does not hold yet would not be reported, so a 0
// means "not known to be there", never that a later first was the first.
func (s *Store) FirstSeq(ctx context.Context, tenant, session string, kind events.SubjectKind) (uint64, error) {
	subj, err := s.sessionSubject(tenant, session, kind)
	if err != nil {
		return 0, fmt.Errorf("first seq: %w", err)
	}
	m, err := jsask.Ask(ctx, s.cfg.RequestAgain, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return s.stream.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subj))
	})
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, nil
		}
		return 0, fmt.Errorf("first seq of %s: %w", subj, err)
	}
	return m.Sequence, nil
}

// prepareBatch prepares a validated batch (see prepare) and digests its
// facts' stored encodings. Tokenizing is CPU-bound and each event's result
// depends on that event alone, so a batch with enough text to count is
// prepared on up to GOMAXPROCS goroutines; results keep the batch's order
// and the error returned is that of the first failing event, as if
// prepared one by one.
func (s *Store) prepareBatch(ctx context.Context, evs []events.Event) ([]events.Event, []*nats.Msg, [][sha256.Size]byte, error) {
	out := make([]events.Event, len(evs))
	msgs := make([]*nats.Msg, len(evs))
	digests := make([][sha256.Size]byte, len(evs))
	errs := make([]error, len(evs))
	one := func(i int) {
		stored, msg, err := s.prepare(ctx, evs[i])
		if err != nil {
			errs[i] = err
			return
		}
		out[i], msgs[i] = stored, msg
		if stored.IsFact() {
			digests[i] = digestOf(msg.Data)
		}
	}
	procs := min(runtime.GOMAXPROCS(0), len(evs))
	if procs < 2 || countBytes(evs) < parallelCountBytes {
		for i := range evs {
			if one(i); errs[i] != nil {
				break
			}
		}
	} else {
		var (
			next atomic.Int64
			wg   sync.WaitGroup
		)
		for range procs {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= len(evs) {
						return
					}
					one(i)
				}
			})
		}
		wg.Wait()
	}
	for i, err := range errs {
		if err != nil {
			return nil, nil, nil, &EventError{Index: i, ID: evs[i].ID, Err: err}
		}
	}
	return out, msgs, digests, nil
}

// parallelCountBytes is the text to tokenize from which a batch is
// prepared in parallel: the tokenizer does a few MB/s, so 16 KiB is a few
// milliseconds, well over the cost of starting the goroutines.
const parallelCountBytes = 16 << 10

// countBytes is the size of the text Prepare tokenizes in evs.
func countBytes(evs []events.Event) int {
	n := 0
	for _, e := range evs {
		n += events.PrepareTextBytes(e)
	}
	return n
}

// prepare turns a validated input-form event into its stored form and the
// message to publish.
func (s *Store) prepare(ctx context.Context, e events.Event) (events.Event, *nats.Msg, error) {
	limit := s.nc.MaxPayload()
	// Text that stays inline and alone exceeds the limit: refuse before
	// counting its tokens (seconds for megabytes).
	if n := int64(inlineBytes(e)); limit > 0 && n+headerRoom > limit {
		return events.Event{}, nil, tooLarge(n, limit, "at least ")
	}
	stored, err := events.Prepare(ctx, e, s, s.cfg.Tokens)
	if err != nil {
		return events.Event{}, nil, fmt.Errorf("prepare: %w", err)
	}
	// Every caller validated e; Prepare keeps a valid event valid.
	b, err := events.EncodeValidated(stored)
	if err != nil {
		return events.Event{}, nil, err
	}
	// Leave room for headers (msg id, expectations).
	if limit > 0 && int64(len(b))+headerRoom > limit {
		return events.Event{}, nil, tooLarge(int64(len(b)), limit, "")
	}
	return stored, &nats.Msg{Subject: events.SubjectOf(stored), Data: b, Header: nats.Header{}}, nil
}

// tooLarge is the ErrTooLarge of an event of n encoded bytes (at least,
// with qualifier "at least ") under the server's max payload limit.
func tooLarge(n, limit int64, qualifier string) error {
	return fmt.Errorf("%w: encoded event is %s%d bytes, over the maximum event size of %d bytes (the NATS server's max payload %d less %d for headers); tool outputs of any size go to the blob store, other text must fit",
		ErrTooLarge, qualifier, n, limit-headerRoom, limit, headerRoom)
}

// inlineBytes is the size of the text an event keeps inline in the log
// (a lower bound of its encoded size; tool output goes to the blob store).
func inlineBytes(e events.Event) int {
	switch p := e.Data.(type) {
	case *events.Message:
		return len(p.Text) + len(p.Signature)
	case *events.ToolCall:
		return len(p.Input)
	}
	return 0
}

// headerRoom is the room left in a message for its headers (msg id,
// expectations).
const headerRoom = 512

// isWrongLastSequence reports a failed expected-last-sequence check. The
// server answers 10071 on a single server and may answer 10164 on a
// replicated stream.
func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// sessionSubject returns the stored subject (kind set) or session filter
// (kind empty) of a session, refusing names that are not plain subject
// tokens so no caller can smuggle in a wildcard.
func (s *Store) sessionSubject(tenant, session string, kind events.SubjectKind) (string, error) {
	if tenant == "" {
		tenant = events.DefaultTenant
	}
	if !events.ValidToken(tenant) {
		return "", fmt.Errorf("invalid tenant %q", tenant)
	}
	if !events.ValidToken(session) {
		return "", fmt.Errorf("invalid session %q", session)
	}
	switch kind {
	case "":
		return events.SessionFilter(tenant, session), nil
	case events.KindFact, events.KindMark, events.KindApply:
		return events.StoredSubject(tenant, session, kind, s.PartitionOf(tenant, session)), nil
	}
	return "", fmt.Errorf("unknown subject kind %q", kind)
}

// putConcurrency bounds the blob puts one Append runs at once.
const putConcurrency = 8

// putOutputs stores a batch's inline tool outputs concurrently before the
// events are prepared (prepareBatch: on at most GOMAXPROCS goroutines, and
// only when there is much text to count), so a batch with many new outputs waits
// for the object store's round trips (a look-up, the chunks, the metadata)
// about once instead of once per output; Prepare's own PutBlob then finds
// each one in the blob cache. Failures name the event, as prepare's do.
func (s *Store) putOutputs(ctx context.Context, evs []events.Event) error {
	var idx []int
	for i, e := range evs {
		if tr, ok := e.Data.(*events.ToolResult); ok && tr.Output != nil {
			idx = append(idx, i)
		}
	}
	if len(idx) < 2 {
		return nil
	}
	sem := make(chan struct{}, putConcurrency)
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for j, i := range idx {
		data := *evs[i].Data.(*events.ToolResult).Output
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[j] = s.PutBlobString(ctx, events.HashString(data), data)
		}()
	}
	wg.Wait()
	for j, err := range errs {
		if err != nil {
			i := idx[j]
			return &EventError{Index: i, ID: evs[i].ID, Err: fmt.Errorf("prepare: store output: %w", err)}
		}
	}
	return nil
}
