package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
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
	require_NoError(t, err)
	for _, e := range stored {
		tr, ok := e.Data.(*events.ToolResult)
		if !ok {
			continue
		}
		require_True(t, tr.Output == nil && tr.OutputRef != nil, "%s: output not moved to the blob store", e.ID)
		want := outputs[tr.CallID]
		require_Equal(t, tr.OutputRef.Hash, events.HashBytes([]byte(want)))
		require_True(t, s.cache.has(tr.OutputRef.Hash), "%s: blob not cached after the put", e.ID)
		got, err := s.GetBlob(ctx, tr.OutputRef.Hash)
		require_NoError(t, err)
		require_Equal(t, string(got), want)
	}
	// A put of a cached blob is a no-op, even with the bucket gone.
	require_NoError(t, s.JS().DeleteObjectStore(ctx, s.cfg.BlobBucket))
	data := []byte(outputs["c1"])
	require_NoError(t, s.PutBlob(ctx, events.HashBytes(data), data))
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
	require_NoError(t, s.PutBlobString(ctx, h, data))
	require_True(t, !s.cache.has(h), "a blob over a quarter of the cache was cached")
	got, err := s.GetBlob(ctx, h)
	require_NoError(t, err)
	require_True(t, string(got) == data, "blob read back differs")
	wrong := events.HashString("other")
	err = s.PutBlobString(ctx, wrong, data)
	require_Error(t, err)
	_, err = s.GetBlob(ctx, wrong)
	require_Error(t, err, ErrNotFound)
}
