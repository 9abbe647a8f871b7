package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
)

// Atomic batch headers (JetStream 2.12+, stream option
// AllowAtomicPublish): the batch's id, each message's place in it, and
// the commit on its last message.
const (
	batchIDHeader     = "Nats-Batch-Id"
	batchSeqHeader    = "Nats-Batch-Sequence"
	batchCommitHeader = "Nats-Batch-Commit"
)

// chainBatch bounds the events of one atomic batch (the server's default
// limit is 1,000); a longer chain is several batches, each guarded by the
// last fact the one before stored.
const chainBatch = 256

// AppendChain appends events of one session in order, each as if only
// when the session's last fact is still the one before it (the first: at
// expect; 0: no fact yet), and returns the events stored before a
// failure; a failed expectation wraps ErrConflict.
//
// When the stream allows atomic batches (a stream created by this
// version) and is replicated, the chain goes as one batch, guarded on its
// first event: the server stores all of it or none, and nothing of
// another writer lands inside it, so one round trip does what one guarded
// publish per event did. Otherwise, or when the server refuses the batch
// for another reason than the guard (a message id it holds already, too
// many batches in flight), the events go one guarded publish each
// (AppendGuarded). A single-replica file stream stages each batch in a
// file store of its own on the server (nats-server 2.15.2,
// newBatchStore), which costs more than a request's few publishes: there
// the chain goes one by one too.
func (s *Store) AppendChain(ctx context.Context, evs []events.Event, expect uint64) ([]events.Event, error) {
	out := make([]events.Event, 0, len(evs))
	for len(evs) > 0 {
		n := min(len(evs), chainBatch)
		stored, err := s.appendBatch(ctx, evs[:n], expect)
		if errors.Is(err, errNoBatch) {
			return s.appendOneByOne(ctx, out, evs, expect)
		}
		if err != nil {
			return out, err
		}
		out = append(out, stored...)
		expect = lastFactSeq(stored, expect)
		evs = evs[n:]
	}
	return out, nil
}

// appendOneByOne appends evs each guarded by the fact before, after the
// events already stored.
func (s *Store) appendOneByOne(ctx context.Context, out, evs []events.Event, expect uint64) ([]events.Event, error) {
	for _, e := range evs {
		stored, err := s.AppendGuarded(ctx, e, expect)
		if err != nil {
			return out, err
		}
		out = append(out, stored)
		if stored.IsFact() {
			expect = stored.Seq
		}
	}
	return out, nil
}

// lastFactSeq is the stream sequence of the last fact of stored, or
// expect when it holds none. A guarded publish's expectation is the
// session's last fact; an application or mark stored in a chain does not
// move it.
func lastFactSeq(stored []events.Event, expect uint64) uint64 {
	for i := len(stored) - 1; i >= 0; i-- {
		if stored[i].IsFact() {
			return stored[i].Seq
		}
	}
	return expect
}

// errNoBatch says the server did not take an atomic batch and stored
// nothing of it for a reason other than the guard: the caller publishes
// one by one.
var errNoBatch = errors.New("atomic batch not taken")

// appendBatch publishes evs as one atomic batch whose first event is
// guarded by expect. It returns errNoBatch when the stream does not allow
// atomic batches or the server refused the batch (storing none of it) for
// another reason than the guard.
func (s *Store) appendBatch(ctx context.Context, evs []events.Event, expect uint64) ([]events.Event, error) {
	cfg := s.stream.CachedInfo().Config
	if !cfg.AllowAtomicPublish || cfg.Replicas <= 1 && cfg.Storage == jetstream.FileStorage && !s.batchR1 {
		return nil, errNoBatch
	}
	out := make([]events.Event, len(evs))
	msgs := make([]*nats.Msg, len(evs))
	for i, e := range evs {
		if err := e.Validate(); err != nil {
			return nil, &EventError{Index: i, ID: e.ID, Err: err}
		}
		stored, msg, err := s.prepare(ctx, e)
		if err != nil {
			return nil, &EventError{Index: i, ID: e.ID, Err: err}
		}
		out[i], msgs[i] = stored, msg
	}
	first := out[0]
	guard := events.StoredSubject(first.TenantOrDefault(), first.Session, events.KindFact, s.PartitionOf(first.TenantOrDefault(), first.Session))
	id := events.NewID()
	for i, m := range msgs {
		m.Header.Set(jetstream.MsgIDHeader, events.MsgID(out[i]))
		m.Header.Set(batchIDHeader, id)
		m.Header.Set(batchSeqHeader, strconv.Itoa(i+1))
		if i == 0 {
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expect, 10))
			m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, guard)
		}
		if i == len(msgs)-1 {
			break
		}
		if err := s.nc.PublishMsg(m); err != nil {
			return nil, fmt.Errorf("append batch of %d events to %s: publish %s: %w", len(evs), guard, out[i].ID, err)
		}
	}
	last := msgs[len(msgs)-1]
	last.Header.Set(batchCommitHeader, "1")
	resp, err := s.nc.RequestMsgWithContext(ctx, last)
	if err != nil {
		return nil, fmt.Errorf("append batch of %d events to %s: commit: %w", len(evs), guard, err)
	}
	var ack struct {
		Stream string              `json:"stream"`
		Seq    uint64              `json:"seq"`
		Count  int                 `json:"count"`
		Error  *jetstream.APIError `json:"error,omitempty"`
	}
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return nil, fmt.Errorf("append batch of %d events to %s: commit answer %q: %w", len(evs), guard, resp.Data, err)
	}
	if ack.Error != nil {
		if isWrongLastSequence(ack.Error) {
			return nil, fmt.Errorf("append batch of %d events: last fact of %s is not %d: %w (%v)", len(evs), guard, expect, ErrConflict, ack.Error)
		}
		s.log.Debug("append: atomic batch refused, publishing one by one", "events", len(evs), "err", ack.Error)
		return nil, errNoBatch
	}
	if ack.Stream != events.StreamName || ack.Count != len(evs) || ack.Seq < uint64(len(evs)) {
		return nil, fmt.Errorf("append batch of %d events to %s: stored %d by stream %q, want %d by %q", len(evs), guard, ack.Count, ack.Stream, len(evs), events.StreamName)
	}
	for i := range out {
		out[i].Seq = ack.Seq - uint64(len(out)-1-i)
	}
	return out, nil
}
