package projections

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/placeholder"
)

// stripBundle drops what differs between two sessions holding the same
// state (caches, generations), for comparison.
func stripBundle(b Bundle) Bundle {
	items := make([]BundleItem, len(b.Items))
	copy(items, b.Items)
	for i := range items {
		items[i].slot, items[i].gen = nil, 0
	}
	b.Items, b.rc, b.tokens = items, nil, nil
	return b
}

type renderFunc func(context.Context, Bundle, BlobGetter, events.TokenCounter) ([]byte, error)

var (
	renderers         = map[string]renderFunc{"anthropic": RenderAnthropic, "openai": RenderOpenAI, "text": RenderText}
	reference         = map[string]renderFunc{"anthropic": refRenderAnthropic, "openai": refRenderOpenAI, "text": refRenderText}
	snapshotRenderers = map[string]func(Snapshot, context.Context, BlobGetter, events.TokenCounter) ([]byte, error){
		"anthropic": Snapshot.RenderAnthropic, "openai": Snapshot.RenderOpenAI, "text": Snapshot.RenderText,
	}
)

func snapshotOrErr(r func(Snapshot, context.Context, BlobGetter, events.TokenCounter) ([]byte, error), sn Snapshot, blobs BlobGetter, tc events.TokenCounter) string {
	out, err := r(sn, context.Background(), blobs, tc)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(out)
}

// renderOrErr renders and folds an error into the output, so that errors
// are compared too.
func renderOrErr(r renderFunc, b Bundle, blobs BlobGetter, tc events.TokenCounter) string {
	out, err := r(context.Background(), b, blobs, tc)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(out)
}

// checkIncremental observes evs one by one into one session and, after
// every event, checks its bundle and every rendering (twice: the second
// from the cache) against a fresh session fed the same prefix and against
// the reference renderers; it also re-renders the previous bundle, which
// must not have changed.
func checkIncremental(t *testing.T, evs []events.Event, blobs BlobGetter, tc events.TokenCounter) {
	t.Helper()
	inc := NewSession("", evs[0].Session)
	var prev Bundle
	var prevSnap Snapshot
	var prevOut map[string]string
	for k, e := range evs {
		inc.Observe(e)
		fresh := NewSession("", evs[0].Session)
		for _, e := range evs[:k+1] {
			fresh.Observe(e)
		}
		sn := inc.Snapshot()
		bi, bf := inc.Bundle(), fresh.Bundle()
		if !reflect.DeepEqual(stripBundle(bi), stripBundle(sn.Bundle())) {
			t.Fatalf("after event %d: Snapshot().Bundle() differs from Bundle()", k)
		}
		var wantPruned []BundleItem
		for _, it := range bi.Items {
			if it.Pruned && it.Placeholder != "" {
				wantPruned = append(wantPruned, it)
			}
		}
		if !reflect.DeepEqual(stripBundle(Bundle{Items: wantPruned}), stripBundle(Bundle{Items: sn.Pruned()})) {
			t.Fatalf("after event %d: Snapshot().Pruned() differs from the Bundle's pruned items", k)
		}
		if !reflect.DeepEqual(stripBundle(bi), stripBundle(bf)) {
			for j := range bi.Items {
				if j < len(bf.Items) && !reflect.DeepEqual(stripBundle(bi).Items[j], stripBundle(bf).Items[j]) {
					t.Logf("item %d: incremental %+v\nfresh %+v", j, stripBundle(bi).Items[j], stripBundle(bf).Items[j])
				}
			}
			t.Fatalf("after event %d (%s %T): bundle differs from a fresh session's", k, e.ID, e.Data)
		}
		out := map[string]string{}
		for name, r := range renderers {
			want := renderOrErr(reference[name], stripBundle(bf), blobs, tc)
			for pass := range 2 {
				if got := renderOrErr(r, bi, blobs, tc); got != want {
					t.Fatalf("after event %d (%s %T), %s pass %d: incremental render differs:\n got %s\nwant %s", k, e.ID, e.Data, name, pass, got, want)
				}
			}
			if got := snapshotOrErr(snapshotRenderers[name], sn, blobs, tc); got != want {
				t.Fatalf("after event %d (%s %T), %s: snapshot render differs:\n got %s\nwant %s", k, e.ID, e.Data, name, got, want)
			}
			if got := renderOrErr(r, bf, blobs, tc); got != want {
				t.Fatalf("after event %d (%s %T), %s: fresh render differs from the reference:\n got %s\nwant %s", k, e.ID, e.Data, name, got, want)
			}
			out[name] = want
			if prevOut != nil {
				if got := renderOrErr(r, prev, blobs, tc); got != prevOut[name] {
					t.Fatalf("after event %d (%s %T), %s: the previous bundle renders differently now", k, e.ID, e.Data, name)
				}
				if got := snapshotOrErr(snapshotRenderers[name], prevSnap, blobs, tc); got != prevOut[name] {
					t.Fatalf("after event %d (%s %T), %s: the previous snapshot renders differently now", k, e.ID, e.Data, name)
				}
			}
		}
		si, err1 := inc.Stats(context.Background(), blobs, tc)
		sf, err2 := fresh.Stats(context.Background(), blobs, tc)
		if fmt.Sprint(err1) != fmt.Sprint(err2) || !reflect.DeepEqual(si, sf) {
			t.Fatalf("after event %d: stats differ: %+v / %+v", k, si, sf)
		}
		if !reflect.DeepEqual(inc.Decisions(), fresh.Decisions()) {
			t.Fatalf("after event %d (%s %T): decisions differ from a fresh session's", k, e.ID, e.Data)
		}
		if !reflect.DeepEqual(inc.Items(), fresh.Items()) {
			t.Fatalf("after event %d (%s %T): items differ from a fresh session's", k, e.ID, e.Data)
		}
		prev, prevSnap, prevOut = bi, sn, out
	}
}

