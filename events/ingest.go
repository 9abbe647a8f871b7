package events

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"unsafe"
)

// HashBytes returns the content address of b.
func HashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return address(sum[:])
}

// HashSum returns the content address of what h, a sha256 hash (from
// sha256.New), was fed: HashBytes of the same bytes, for content hashed
// as it streams by.
func HashSum(h hash.Hash) string { return address(h.Sum(nil)) }

// address is the content address of a sha256 sum: "sha256:<hex>".
func address(sum []byte) string { return "sha256:" + hex.EncodeToString(sum) }

// HashString returns the content address of s (HashBytes of its bytes)
// without copying s: a tool output of many megabytes is hashed where it
// lies (sha256 reads the bytes it is given and keeps none of them). It
// copied s through a 64 KiB buffer before, which also put 64 KiB on the
// stack of every new goroutine that hashed an output (the proxy's
// request path starts one per request) and made it grow.
func HashString(s string) string {
	return HashBytes(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// BlobPutter stores a payload under its content address. Putting a hash that
// is already stored must be a cheap no-op.
type BlobPutter interface {
	PutBlob(ctx context.Context, hash string, data []byte) error
}

// StringBlobPutter is a BlobPutter that stores a payload held as a string
// without copying it whole (a tool output of many megabytes is streamed to
// the store). Prepare uses it when the BlobPutter has it.
type StringBlobPutter interface {
	PutBlobString(ctx context.Context, hash string, data string) error
}

// TokenCounter counts tokens in text.
type TokenCounter interface {
	Count(s string) int
}

// ContentCounter is a TokenCounter that can count a payload known by its
// content address (hash = HashBytes of s), so it may remember the counts of
// payloads it has seen: tool outputs repeat (re-read files, re-run tests)
// and tokenizing is the costliest step of preparing an event.
type ContentCounter interface {
	CountContent(hash, s string) int
}

// countContent counts s, whose content address is hash, by content when tc
// can.
func countContent(tc TokenCounter, hash, s string) int {
	if cc, ok := tc.(ContentCounter); ok {
		return cc.CountContent(hash, s)
	}
	return tc.Count(s)
}

// Prepare turns an event in input form into its stored form: an inline tool
// output moves to the blob store and is replaced by its content address, and
// token counts are filled in once, here, so nothing downstream tokenizes
// again. Events already in stored form are returned unchanged.
func Prepare(ctx context.Context, e Event, blobs BlobPutter, tc TokenCounter) (Event, error) {
	switch p := e.Data.(type) {
	case *Message:
		if p.Tokens == 0 && p.Text != "" {
			cp := *p
			cp.Tokens = tc.Count(p.Text)
			e.Data = &cp
		}
	case *ToolCall:
		if p.InputTokens == 0 && len(p.Input) > 0 {
			cp := *p
			cp.InputTokens = tc.Count(string(p.Input))
			e.Data = &cp
		}
	case *ToolResult:
		if p.Output != nil {
			cp := *p
			out := *p.Output
			h, err := putOutput(ctx, blobs, out)
			if err != nil {
				return e, fmt.Errorf("store output of %s: %w", p.Item, err)
			}
			cp.OutputRef = &ContentRef{Hash: h, Bytes: len(out), Tokens: countContent(tc, h, out)}
			cp.Output = nil
			e.Data = &cp
		}
	}
	return e, nil
}

// putOutput stores a tool output under its content address and returns
// the address. A StringBlobPutter gets the string itself, so the output is
// never copied whole; another BlobPutter gets a copy as bytes.
func putOutput(ctx context.Context, blobs BlobPutter, out string) (string, error) {
	h := HashString(out)
	if sp, ok := blobs.(StringBlobPutter); ok {
		return h, sp.PutBlobString(ctx, h, out)
	}
	return h, blobs.PutBlob(ctx, h, []byte(out))
}

// PrepareTextBytes is the size of the text Prepare tokenizes in e: a
// message's text or a call's input without a count yet, an inline tool
// output. It lets a caller judge a batch's tokenizing work before
// preparing it (the conditions are Prepare's, kept beside it).
func PrepareTextBytes(e Event) int {
	switch p := e.Data.(type) {
	case *Message:
		if p.Tokens == 0 {
			return len(p.Text)
		}
	case *ToolCall:
		if p.InputTokens == 0 {
			return len(p.Input)
		}
	case *ToolResult:
		if p.Output != nil {
			return len(*p.Output)
		}
	}
	return 0
}
