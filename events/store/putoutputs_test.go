package store

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

// TestAppendPutsOutputsConcurrently: a batch with several inline outputs
// (two of them identical) stores each once, concurrently, replaces every
// one by its content address, and leaves them in the blob cache, where a
// later put of the same output finds them without a look-up.
func TestAppendPutsOutputsConcurrently(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, connectEmbedded(t), suiteConfig())
	sess := uniqueSession("outputs")
	var in []events.Event
	outputs := map[string]string{}
	for i := range 6 {
		call := fmt.Sprintf("c%d", i)
		out := fmt.Sprintf("output %d of a tool\n", i%5) // c0 and c5 share one
		in = append(in, callEvent("", sess, "call-"+call, call), resultEvent("", sess, "res-"+call, call, out))
		outputs[call] = out
	}
	stored, err := s.Append(ctx, in)
	testutil.NoError(t, err)
	for _, e := range stored {
		tr, ok := e.Data.(*events.ToolResult)
		if !ok {
			continue
		}
		testutil.True(t, tr.Output == nil && tr.OutputRef != nil, "%s: output not moved to the blob store", e.ID)
		want := outputs[tr.CallID]
		testutil.Equal(t, tr.OutputRef.Hash, events.HashBytes([]byte(want)))
		testutil.True(t, s.cache.has(tr.OutputRef.Hash), "%s: blob not cached after the put", e.ID)
		got, err := s.GetBlob(ctx, tr.OutputRef.Hash)
		testutil.NoError(t, err)
		testutil.Equal(t, string(got), want)
	}
	// A put of a cached blob is a no-op, even with the bucket gone.
	testutil.NoError(t, s.JS().DeleteObjectStore(ctx, s.cfg.BlobBucket))
	data := []byte(outputs["c1"])
	testutil.NoError(t, s.PutBlob(ctx, events.HashBytes(data), data))
}

// TestPutBlobString: a blob put as a string is stored under its content
// address and read back byte for byte (one larger than the blob cache
// takes, so the read comes from the object store); a wrong address stores
// nothing.
func TestPutBlobString(t *testing.T) {
	ctx := testCtx(t)
	cfg := suiteConfig()
	cfg.BlobCacheBytes = 1 << 20
	s := openStore(t, connectEmbedded(t), cfg)
	data := strings.Repeat("0123456789abcdef\n", 40000) + "\xff" // 680 KB, not UTF-8
	h := events.HashString(data)
	testutil.NoError(t, s.PutBlobString(ctx, h, data))
	testutil.True(t, !s.cache.has(h), "a blob over a quarter of the cache was cached")
	got, err := s.GetBlob(ctx, h)
	testutil.NoError(t, err)
	testutil.True(t, string(got) == data, "blob read back differs")
	wrong := events.HashString("other")
	err = s.PutBlobString(ctx, wrong, data)
	testutil.Error(t, err)
	_, err = s.GetBlob(ctx, wrong)
	testutil.Error(t, err, ErrNotFound)
}

// TestPutBlobRepairsObjectWithoutChunks: the object store's put purges an
// object's chunks when it sees the publish of the object's description
// fail, though the description may be stored all the same (its
// acknowledgement lost as a server went away, as in the cluster test). A
// retried put must store the payload again, not find the description and
// call it stored: every get of it would wait for chunks that never come.
func TestPutBlobRepairsObjectWithoutChunks(t *testing.T) {
	ctx := testCtx(t)
	nc := connectEmbedded(t)
	s := openStore(t, nc, suiteConfig())
	data := []byte("a tool output whose put failed half way\n")
	hash := events.HashBytes(data)
	testutil.NoError(t, s.PutBlob(ctx, hash, data))
	info, err := s.blobs.GetInfo(ctx, hash)
	testutil.NoError(t, err)
	// What the failed put leaves: the description without its chunks.
	testutil.NoError(t, s.blobStream.Purge(ctx, jetstream.WithPurgeSubject(s.chunkSubject(info))))
	whole, err := s.blobWhole(ctx, info)
	testutil.NoError(t, err)
	testutil.True(t, !whole, "an object without chunks counted whole")

	// The writer retries from another process (nothing cached).
	retry := openStore(t, nc, suiteConfig())
	testutil.NoError(t, retry.PutBlob(ctx, hash, data))
	got, err := openStore(t, nc, suiteConfig()).GetBlob(ctx, hash)
	testutil.NoError(t, err)
	testutil.Equal(t, string(got), string(data))
}