// TestIncrementalGolden walks the golden session event by event.
func TestIncrementalGolden(t *testing.T) {
	fx := loadFixture(t)
	checkIncremental(t, fx.events, fx.blobs, fx.tc)
}

// TestIncrementalRandom walks random sessions mixing every event kind:
// results before calls, repeated ids, marks on unseen items and inputs,
// survivors pruned later or seen later, restores, pins, applications of
// unknown marks, host compactions. Not every event would pass
// events.Validate (a rungless PRUNE, a system thinking block): the
// projection must stay deterministic on those too.
//
// Under -race it walks the first 12 seeds (both token counters); .ci/run's
// stage "full input sets, without -race" walks all 40.
func TestIncrementalRandom(t *testing.T) {
	seeds, n := 40, 120
	if testutil.Race {
		seeds = 12
	}
	if testing.Short() {
		seeds = 8
	}
	for seed := range seeds {
		blobs := store.NewMemBlobs()
		evs := randomSession(t, uint64(seed), n, blobs)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			var tc events.TokenCounter
			if seed%2 == 0 {
				tc = &wordCounter{}
			}
			checkIncremental(t, evs, blobs, tc)
		})
	}
}

func randomSession(t testing.TB, seed uint64, n int, blobs *store.MemBlobs) []events.Event {
	rng := rand.New(rand.NewPCG(seed, 42))
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var evs []events.Event
	var marks []string
	add := func(p events.Payload) string {
		id := fmt.Sprintf("e%03d", len(evs))
		evs = append(evs, events.New(id, "", "rand", at.Add(time.Duration(len(evs))*time.Second), p))
		return id
	}
	texts := []string{"plain text", "with \"quotes\" and \\ and <html> & tabs\t\n", "héllo wörld ✓", "bad utf8 \xff\xfe end", "line\u2028sep", ""}
	roles := []events.Role{events.RoleSystem, events.RoleUser, events.RoleAssistant, events.RoleAssistant}
	callID := func() string { return fmt.Sprintf("c%d", rng.IntN(10)) }
	itemID := func() string {
		switch rng.IntN(4) {
		case 0:
			return fmt.Sprintf("m%d", rng.IntN(20))
		case 1:
			return events.CallInputItem(callID())
		case 2:
			return "r" + callID()
		}
		return callID()
	}
	// Survivors come from a few items so that chains form (a survivor
	// pruned in turn, deferring to one seen before or after).
	survivor := func() string {
		if rng.IntN(3) == 0 {
			return itemID()
		}
		return fmt.Sprintf("c%d", rng.IntN(4))
	}
	add(&events.SessionStarted{Format: "native", Provider: "anthropic", Model: "claude-sonnet-4-5"})
	for len(evs) < n {
		switch r := rng.IntN(100); {
		case r < 14:
			kind := events.KindText
			if rng.IntN(5) == 0 {
				kind = events.KindThinking
			}
			add(&events.Message{Item: fmt.Sprintf("m%d", rng.IntN(20)), Role: roles[rng.IntN(len(roles))], Kind: kind,
				Text: texts[rng.IntN(len(texts))], Signature: "sig", Tokens: rng.IntN(50)})
		case r < 28:
			c := callID()
			in := json.RawMessage(fmt.Sprintf(`{"path": "src/%d.go", "n": %d, "s": "%s"}`, rng.IntN(5), rng.IntN(100), "x y"))
			switch rng.IntN(6) {
			case 0:
				in = nil
			case 1:
				in = json.RawMessage(`[1, 2,  3]`)
			}
			item := events.CallInputItem(c)
			if rng.IntN(6) == 0 {
				item = fmt.Sprintf("alt-%d", len(evs))
			}
			tool := []string{"Read", "Bash", ""}[rng.IntN(3)]
			add(&events.ToolCall{Item: item, CallID: c, Tool: tool, Input: in, InputTokens: rng.IntN(30)})
		case r < 44:
			c := callID()
			item := c
			if rng.IntN(5) == 0 {
				item = "r" + c
			}
			p := &events.ToolResult{Item: item, CallID: c, IsError: rng.IntN(5) == 0, HostPruned: rng.IntN(10) == 0}
			if rng.IntN(2) == 0 {
				p.Tool = "Read"
			}
			out := texts[rng.IntN(len(texts))] + fmt.Sprint(rng.IntN(3))
			if rng.IntN(2) == 0 {
				p.Output = &out
			} else {
				h := events.HashBytes([]byte(out))
				if rng.IntN(15) != 0 { // sometimes missing: an error
					_ = blobs.PutBlob(context.Background(), h, []byte(out))
				}
				p.OutputRef = &events.ContentRef{Hash: h, Bytes: len(out), Tokens: rng.IntN(300)}
			}
			if rng.IntN(3) == 0 {
				p.Source = &events.SourceIdentity{Path: "src/a.go", Version: fmt.Sprint(rng.IntN(3))}
			}
			if p.IsError && rng.IntN(2) == 0 {
				p.Error = &events.ToolError{Type: "not_found", Message: "no such file"}
			}
			add(p)
		case r < 64:
			target := itemID()
			if rng.IntN(3) == 0 {
				target = survivor()
			}
			m := &events.Mark{Item: target, Decision: events.Prune, Rung: []events.Rung{events.L0, events.L1, events.L2, events.RungNone}[rng.IntN(4)],
				Reason: events.ReasonDuplicateOutput, Cause: "e001", PolicyVersion: "pv", TokensEstimated: rng.IntN(100)}
			if rng.IntN(4) == 0 {
				m.Decision, m.Reason, m.Rung = events.Keep, events.ReasonSurvivingCopy, events.RungNone
			}
			m.Part = []string{"", "output", "input"}[rng.IntN(3)]
			switch rng.IntN(3) {
			case 0:
				m.Recoverability = &events.Recoverability{Log: "e001", Survivor: survivor(), Source: []string{"", "src/a.go@1"}[rng.IntN(2)]}
			case 1:
				m.Evidence = []events.Evidence{{Item: itemID()}, {Item: survivor()}}
			}
			if rng.IntN(4) == 0 {
				m.Residue = &events.Residue{Tool: "Write", ErrorType: "denied", ErrorMessage: "rejected \"x\"", Skeleton: []string{"", `{"file_path":"b.go"}`}[rng.IntN(2)]}
			}
			marks = append(marks, add(m))
		case r < 78:
			var ms []string
			for range 1 + rng.IntN(3) {
				if len(marks) > 0 && rng.IntN(8) != 0 {
					ms = append(ms, marks[len(marks)-1-rng.IntN(min(len(marks), 6))])
				} else {
					ms = append(ms, "m-unknown")
				}
			}
			add(&events.Application{Request: fmt.Sprintf("q%d", len(evs)), Marks: ms, Items: ms,
				Trigger: events.TriggerNextRequest, PolicyVersion: "pv"})
		case r < 84:
			add(&events.Restore{Item: itemID(), By: "alice", Reason: "needed"})
		case r < 90:
			add(&events.Pin{Item: itemID(), By: "alice"})
		case r < 94:
			add(&events.Unpin{Item: itemID(), By: "alice"})
		case r < 97:
			add(&events.ModelRequest{Request: fmt.Sprintf("q%d", len(evs)), Model: []string{"claude-opus-4-1", ""}[rng.IntN(2)]})
		default:
			if rng.IntN(3) == 0 {
				add(&events.HostCompaction{Host: "claude-code", PreTokens: 100})
			} else {
				add(&events.Message{Item: fmt.Sprintf("u%d", len(evs)), Role: events.RoleUser, Text: "next"})
			}
		}
	}
	return evs
}

