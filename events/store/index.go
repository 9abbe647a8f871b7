package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/lru"
)

// ErrIDConflict is returned (wrapped, inside an *EventError naming the
// event) by Append when a fact's id is already stored in its session with
// different content. Nothing of the batch is stored. Match it with
// errors.Is.
var ErrIDConflict = events.ErrIDConflict

// The log is its own index of fact ids: before publishing, Append checks a
// session's facts against the ids the session holds in the stream. Each
// process caches them per session (idCache), with the stream sequence
// through which its copy is complete; one request for the session's last
// fact sequence per Append tells whether another writer added facts since,
// and only those are read. This process's own appends advance the copy.
// A sole writer (Config.SoleWriter) skips that request.

// idEntry is one stored fact: its stream sequence and the digest of its
// stored encoding.
type idEntry struct {
	seq    uint64
	digest [sha256.Size]byte
}

// digestOf is the content digest of a fact's stored encoding: two appends of
// one id are the same event exactly when their encodings are equal.
func digestOf(encoded []byte) [sha256.Size]byte { return sha256.Sum256(encoded) }

// sessionIDs is the cached fact ids of one session. mu serialises this
// process's appends to the session (check, publish, record).
type sessionIDs struct {
	mu     sync.Mutex
	key    string
	loaded bool
	last   uint64 // every fact of the session through this sequence is in ids
	ids    map[string]idEntry
}

// idCache holds sessionIDs, least recently used out first once more than
// max ids are held.
type idCache struct {
	mu       sync.Mutex
	sessions *lru.Cache[string, *sessionIDs] // cost: ids held
}

func newIDCache(maxEntries int) *idCache {
	return &idCache{sessions: lru.New[string, *sessionIDs](int64(maxEntries))}
}

// get returns the session's entry (new and empty if absent), most recent.
func (c *idCache) get(key string) *sessionIDs {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.sessions.Get(key); ok {
		return s
	}
	s := &sessionIDs{key: key, ids: map[string]idEntry{}}
	c.sessions.Add(key, s, 0)
	return s
}

// grew accounts for d more ids in s and evicts least recently used
// sessions (never s) while over the bound. An evicted session still held
// by an Append stays usable by it.
func (c *idCache) grew(s *sessionIDs, d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if held, _ := c.sessions.Peek(s.key); held != s {
		return // evicted meanwhile: no longer counted
	}
	c.sessions.Grow(s.key, int64(d))
}

// sessionLock is one session's ids, locked for an Append.
type sessionLock struct {
	tenant, session string
	ids             *sessionIDs
}

// lockSessions locks the id caches of the sessions of the facts in evs, in
// a fixed order (so concurrent batches spanning sessions cannot deadlock),
// and brings each up to date with the log. The caller unlocks them.
func (s *Store) lockSessions(ctx context.Context, evs []events.Event) ([]sessionLock, error) {
	seen := map[string]sessionLock{}
	for _, e := range evs {
		if !e.IsFact() {
			continue
		}
		key := events.MsgID(events.Event{Tenant: e.TenantOrDefault(), Session: e.Session})
		if _, ok := seen[key]; !ok {
			seen[key] = sessionLock{tenant: e.TenantOrDefault(), session: e.Session}
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	locks := make([]sessionLock, 0, len(keys))
	for _, k := range keys {
		l := seen[k]
		l.ids = s.ids.get(k)
		l.ids.mu.Lock()
		locks = append(locks, l)
		if err := s.refreshIDs(ctx, l); err != nil {
			unlockSessions(locks)
			return nil, err
		}
	}
	return locks, nil
}

func unlockSessions(locks []sessionLock) {
	for _, l := range locks {
		l.ids.mu.Unlock()
	}
}

// refreshIDs makes l's cached ids complete: when the session's last fact
// in the stream is not the one the cache covers through, it reads the
// facts after that (all of them the first time). The caller holds
// l.ids.mu.
func (s *Store) refreshIDs(ctx context.Context, l sessionLock) error {
	if s.cfg.SoleWriter && l.ids.loaded {
		return nil // no one else adds facts: the copy stays complete
	}
	last, err := s.LastSeq(ctx, l.tenant, l.session, events.KindFact)
	if err != nil {
		return err
	}
	c := l.ids
	if c.loaded && last == c.last {
		return nil
	}
	before := len(c.ids)
	if !c.loaded {
		clear(c.ids)
		c.last = 0
	}
	if last > c.last {
		subj := events.StoredSubject(l.tenant, l.session, events.KindFact, s.PartitionOf(l.tenant, l.session))
		cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}}
		if c.last > 0 {
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, c.last+1
		}
		_, err = s.replayRaw(ctx, cfg, last, func(subject string, seq uint64, data []byte) error {
			e, err := decodeMsg(subject, seq, data)
			if err != nil {
				// Not a fact prunesched wrote (the workers count and
				// skip it too): it holds no id to protect.
				return nil
			}
			if _, dup := c.ids[e.ID]; !dup { // the first copy stands
				c.ids[e.ID] = idEntry{seq: seq, digest: digestOf(data)}
			}
			return nil
		})
		if err != nil {
			c.loaded = false
			s.ids.grew(c, len(c.ids)-before)
			return fmt.Errorf("read fact ids of %s: %w", subj, err)
		}
	}
	c.loaded, c.last = true, last
	s.ids.grew(c, len(c.ids)-before)
	return nil
}

