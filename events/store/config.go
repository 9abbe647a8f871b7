package store

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/jsask"
)

// DefaultBlobBucket is the object store bucket holding tool outputs by
// content address.
const DefaultBlobBucket = "PRUNESCHED_BLOBS"

// Config configures a Store. The zero value is useful: every field has a
// documented default applied by Open.
type Config struct {
	// Replicas is the replication factor of the event stream and the blob
	// bucket. Default 1 (embedded, single server); a cluster uses 3.
	Replicas int
	// Duplicates is the stream's deduplication window: a second publish of
	// the same Nats-Msg-Id within it is acknowledged as a duplicate and not
	// stored. Default 2 minutes (the JetStream default). Facts are
	// deduplicated at any later time too (Append checks the session's
	// stored fact ids); marks and applications, whose ids derive from
	// their causes, only within this window.
	Duplicates time.Duration
	// IDCacheEntries bounds the fact ids Append keeps in memory, whole
	// sessions least recently appended to out first; a session out of the
	// cache is read again from the log at its next append. Default
	// DefaultIDCacheEntries.
	IDCacheEntries int
	// SoleWriter says this Store is the only writer of facts to the
	// stream (the embedded server with no listener: no other client can
	// reach it). Append then trusts its cached fact ids once a session is
	// read, and saves the request per append that checks for other
	// writers' facts. Leave it false whenever another process may append.
	SoleWriter bool
	// BlobBucket is the object store bucket for tool outputs. Default
	// DefaultBlobBucket.
	BlobBucket string
	// Tokens counts tokens when events enter the log. Default a
	// tokens.Counter (o200k_base).
	Tokens events.TokenCounter
	// MaxPending bounds the asynchronous publishes in flight during Append,
	// so a large batch cannot exhaust memory or the server. Default 256.
	MaxPending int
	// PublishTimeout bounds the wait for one publish acknowledgement (and for
	// a free slot when MaxPending publishes are in flight). Default 10s.
	PublishTimeout time.Duration
	// AckWait is how long a Consume handler may take before the server
	// redelivers its message. Default 30s.
	AckWait time.Duration
	// MaxAckPending bounds the messages a Consume consumer has delivered but
	// not yet acknowledged. Default 256. Use 1 for a worker that must see a
	// redelivered message before any later one.
	MaxAckPending int
	// NakDelay is how long the server waits before redelivering a message
	// whose handler failed. Default 1s.
	NakDelay time.Duration
	// ReadBufferBytes bounds the bytes a reader buffers ahead of its caller
	// (ReadSession, ReadAll). It must exceed the largest message. Default
	// 64 MB.
	ReadBufferBytes int
	// Partitions is the number of session partitions of the stream (its
	// subject transform adds partition(Partitions,1,2) as the fifth subject
	// token). It is fixed when the stream is created: zero adopts the
	// existing stream's count (events.DefaultPartitions for a new stream);
	// a different non-zero count for an existing stream is an error.
	Partitions int
	// BlobCacheBytes bounds an in-memory cache of blobs read by GetBlob
	// (least recently used out first). Blobs are content-addressed and
	// checked against their hash before they enter it, so a cached blob is
	// never stale; the cache saves the object store round trips of
	// rendering a bundle at request time. Default 64 MB; negative disables
	// it.
	BlobCacheBytes int64
	// RequestAgain is how long a request for state that a wait polls (a
	// durable consumer's progress, the stream's last sequence, a
	// session's last event) waits for its answer before it is sent again;
	// the first answer to any of the requests is taken. Such a request is
	// answered by the leader of the consumer's or the stream's Raft group,
	// and while the group elects one (start-up, a node lost) nothing
	// answers: without asking again, one lost request held the wait until
	// its whole deadline. A request is sent again only under a context
	// with a deadline, until that deadline: under one without, it is sent
	// once, bounded by the JetStream client's default timeout as before
	// (LastSeqLeader's is bounded by PublishTimeout, and asked again
	// within it). Default DefaultRequestAgain.
	RequestAgain time.Duration
}