// TestOpenBlob: a blob larger than the blob cache takes is streamed from
// the object store (read back byte for byte, in small reads), a small one
// comes whole through GetBlob and is cached, a missing one is ErrNotFound,
// and a stream whose bytes do not hash to its address fails at its end.
func TestOpenBlob(t *testing.T) {
	ctx := testCtx(t)
	cfg := suiteConfig()
	cfg.BlobCacheBytes = 1 << 20
	s := openStore(t, connectEmbedded(t), cfg)
	large := strings.Repeat("0123456789abcdef\n", 40000) + "\xff" // 680 KB
	small := "a small output\n"
	for _, data := range []string{large, small} {
		h := events.HashString(data)
		testutil.NoError(t, s.PutBlobString(ctx, h, data))
		s.cache = newBlobCache(cfg.BlobCacheBytes) // forget the put's caching
		r, err := s.OpenBlob(ctx, h)
		testutil.NoError(t, err)
		_, streamed := r.(*checkedBlob)
		testutil.True(t, streamed == (len(data) > len(small)), "%d bytes: streamed %v", len(data), streamed)
		got, err := io.ReadAll(iotest.OneByteReader(r))
		testutil.NoError(t, err)
		testutil.NoError(t, r.Close())
		testutil.True(t, string(got) == data, "%d bytes: read back differs", len(data))
		testutil.True(t, s.cache.has(h) == !streamed, "%d bytes: cached %v", len(data), s.cache.has(h))
	}
	_, err := s.OpenBlob(ctx, events.HashString("never stored"))
	testutil.Error(t, err, ErrNotFound)
	_, err = s.OpenBlob(ctx, "sha256:nothex")
	testutil.Error(t, err)
	bad := &checkedBlob{r: io.NopCloser(strings.NewReader("tampered")), h: sha256.New(), want: events.HashString("original")}
	_, err = io.ReadAll(bad)
	testutil.True(t, err != nil && strings.Contains(err.Error(), "hashes to"), "a stream that does not hash to its address: %v", err)
}

// TestGetBlobReadsOneChunkWithoutAConsumer: a blob of one chunk is read
// back with gets alone (no JetStream API request beyond the test's own
// account look-ups: the object store's read would create a consumer and
// delete it, two meta-group proposals on a cluster), and blobs of every
// size around the chunk size read back byte for byte, through GetBlob
// and OpenBlob, from a store that did not write them, with the blob
// cache on and off (OpenBlob takes the one-get path whatever the cache
// admits).
func TestGetBlobReadsOneChunkWithoutAConsumer(t *testing.T) {
	ctx := testCtx(t)
	nc := connectEmbedded(t)
	w := openStore(t, nc, suiteConfig())
	const chunk = 128 << 10 // the object store's default chunk size
	apiTotal := func() uint64 {
		info, err := w.JS().AccountInfo(ctx)
		testutil.NoError(t, err)
		return info.API.Total
	}
	for _, n := range []int{0, 1, 4000, chunk - 1, chunk, chunk + 1, 3*chunk + 7} {
		data := []byte(strings.Repeat("0123456789abcdef\n", n/17+1)[:n])
		h := events.HashBytes(data)
		testutil.NoError(t, w.PutBlob(ctx, h, data))
		for _, c := range []struct{ open, noCache bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			open := c.open
			rcfg := suiteConfig()
			if c.noCache {
				rcfg.BlobCacheBytes = -1
			}
			r := openStore(t, nc, rcfg) // an empty cache, or none
			before := apiTotal()
			var got []byte
			var err error
			if open {
				var rc io.ReadCloser
				rc, err = r.OpenBlob(ctx, h)
				testutil.NoError(t, err)
				got, err = io.ReadAll(rc)
				testutil.NoError(t, rc.Close())
			} else {
				got, err = r.GetBlob(ctx, h)
			}
			testutil.NoError(t, err)
			testutil.True(t, bytes.Equal(got, data), "%d bytes (%+v): read back differs", n, c)
			if n > 0 && n <= chunk {
				// The second look-up counts itself.
				testutil.True(t, apiTotal()-before == 1, "%d bytes (%+v): %d API requests, want none", n, c, apiTotal()-before-1)
			}
		}
	}
}
