package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	gohash "hash"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/tokens"
)

// ErrNotFound is returned (wrapped) when a blob or other named thing does
// not exist. Match it with errors.Is.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned (wrapped) by AppendGuarded when the session's last
// fact is not the one the caller expected (events.ErrConflict).
var ErrConflict = events.ErrConflict

// ErrTooLarge is returned (wrapped) when an encoded event is over the
// largest message the NATS server accepts. The API answers it with 413.
// Tool outputs do not count: they go to the blob store whatever their size.
var ErrTooLarge = errors.New("event too large")

// EventError says which event of a batch was rejected and why
// (events.EventError).
type EventError = events.EventError

// Store is prunesched's log: the event stream and the blob bucket on one
// JetStream connection. It is safe for concurrent use. It does not own the
// connection: the caller closes it after the Store is no longer used.
type Store struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	blobs  jetstream.ObjectStore
	// blobStream is the stream under blobs (PutBlob counts an object's
	// chunks there).
	blobStream jetstream.Stream
	// ids caches each recently appended session's fact ids (see Append).
	ids *idCache
	cfg Config
	log *slog.Logger

	// putting serialises concurrent puts of one hash in this process, so an
	// identical output arriving twice at once is still stored once.
	mu      sync.Mutex
	putting map[string]*hashLock

	// cache holds recently read blobs (nil when disabled).
	cache *blobCache

	// shapesKV is the shapes bucket once looked up (ClaimPartitionShape).
	shapesMu sync.Mutex
	shapesKV jetstream.KeyValue

	// beforePut, when set (tests), runs after putBlob looked a blob up
	// absent and before it stores it.
	beforePut func()

	// batchR1 lets AppendChain batch on a single-replica stream too
	// (tests: the embedded server is one node).
	batchR1 bool
}