// ConnectTimeout bounds opening a NATS connection (nats.Timeout). nats.go's
// default, 2 s, is exceeded on a loaded machine even over loopback (seen as
// "i/o timeout" while the tests ran beside another test run); every
// connection prunesched opens uses this instead.
const ConnectTimeout = 10 * time.Second

// Default values of Config fields.
const (
	DefaultReplicas        = 1
	DefaultDuplicates      = 2 * time.Minute
	DefaultMaxPending      = 256
	DefaultPublishTimeout  = 10 * time.Second
	DefaultAckWait         = 30 * time.Second
	DefaultMaxAckPending   = 256
	DefaultNakDelay        = time.Second
	DefaultReadBufferBytes = 64 << 20
	DefaultBlobCacheBytes  = 64 << 20
	DefaultIDCacheEntries  = 1 << 18
	DefaultRequestAgain    = jsask.DefaultAgain
)

func (c *Config) setDefaults() {
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.Duplicates == 0 {
		c.Duplicates = DefaultDuplicates
	}
	if c.BlobBucket == "" {
		c.BlobBucket = DefaultBlobBucket
	}
	if c.IDCacheEntries == 0 {
		c.IDCacheEntries = DefaultIDCacheEntries
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = DefaultPublishTimeout
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = DefaultMaxAckPending
	}
	if c.NakDelay == 0 {
		c.NakDelay = DefaultNakDelay
	}
	if c.ReadBufferBytes == 0 {
		c.ReadBufferBytes = DefaultReadBufferBytes
	}
	if c.BlobCacheBytes == 0 {
		c.BlobCacheBytes = DefaultBlobCacheBytes
	}
	if c.RequestAgain == 0 {
		c.RequestAgain = DefaultRequestAgain
	}
}

var bucketRe = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Validate reports every invalid field. Open calls it after applying
// defaults.
func (c Config) Validate() error {
	var errs []error
	if c.Replicas < 1 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("replicas: %d out of range 1-5", c.Replicas))
	}
	if c.Duplicates < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("duplicates: window %s shorter than 100ms", c.Duplicates))
	}
	if !bucketRe.MatchString(c.BlobBucket) {
		errs = append(errs, fmt.Errorf("blob bucket: invalid name %q (letters, digits, '_' or '-')", c.BlobBucket))
	}
	if c.IDCacheEntries < 1 {
		errs = append(errs, fmt.Errorf("id cache entries: %d, want at least 1", c.IDCacheEntries))
	}
	if c.MaxPending < 1 {
		errs = append(errs, fmt.Errorf("max pending: %d, want at least 1", c.MaxPending))
	}
	if c.PublishTimeout <= 0 {
		errs = append(errs, fmt.Errorf("publish timeout: %s, want positive", c.PublishTimeout))
	}
	if c.AckWait < time.Second {
		errs = append(errs, fmt.Errorf("ack wait: %s, want at least 1s", c.AckWait))
	}
	if c.MaxAckPending < 1 {
		errs = append(errs, fmt.Errorf("max ack pending: %d, want at least 1", c.MaxAckPending))
	}
	if c.NakDelay < 0 {
		errs = append(errs, fmt.Errorf("nak delay: negative (%s)", c.NakDelay))
	}
	if c.Partitions < 0 || c.Partitions > events.MaxPartitions {
		errs = append(errs, fmt.Errorf("partitions: %d out of range 1-%d", c.Partitions, events.MaxPartitions))
	}
	if c.RequestAgain < 0 {
		errs = append(errs, fmt.Errorf("request again: negative (%s)", c.RequestAgain))
	}
	if c.ReadBufferBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("read buffer bytes: %d, want at least 1 MB", c.ReadBufferBytes))
	}
	if len(errs) > 0 {
		return fmt.Errorf("store config: %w", errors.Join(errs...))
	}
	return nil
}
