package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
)

// DefaultIDBucket is the key-value bucket that remembers every stored fact's
// id, so a fact appended again at any later time (long after the server's
// Duplicates window) is recognised and not stored twice.
const DefaultIDBucket = "PRUNESCHED_IDS"

// ErrIDConflict is returned (wrapped, inside an *EventError naming the
// event) by Append when a fact's id is already stored in its session with
// different content. Nothing of the batch is stored. Match it with
// errors.Is.
var ErrIDConflict = errors.New("event id already stored with different content")

// idEntry is what the id index holds for one stored fact.
type idEntry struct {
	seq    uint64
	digest string
}

// idKey is the index key of a fact: tenant and session (plain subject
// tokens) and a hash of the id (ids may hold characters keys may not).
func idKey(e events.Event) string {
	h := sha256.Sum256([]byte(e.ID))
	return e.TenantOrDefault() + "." + e.Session + "." + hex.EncodeToString(h[:16])
}

// digestOf is the content digest of a fact's stored encoding: two appends of
// one id are the same event exactly when their encodings are equal.
func digestOf(encoded []byte) string {
	h := sha256.Sum256(encoded)
	return hex.EncodeToString(h[:])
}

func (e idEntry) encode() []byte {
	return []byte(strconv.FormatUint(e.seq, 10) + " " + e.digest)
}

func decodeIDEntry(b []byte) (idEntry, error) {
	seq, digest, ok := strings.Cut(string(b), " ")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !ok || err != nil || len(digest) != 2*sha256.Size {
		return idEntry{}, fmt.Errorf("bad id index entry %q", b)
	}
	return idEntry{seq: n, digest: digest}, nil
}

// lookupIDs returns the index entries of the facts among msgs (nil where
// none is stored), looking them up concurrently.
func (s *Store) lookupIDs(ctx context.Context, evs []events.Event) ([]*idEntry, error) {
	out := make([]*idEntry, len(evs))
	errs := make([]error, len(evs))
	sem := make(chan struct{}, putConcurrency)
	var wg sync.WaitGroup
	for i, e := range evs {
		if !e.IsFact() {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			kv, err := s.ids.Get(ctx, idKey(e))
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				return
			}
			if err != nil {
				errs[i] = fmt.Errorf("look up id: %w", err)
				return
			}
			ent, err := decodeIDEntry(kv.Value())
			if err != nil {
				errs[i] = err
				return
			}
			out[i] = &ent
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, &EventError{Index: i, ID: evs[i].ID, Err: err}
		}
	}
	return out, nil
}

// indexIDs records the stored facts of a batch in the id index. An entry
// that exists already (a concurrent writer stored the same fact, or an
// earlier Append was interrupted after the server stored the fact) is
// checked, not replaced: a different digest is an ErrIDConflict.
func (s *Store) indexIDs(ctx context.Context, evs []events.Event, digests []string, skip []bool) error {
	type pending struct {
		i   int
		fut jetstream.PubAckFuture
	}
	var futs []pending
	for i, e := range evs {
		if skip[i] || !e.IsFact() {
			continue
		}
		m := &nats.Msg{Subject: "$KV." + s.cfg.IDBucket + "." + idKey(e), Data: idEntry{seq: e.Seq, digest: digests[i]}.encode(), Header: nats.Header{}}
		// Create, not put: the first entry of an id stands.
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		f, err := s.js.PublishMsgAsync(m, jetstream.WithStallWait(s.cfg.PublishTimeout), jetstream.WithRetryAttempts(0))
		if err != nil {
			return &EventError{Index: i, ID: e.ID, Err: fmt.Errorf("index id: %w", err)}
		}
		futs = append(futs, pending{i, f})
	}
	var firstErr error
	for _, p := range futs {
		var err error
		select {
		case <-p.fut.Ok():
		case err = <-p.fut.Err():
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil && isWrongLastSequence(err) {
			err = s.checkIndexed(ctx, evs[p.i], digests[p.i])
		}
		if err != nil && firstErr == nil {
			firstErr = &EventError{Index: p.i, ID: evs[p.i].ID, Err: fmt.Errorf("index id: %w", err)}
		}
	}
	return firstErr
}

// checkIndexed compares an existing index entry with a fact's digest.
func (s *Store) checkIndexed(ctx context.Context, e events.Event, digest string) error {
	kv, err := s.ids.Get(ctx, idKey(e))
	if err != nil {
		return fmt.Errorf("look up id: %w", err)
	}
	ent, err := decodeIDEntry(kv.Value())
	if err != nil {
		return err
	}
	if ent.digest != digest {
		return fmt.Errorf("stored at sequence %d: %w", ent.seq, ErrIDConflict)
	}
	return nil
}