// Open creates or updates the event stream and the blob bucket and returns a
// Store using them. Calling it again with the same Config is harmless; a
// changed Replicas or Duplicates updates the existing stream. When the
// stream and bucket already exist as configured, Open only looks them up,
// so an identity without the right to update streams (the embedded
// server's service user, see ServicePermissions) can open a store an admin
// identity created.
func Open(ctx context.Context, nc *nats.Conn, cfg Config, logger *slog.Logger) (*Store, error) {
	if nc == nil {
		return nil, errors.New("open store: nil connection")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Tokens == nil {
		cfg.Tokens = tokens.New()
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(cfg.MaxPending),
		jetstream.WithPublishAsyncTimeout(cfg.PublishTimeout),
	)
	if err != nil {
		return nil, fmt.Errorf("open store: jetstream: %w", err)
	}
	if err := adoptPartitions(ctx, js, &cfg, logger); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	scfg := StreamConfig(cfg)
	stream, err := ensureStream(ctx, js, scfg)
	if err != nil {
		return nil, fmt.Errorf("open store: create or update stream %s: %w", scfg.Name, err)
	}
	blobs, err := ensureObjectStore(ctx, js, jetstream.ObjectStoreConfig{
		Bucket:      cfg.BlobBucket,
		Description: "prunesched tool outputs by content address (sha256)",
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("open store: create or update blob bucket %s: %w", cfg.BlobBucket, err)
	}
	blobStream, err := js.Stream(ctx, objectStream(cfg.BlobBucket))
	if err != nil {
		return nil, fmt.Errorf("open store: blob bucket %s: look up its stream: %w", cfg.BlobBucket, err)
	}
	logger.Debug("store opened",
		slog.String("stream", scfg.Name),
		slog.String("blob_bucket", cfg.BlobBucket),
		slog.Int("replicas", cfg.Replicas),
		slog.Int("partitions", cfg.Partitions),
		slog.Duration("duplicates", cfg.Duplicates))
	return &Store{
		nc: nc, js: js, stream: stream, blobs: blobs, blobStream: blobStream, cfg: cfg, log: logger,
		ids:     newIDCache(cfg.IDCacheEntries),
		putting: map[string]*hashLock{},
		cache:   newBlobCache(cfg.BlobCacheBytes),
	}, nil
}

// StreamConfig is the event stream's configuration for cfg (with defaults
// applied by Open): file storage, subjects ps.>, a subject transform that
// appends the session's partition (events.SubjectTransform with
// cfg.Partitions, default events.DefaultPartitions), deletes and purges
// denied so the log stays append-only, DiscardNew so a limit rejects new
// writes instead of silently dropping old events, and direct gets allowed
// for cheap last-message lookups. It is exported so deployment tooling can
// create the stream the same way.
func StreamConfig(cfg Config) jetstream.StreamConfig {
	cfg.setDefaults()
	n := cfg.Partitions
	if n == 0 {
		n = events.DefaultPartitions
	}
	src, dst := events.SubjectTransform(n)
	return jetstream.StreamConfig{
		Name:        events.StreamName,
		Description: "prunesched session events (append-only)",
		Subjects:    []string{events.SubjectPrefix + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		MaxAge:      0,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		Duplicates:  cfg.Duplicates,
		DenyDelete:  true,
		DenyPurge:   true,
		// No direct gets: any replica answers those, and a follower that
		// lags behind the leader would hide an event already acknowledged
		// (the scheduler then decided without a mark the eligibility
		// worker had stored, once in four cluster failovers). Reads go to
		// the stream leader.
		AllowDirect: false,
		// Atomic batches (JetStream 2.12+): a chain of a session's
		// events guarded once (AppendChain). Not compared by
		// streamMatches, so a stream created before keeps its
		// configuration (and AppendChain publishes one by one there).
		AllowAtomicPublish: true,
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source:      src,
			Destination: dst,
		},
	}
}

// ensureStream returns the stream, creating it, or updating it only when
// its configuration differs from want in a field prunesched sets.
func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) (jetstream.Stream, error) {
	st, err := js.Stream(ctx, want.Name)
	if err == nil && streamMatches(st.CachedInfo().Config, want) {
		return st, nil
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return js.CreateStream(ctx, want)
	}
	if err != nil {
		return nil, err
	}
	st, err = js.UpdateStream(ctx, want)
	if err != nil {
		// The service identity may not update streams: the server then
		// answers nothing and the request times out.
		return nil, fmt.Errorf("its configuration differs and updating it failed (it needs an identity allowed to update streams, see docs/security.md): %w", err)
	}
	return st, nil
}

// streamMatches compares the fields StreamConfig sets.
func streamMatches(have, want jetstream.StreamConfig) bool {
	sameTransform := (have.SubjectTransform == nil) == (want.SubjectTransform == nil) &&
		(have.SubjectTransform == nil || *have.SubjectTransform == *want.SubjectTransform)
	return sameTransform && slices.Equal(have.Subjects, want.Subjects) &&
		have.Description == want.Description && have.Retention == want.Retention &&
		have.Discard == want.Discard && have.MaxMsgs == want.MaxMsgs && have.MaxBytes == want.MaxBytes &&
		have.MaxAge == want.MaxAge && have.Storage == want.Storage && have.Replicas == want.Replicas &&
		have.Duplicates == want.Duplicates && have.DenyDelete == want.DenyDelete &&
		have.DenyPurge == want.DenyPurge && have.AllowDirect == want.AllowDirect
}

// ensureObjectStore returns the bucket, creating it, or updating it only
// when its replica count differs.
func ensureObjectStore(ctx context.Context, js jetstream.JetStream, want jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	obs, err := js.ObjectStore(ctx, want.Bucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		return js.CreateObjectStore(ctx, want)
	case err != nil:
		return nil, err
	}
	if st, err := obs.Status(ctx); err == nil && st.Replicas() == want.Replicas {
		return obs, nil
	}
	return js.CreateOrUpdateObjectStore(ctx, want)
}

// adoptPartitions settles cfg.Partitions against the stream as it exists:
// zero adopts the stream's count, a different count is an error (moving a
// session to another partition while workers own the old one would let two
// workers judge it). A new stream gets cfg.Partitions or the default.
func adoptPartitions(ctx context.Context, js jetstream.JetStream, cfg *Config, logger *slog.Logger) error {
	st, err := js.Stream(ctx, events.StreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if cfg.Partitions == 0 {
			cfg.Partitions = events.DefaultPartitions
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up stream %s: %w", events.StreamName, err)
	}
	tr := st.CachedInfo().Config.SubjectTransform
	if tr == nil {
		if cfg.Partitions == 0 {
			cfg.Partitions = events.DefaultPartitions
		}
		logger.Warn("stream has no partition transform; adding it: events stored before stay unpartitioned and are not redelivered to workers",
			slog.String("stream", events.StreamName), slog.Int("partitions", cfg.Partitions))
		return nil
	}
	n, ok := events.PartitionsOfTransform(tr.Destination)
	if !ok {
		return fmt.Errorf("stream %s: unexpected subject transform %s -> %s", events.StreamName, tr.Source, tr.Destination)
	}
	if cfg.Partitions != 0 && cfg.Partitions != n {
		return fmt.Errorf("stream %s has %d partitions, configured %d: the count is fixed when the stream is created", events.StreamName, n, cfg.Partitions)
	}
	cfg.Partitions = n
	return nil
}

// Partitions returns the stream's partition count.
func (s *Store) Partitions() int { return s.cfg.Partitions }

// PartitionOf returns the partition a session's events are stored in.
func (s *Store) PartitionOf(tenant, session string) int {
	return events.Partition(tenant, session, s.cfg.Partitions)
}

// JS returns the JetStream handle for advanced use (tests, admin tools).
// Writing to the event stream through it bypasses validation.
func (s *Store) JS() jetstream.JetStream { return s.js }

// PutBlob stores data under its content address hash. If the object already
// exists it does nothing, so identical outputs are stored once. The hash
// must be events.HashBytes(data); a mismatch is an error and nothing is
// stored. It implements events.BlobPutter.
func (s *Store) PutBlob(ctx context.Context, hash string, data []byte) error {
	if !events.ValidHash(hash) {
		return fmt.Errorf("put blob %q: invalid content address", hash)
	}
	if got := events.HashBytes(data); got != hash {
		return fmt.Errorf("put blob %s: data hashes to %s", hash, got)
	}
	return s.putBlob(ctx, hash, len(data), func() io.Reader { return bytes.NewReader(data) }, func() { cachePut(s.cache, hash, data) })
}

// PutBlobString is PutBlob for data held as a string: the data is streamed
// to the object store in its chunks and never copied whole (only a blob
// small enough for the blob cache is copied into it), so storing a tool
// output of many megabytes costs a chunk of memory, not another copy. It
// implements events.StringBlobPutter.
func (s *Store) PutBlobString(ctx context.Context, hash string, data string) error {
	if !events.ValidHash(hash) {
		return fmt.Errorf("put blob %q: invalid content address", hash)
	}
	if got := events.HashString(data); got != hash {
		return fmt.Errorf("put blob %s: data hashes to %s", hash, got)
	}
	return s.putBlob(ctx, hash, len(data), func() io.Reader { return strings.NewReader(data) }, func() { cachePut(s.cache, hash, data) })
}

// putBlob stores the n bytes that open reads under hash unless they are
// stored already, and caches them (cache) once known stored.
func (s *Store) putBlob(ctx context.Context, hash string, n int, open func() io.Reader, cache func()) error {
	if s.cache.has(hash) {
		return nil // stored: the cache holds only stored blobs
	}
	defer s.lockHash(hash)()
	// Ask the leader, not a replica behind it (a direct get, which could
	// miss an output another proxy just stored). Asking it first costs
	// one request for a new blob, where a direct get first cost two (the
	// direct get's miss, then the leader).
	info, metaSeq, err := s.blobInfoLeader(ctx, hash)
	switch {
	case err == nil:
		whole, err := s.blobWhole(ctx, info)
		if err != nil {
			return fmt.Errorf("put blob %s: %w", hash, err)
		}
		if whole {
			cache()
			return nil
		}
		// A put that failed half way left the object's description
		// without its chunks: store it again (the put replaces the
		// description).
		s.log.Warn("blob stored without its chunks (an earlier put failed); storing it again", slog.String("hash", hash))
	case !errors.Is(err, jetstream.ErrObjectNotFound):
		return fmt.Errorf("put blob %s: look up: %w", hash, err)
	}
	if s.beforePut != nil {
		s.beforePut()
	}
	if err := s.putObject(ctx, hash, n, open(), metaSeq); err != nil {
		return fmt.Errorf("put blob %s (%d bytes): %w", hash, n, err)
	}
	// Rendering usually follows soon: keep the new output at hand.
	cache()
	return nil
}

// blobChunkSize is the size of an object's chunks: the object store's
// default, so objects stored before read the same way.
const blobChunkSize = 128 << 10

// blobChunksInFlight bounds the chunks of one put published and not yet
// acknowledged (a megabyte in memory).
const blobChunksInFlight = 8

// putObject stores the n bytes r reads as object name, in the object store's
// format (nats.go's: the chunks on a subject of their own, then the
// description on the object's meta subject), guarded by JetStream: the
// description is published expecting metaSeq as the last sequence on the
// meta subject (0: none), the one putBlob looked up. The object store's
// own put purges the chunks of the object it replaces, which the service
// identity may not do (its request then goes unanswered until ctx ends):
// two proxies storing the same output at once, both having looked it up
// absent, made the second wait that long. Here the second's description
// is refused by the stream instead, and the put settles at once: the
// description that won names the same digest and size (the name is the
// content's address), so the output is stored; the loser's chunks stay
// unreferenced (one copy of the output, for a race that rare; purging
// them would need the right the service lacks). A description that won
// without its chunks (a put that failed half way) is replaced in turn.
func (s *Store) putObject(ctx context.Context, name string, n int, r io.Reader, metaSeq uint64) error {
	id := nuid.Next()
	chunkSubj := s.chunkSubject(&jetstream.ObjectInfo{NUID: id})
	h := sha256.New()
	var size uint64
	var chunks uint32
	var pending []jetstream.PubAckFuture
	settle := func(keep int) error {
		for len(pending) > keep {
			select {
			case <-pending[0].Ok():
			case err := <-pending[0].Err():
				return fmt.Errorf("store chunk: %w", err)
			case <-ctx.Done():
				return fmt.Errorf("store chunk: %w", ctx.Err())
			}
			pending = pending[1:]
		}
		return nil
	}
	for size < uint64(n) {
		// A buffer per chunk: a publish keeps its message to retry it.
		buf := make([]byte, min(blobChunkSize, uint64(n)-size))
		if _, err := io.ReadFull(r, buf); err != nil {
			return fmt.Errorf("read chunk %d: %w", chunks, err)
		}
		h.Write(buf)
		f, err := s.js.PublishMsgAsync(&nats.Msg{Subject: chunkSubj, Data: buf})
		if err != nil {
			return fmt.Errorf("store chunk %d: %w", chunks, err)
		}
		pending = append(pending, f)
		size += uint64(len(buf))
		chunks++
		if err := settle(blobChunksInFlight - 1); err != nil {
			return err
		}
	}
	if err := settle(0); err != nil {
		return err
	}
	info := jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: blobChunkSize}},
		Bucket:     s.cfg.BlobBucket, NUID: id, Size: size, Chunks: chunks,
		Digest: jetstream.GetObjectDigestValue(h),
	}
	meta, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	// Few rounds: each lost round means another put's description was
	// stored in between, and only one without its chunks is replaced.
	for range 3 {
		m := nats.NewMsg(s.metaSubject(name))
		m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
		m.Data = meta
		_, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(metaSeq))
		if err == nil {
			return nil
		}
		if !isWrongLastSequence(err) {
			return fmt.Errorf("store description: %w", err)
		}
		// Another put stored a description first.
		other, seq, err := s.blobInfoLeader(ctx, name)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			metaSeq = seq // deleted since: store over it
			continue
		}
		if err != nil {
			return fmt.Errorf("store description: another put won: %w", err)
		}
		if other.Digest != info.Digest || other.Size != info.Size {
			return fmt.Errorf("store description: another put stored %s (%d bytes) under this name", other.Digest, other.Size)
		}
		whole, err := s.blobWhole(ctx, other)
		if err != nil {
			return fmt.Errorf("store description: another put won: %w", err)
		}
		if whole {
			return nil
		}
		metaSeq = seq
	}
	return fmt.Errorf("store description: other puts kept winning")
}

