package projections

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// wordCounter is a deterministic stand-in tokenizer: one token per
// whitespace-separated word. It counts its calls.
type wordCounter struct {
	mu    sync.Mutex
	calls int
}

func (c *wordCounter) Count(s string) int {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return len(strings.Fields(s))
}

func (c *wordCounter) Calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// fixture is the hand-built golden session in stored form.
type fixture struct {
	events []events.Event
	blobs  *store.MemBlobs
	tc     *wordCounter
}

func loadFixture(t testing.TB) fixture {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "session.jsonl"))
	testutil.NoError(t, err)
	defer f.Close()
	raw, err := events.DecodeJSONL(f, "session.jsonl")
	testutil.NoError(t, err)
	fx := fixture{blobs: store.NewMemBlobs(), tc: &wordCounter{}}
	for _, e := range raw {
		p, err := events.Prepare(context.Background(), e, fx.blobs, fx.tc)
		testutil.NoError(t, err)
		fx.events = append(fx.events, p)
	}
	return fx
}

func feed(evs []events.Event) *Session {
	s := NewSession("", "golden")
	for _, e := range evs {
		s.Observe(e)
	}
	return s
}

// renderAll renders every view of a session, keyed by golden file suffix.
func renderAll(t testing.TB, s *Session, blobs BlobGetter, tc events.TokenCounter) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	b := s.Bundle()
	out := map[string][]byte{}
	var err error
	out["anthropic.json"], err = RenderAnthropic(ctx, b, blobs, tc)
	testutil.NoError(t, err)
	out["openai.json"], err = RenderOpenAI(ctx, b, blobs, tc)
	testutil.NoError(t, err)
	out["txt"], err = RenderText(ctx, b, blobs, tc)
	testutil.NoError(t, err)
	out["decisions.json"], err = marshalJSON(s.Decisions())
	testutil.NoError(t, err)
	out["items.json"], err = marshalJSON(s.Items())
	testutil.NoError(t, err)
	st, err := s.Stats(ctx, blobs, tc)
	testutil.NoError(t, err)
	out["stats.json"], err = marshalJSON(st)
	testutil.NoError(t, err)
	return out
}

// goldenCompare compares got with testdata/name, rewriting it with
// -update. JSON is stored indented for review; the comparison is on the
// indented form, which keeps key order.
func goldenCompare(t *testing.T, name string, got []byte) {
	t.Helper()
	if strings.HasSuffix(name, ".json") {
		var buf bytes.Buffer
		testutil.NoError(t, json.Indent(&buf, got, "", "  "))
		buf.WriteByte('\n')
		got = buf.Bytes()
	}
	path := filepath.Join("testdata", name)
	if *update {
		testutil.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	testutil.NoError(t, err)
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden (run go test -update to accept):\n--- got ---\n%s", name, got)
	}
}