// TestRenderedBytesMatchReference renders the benchmark session with the
// cached and the reference renderers.
func TestRenderedBytesMatchReference(t *testing.T) {
	s, blobs := benchSession(t, 300)
	for name, r := range renderers {
		want := renderOrErr(reference[name], stripBundle(s.Bundle()), blobs, nil)
		for range 2 {
			if got := renderOrErr(r, s.Bundle(), blobs, nil); !bytes.Equal([]byte(got), []byte(want)) {
				t.Fatalf("%s differs from the reference", name)
			}
		}
	}
}

// TestIncrementalLateSurvivor: r1 defers to r2, r2 is removed deferring
// to r3, which is seen only afterwards: r1's placeholder names r3 from
// then on, as a fresh session's does.
func TestIncrementalLateSurvivor(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var evs []events.Event
	add := func(p events.Payload) string {
		id := fmt.Sprintf("e%d", len(evs)+1)
		evs = append(evs, events.New(id, "", "late", at.Add(time.Duration(len(evs))*time.Second), p))
		return id
	}
	out := "package config\n"
	result := func(id string) {
		add(&events.ToolCall{Item: id + "/input", CallID: id, Tool: "Read", Input: json.RawMessage(`{"file_path":"config.go"}`)})
		add(&events.ToolResult{Item: id, CallID: id, Tool: "Read", Output: &out})
	}
	result("r1")
	result("r2")
	m1 := add(&events.Mark{Item: "r1", Decision: events.Prune, Rung: events.L0, Reason: events.ReasonDuplicateOutput,
		Recoverability: &events.Recoverability{Log: "e2", Survivor: "r2"}, Cause: "e4", PolicyVersion: "pv"})
	add(&events.Application{Request: "q1", Marks: []string{m1}, Trigger: events.TriggerNextRequest, PolicyVersion: "pv"})
	m2 := add(&events.Mark{Item: "r2", Decision: events.Prune, Rung: events.L2, Reason: events.ReasonSuperseded,
		Recoverability: &events.Recoverability{Log: "e4", Survivor: "r3"}, Cause: "e4", PolicyVersion: "pv"})
	add(&events.Application{Request: "q2", Marks: []string{m2}, Trigger: events.TriggerNextRequest, PolicyVersion: "pv"})
	result("r3")
	checkIncremental(t, evs, store.NewMemBlobs(), nil)
	s := NewSession("", "late")
	for _, e := range evs {
		s.Observe(e)
	}
	text, err := RenderText(context.Background(), s.Bundle(), nil, nil)
	testutil.NoError(t, err)
	r3 := ""
	for _, it := range s.Items() {
		if it.ID == "r3" {
			r3 = placeholder.Handle(it.Index)
		}
	}
	testutil.True(t, r3 != "" && bytes.Contains(text, []byte("(since removed: L2 SUPERSEDED, see "+r3+")")), "r1 does not defer to r3 (%s):\n%s", r3, text)
}