// metaSubject is the subject of the description of object name in the
// object store's stream (nats.go's object store format).
func (s *Store) metaSubject(name string) string {
	return "$O." + s.cfg.BlobBucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
}

// blobInfoLeader reads an object's description from the object stream's
// leader (the JetStream API's message get on its meta subject), which
// holds every acknowledged put, with the description's sequence in that
// stream (what a put replacing it expects; 0 when there is none). A
// missing or deleted object is jetstream.ErrObjectNotFound.
func (s *Store) blobInfoLeader(ctx context.Context, hash string) (*jetstream.ObjectInfo, uint64, error) {
	seq, data, err := s.lastAtLeader(ctx, objectStream(s.cfg.BlobBucket), s.metaSubject(hash), true)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, jetstream.ErrObjectNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("look up blob %s: %w", hash, err)
	}
	var info jetstream.ObjectInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, 0, fmt.Errorf("look up blob %s at the leader: %w", hash, err)
	}
	if info.Deleted {
		return nil, seq, jetstream.ErrObjectNotFound
	}
	return &info, seq, nil
}

// objectStream is the name of the stream under object store bucket.
func objectStream(bucket string) string { return "OBJ_" + bucket }

// blobWhole reports whether every chunk of the object info describes is
// stored. The object store's put publishes the chunks, then the
// description, and purges the chunks when it sees the description's
// publish fail; when the description was stored all the same (the
// acknowledgement was lost as a server went away) the object is left
// without its payload, and a get waits for chunks that never come. The
// count is read from the stream leader.
func (s *Store) blobWhole(ctx context.Context, info *jetstream.ObjectInfo) (bool, error) {
	if info.Size == 0 || info.Chunks == 0 {
		return true, nil
	}
	subj := s.chunkSubject(info)
	si, err := s.blobStream.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return false, fmt.Errorf("count chunks: %w", err)
	}
	return si.State.Subjects[subj] >= uint64(info.Chunks), nil
}

