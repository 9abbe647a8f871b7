// Package tokens counts tokens with a real tokenizer. Tokenizing is slow, so
// prunesched counts each payload once, when it enters the log, and stores the
// count beside the content address; the render path only adds stored counts.
package tokens

import (
	"fmt"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// Name identifies the tokenizer in reports.
const Name = "o200k_base (github.com/tiktoken-go/tokenizer v0.10.0)"

// Counter counts tokens in text. It is safe for concurrent use.
type Counter struct {
	once  sync.Once
	codec tokenizer.Codec
	err   error
}

// New returns a Counter using the o200k_base encoding. The vocabulary is
// embedded in the binary; it is loaded on first use.
func New() *Counter { return &Counter{} }

// Name returns the tokenizer's name for reports.
func (c *Counter) Name() string { return Name }

// Count returns the number of tokens in s. Invalid UTF-8 is counted with
// replacement characters rather than failing: a tool output is not ours to
// reject.
func (c *Counter) Count(s string) int {
	c.once.Do(func() {
		c.codec, c.err = tokenizer.Get(tokenizer.O200kBase)
	})
	if c.err != nil || s == "" {
		return 0
	}
	n, err := c.codec.Count(s)
	if err != nil {
		// Fall back to a byte-based estimate rather than dropping the item.
		return (len(s) + 3) / 4
	}
	return n
}

// Check loads the vocabulary and reports an error if it cannot.
func (c *Counter) Check() error {
	c.Count("x")
	if c.err != nil {
		return fmt.Errorf("load tokenizer %s: %w", Name, c.err)
	}
	return nil
}