// TestConcurrentSnapshotRenders: one writer, several readers rendering
// snapshots of the same session at once (run with -race); every rendering
// must match the reference of its own snapshot.
func TestConcurrentSnapshotRenders(t *testing.T) {
	blobs := store.NewMemBlobs()
	evs := randomSession(t, 7, 400, blobs)
	s := NewSession("", "rand")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, e := range evs {
			s.Observe(e)
		}
	}()
	errs := make(chan error, 3)
	for r := range 3 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				sn := s.Snapshot()
				name := []string{"anthropic", "openai", "text"}[r]
				got := snapshotOrErr(snapshotRenderers[name], sn, blobs, nil)
				want := renderOrErr(reference[name], stripBundle(sn.Bundle()), blobs, nil)
				if got != want {
					errs <- fmt.Errorf("%s: concurrent render differs from the reference", name)
					return
				}
				if got := renderOrErr(RenderAnthropic, s.Bundle(), blobs, nil); got == "" {
					errs <- fmt.Errorf("empty render")
					return
				}
			}
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestRenderCacheBudget: with a small per-session budget only part of the
// fragments is kept, the accounting stays within it, and the output is
// unchanged.
func TestRenderCacheBudget(t *testing.T) {
	const limit = 64 << 10
	budget := NewRenderBudget(limit, 1<<30)
	s, blobs := benchSession(t, 400)
	s.SetRenderBudget(budget)
	want := renderOrErr(refRenderAnthropic, stripBundle(s.Bundle()), blobs, nil)
	for range 3 {
		got := snapshotOrErr(Snapshot.RenderAnthropic, s.Snapshot(), blobs, nil)
		testutil.True(t, got == want, "render with a full cache differs from the reference")
	}
	n := s.rc.bytes.Load()
	testutil.True(t, n > 0 && n <= limit, "cached %d bytes, budget %d", n, limit)
	testutil.Equal(t, budget.Used(), n, "budget used")
	kept := 0
	for _, bi := range s.Snapshot().items {
		if bi.cached(anthropicFragment) != nil {
			kept++
		}
	}
	testutil.True(t, kept > 0 && kept < 400, "%d of 400 fragments kept", kept)
}

// TestAppendAnthropic: appending to a buffer gives the buffer's bytes
// followed by RenderAnthropic's, and a reused buffer the same again.
func TestAppendAnthropic(t *testing.T) {
	s, blobs := benchSession(t, 200)
	sn := s.Snapshot()
	want := snapshotOrErr(Snapshot.RenderAnthropic, sn, blobs, nil)
	buf, err := sn.AppendAnthropic(context.Background(), []byte("prefix"), blobs)
	testutil.True(t, err == nil && string(buf) == "prefix"+want, "appended rendering differs (err %v)", err)
	again, err := sn.AppendAnthropic(context.Background(), buf[:0], blobs)
	testutil.True(t, err == nil && string(again) == want, "rendering into a reused buffer differs (err %v)", err)
}