// GetBlob returns the payload stored under hash. A missing blob is an error
// wrapping ErrNotFound. The payload is checked against its hash.
func (s *Store) GetBlob(ctx context.Context, hash string) ([]byte, error) {
	if !events.ValidHash(hash) {
		return nil, fmt.Errorf("get blob %q: invalid content address", hash)
	}
	return s.getBlob(ctx, hash, nil)
}

// getBlob is GetBlob for a valid hash, with the object's description
// when the caller read it already (nil: read here).
func (s *Store) getBlob(ctx context.Context, hash string, info *jetstream.ObjectInfo) ([]byte, error) {
	if data, ok := s.cache.get(hash); ok {
		return data, nil
	}
	data, err := s.fetchBlob(ctx, hash, info)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("get blob %s: %w", hash, ErrNotFound)
		}
		return nil, fmt.Errorf("get blob %s: %w", hash, err)
	}
	if got := events.HashBytes(data); got != hash {
		return nil, fmt.Errorf("get blob %s: stored data hashes to %s", hash, got)
	}
	s.cache.put(hash, data)
	return data, nil
}

// chunkSubject is the subject of the object's chunks in the object
// store's stream (nats.go's object store format).
func (s *Store) chunkSubject(info *jetstream.ObjectInfo) string {
	return "$O." + s.cfg.BlobBucket + ".C." + info.NUID
}