// known settles which facts of a prepared batch are stored already (in
// the locked sessions' ids) or repeated earlier in the batch (alias maps
// such an index to the first copy's). A known id with a different digest
// is an *EventError wrapping ErrIDConflict, returned before anything is
// published.
func (s *Store) known(out []events.Event, digests [][sha256.Size]byte, locks []sessionLock) (skip []bool, alias map[int]int, err error) {
	byKey := map[string]*sessionIDs{}
	for _, l := range locks {
		byKey[l.ids.key] = l.ids
	}
	skip = make([]bool, len(out))
	first := map[string]int{}
	for i, e := range out {
		if !e.IsFact() {
			continue
		}
		k := events.MsgID(e)
		if j, seen := first[k]; seen {
			if digests[j] != digests[i] {
				return nil, nil, &EventError{Index: i, ID: e.ID, Err: fmt.Errorf("event %d of the batch has this id with other content: %w", j, ErrIDConflict)}
			}
			skip[i] = true
			if alias == nil {
				alias = map[int]int{}
			}
			alias[i] = j
			continue
		}
		first[k] = i
		ids := byKey[events.MsgID(events.Event{Tenant: e.TenantOrDefault(), Session: e.Session})]
		if ent, ok := ids.ids[e.ID]; ok {
			if ent.digest != digests[i] {
				return nil, nil, &EventError{Index: i, ID: e.ID, Err: fmt.Errorf("stored at sequence %d: %w", ent.seq, ErrIDConflict)}
			}
			skip[i] = true
			out[i].Seq = ent.seq
		}
	}
	return skip, alias, nil
}

// recordIDs adds the facts this Append published to their sessions' ids
// and, when every one of a session's publishes succeeded as a new message,
// moves the session's complete-through sequence to the last of them. (A
// fact another process appended to the same session in the instant
// between the freshness check and these publishes is then missed by the
// copy; the server's Duplicates window still covers a repeat of it for two
// minutes.) A duplicate acknowledgement or a failure leaves the sequence,
// so the next Append reads the session's newer facts from the log.
func (s *Store) recordIDs(out []events.Event, digests [][sha256.Size]byte, published, dup []bool, failed bool, locks []sessionLock) {
	byKey := map[string]*sessionIDs{}
	for _, l := range locks {
		byKey[l.ids.key] = l.ids
	}
	type change struct {
		grew  int
		max   uint64
		clean bool
	}
	changes := map[*sessionIDs]*change{}
	for i, e := range out {
		if !e.IsFact() || !published[i] {
			continue
		}
		ids := byKey[events.MsgID(events.Event{Tenant: e.TenantOrDefault(), Session: e.Session})]
		ch := changes[ids]
		if ch == nil {
			ch = &change{clean: !failed}
			changes[ids] = ch
		}
		if dup[i] {
			ch.clean = false
			continue
		}
		if _, ok := ids.ids[e.ID]; !ok {
			ids.ids[e.ID] = idEntry{seq: e.Seq, digest: digests[i]}
			ch.grew++
		}
		ch.max = max(ch.max, e.Seq)
	}
	for ids, ch := range changes {
		if ch.clean && ch.max > ids.last {
			ids.last = ch.max
		}
		s.ids.grew(ids, ch.grew)
	}
	if failed {
		// A publish whose acknowledgement was lost may be stored: read
		// the sessions from the log next time (a sole writer too).
		for _, l := range locks {
			l.ids.loaded = false
		}
	}
}