// fetchBlob reads the payload stored under hash from the object store.
// An object of one chunk (a tool output under the object store's chunk
// size, 128 KiB: nearly all of them) is read with one get of its chunk's
// subject after its description (info, or read here). The object store's
// own read creates a consumer for each object and deletes it after, which
// on a cluster is two proposals of the meta group that every node applies:
// the eligibility workers read each new output once, and those consumers
// were most of a fleet's consumer changes. An object of more chunks, and a
// chunk the get does not find (a replica behind the one that answered
// the description), are read the object store's way. The caller checks
// the payload against its hash.
func (s *Store) fetchBlob(ctx context.Context, hash string, info *jetstream.ObjectInfo) ([]byte, error) {
	if info == nil {
		var err error
		if info, err = s.blobs.GetInfo(ctx, hash); err != nil {
			return nil, err
		}
	}
	if oneChunk(info) {
		m, err := s.blobStream.GetLastMsgForSubject(ctx, s.chunkSubject(info))
		switch {
		case err == nil && uint64(len(m.Data)) == info.Size:
			return m.Data, nil
		case err != nil && !errors.Is(err, jetstream.ErrMsgNotFound):
			return nil, fmt.Errorf("read chunk: %w", err)
		}
	}
	return s.blobs.GetBytes(ctx, hash)
}

// oneChunk reports whether the object info describes is stored in one
// chunk of its own (no link): fetchBlob reads such an object with one
// get, and OpenBlob reads it whole that way too (a chunk is at most the
// object store's chunk size, 128 KiB), whatever the blob cache admits.
func oneChunk(info *jetstream.ObjectInfo) bool {
	return info.Chunks == 1 && info.NUID != "" && (info.Opts == nil || info.Opts.Link == nil)
}

// OpenBlob returns the payload stored under hash as a stream: a large
// blob is read from the object store a chunk at a time, never held whole
// (span references hash a stored output's lines this way). A blob the
// cache holds, one small enough for it, and one of a single chunk (read
// with one get, as GetBlob reads it, even with the cache disabled) are
// read whole through GetBlob (and cached where the cache admits them). A
// missing blob is an error wrapping
// ErrNotFound. The payload is checked against its hash as it is read: the
// Read that reaches its end returns an error when it differs.
func (s *Store) OpenBlob(ctx context.Context, hash string) (io.ReadCloser, error) {
	if !events.ValidHash(hash) {
		return nil, fmt.Errorf("open blob %q: invalid content address", hash)
	}
	var info *jetstream.ObjectInfo
	if !s.cache.has(hash) {
		var err error
		info, err = s.blobs.GetInfo(ctx, hash)
		if err != nil {
			if errors.Is(err, jetstream.ErrObjectNotFound) {
				return nil, fmt.Errorf("open blob %s: %w", hash, ErrNotFound)
			}
			return nil, fmt.Errorf("open blob %s: %w", hash, err)
		}
		if !s.cache.admits(int64(info.Size)) && !oneChunk(info) {
			r, err := s.blobs.Get(ctx, hash)
			if err != nil {
				if errors.Is(err, jetstream.ErrObjectNotFound) {
					return nil, fmt.Errorf("open blob %s: %w", hash, ErrNotFound)
				}
				return nil, fmt.Errorf("open blob %s: %w", hash, err)
			}
			return &checkedBlob{r: r, h: sha256.New(), want: hash}, nil
		}
	}
	data, err := s.getBlob(ctx, hash, info)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// checkedBlob reads a blob from the object store and checks it against
// its content address at its end.
type checkedBlob struct {
	r    io.ReadCloser
	h    gohash.Hash
	want string
}

func (b *checkedBlob) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.h.Write(p[:n])
	if err == io.EOF {
		if got := events.HashSum(b.h); got != b.want {
			return n, fmt.Errorf("read blob %s: stored data hashes to %s", b.want, got)
		}
	} else if err != nil {
		err = fmt.Errorf("read blob %s: %w", b.want, err)
	}
	return n, err
}

func (b *checkedBlob) Close() error { return b.r.Close() }

// lockHash serialises work on one hash within this process and returns
// the unlock function. Entries are reference-counted and removed when the
// last holder unlocks.
func (s *Store) lockHash(hash string) (unlock func()) {
	s.mu.Lock()
	l, ok := s.putting[hash]
	if !ok {
		l = &hashLock{}
		s.putting[hash] = l
	}
	l.refs++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(s.putting, hash)
		}
		s.mu.Unlock()
	}
}

type hashLock struct {
	mu   sync.Mutex
	refs int
}

// Tokens returns the store's token counter (Config.Tokens): a writer that
// counts an event's tokens before appending it (the proxy deciding in
// memory) uses the same counter, so its counts are the ones Append would
// fill and the counts it remembers by content are shared.
func (s *Store) Tokens() events.TokenCounter { return s.cfg.Tokens }
