package inspector_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/inspector"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// memSource is an inspector.Source over one session's events held in
// memory: the projection and the economics are the real ones, the log a
// slice.
type memSource struct {
	tenant, session string
	evs             []events.Event
	proj            *projections.Session
	core            *scheduler.Core
}

func newMemSource(evs []events.Event) *memSource {
	s := &memSource{tenant: events.DefaultTenant, session: evs[0].Session, evs: evs}
	s.proj = projections.NewSession(s.tenant, s.session)
	s.core = scheduler.New(policy.Default(), "", s.session)
	for _, ev := range evs {
		s.proj.Observe(ev)
		s.core.Observe(ev)
	}
	return s
}

func (s *memSource) Sessions(context.Context, string) ([]string, error) {
	return []string{s.session}, nil
}

func (s *memSource) View(ctx context.Context, tenant, session string) (inspector.View, error) {
	if tenant != s.tenant || session != s.session {
		return inspector.View{}, fmt.Errorf("session %s/%s: %w", tenant, session, inspector.ErrNotFound)
	}
	st, err := s.proj.Stats(ctx, nil, nil)
	return inspector.View{Items: s.proj.Items(), Decisions: s.proj.Decisions(), Stats: st, Pending: s.core.Pending()}, err
}

func (s *memSource) Log(context.Context, string, string) ([]events.Event, error) { return s.evs, nil }

func (s *memSource) Economics(evs []events.Event, strategies ...string) map[string]scheduler.Ledger {
	return scheduler.SimulateAll(policy.Default(), evs, strategies...)
}

// syntheticSession builds a session of n items: a user message, then
// tool call and result pairs, a model request every 10 items, and every
// 7th result pruned (L0, applied at the next request).
func syntheticSession(n int) []events.Event {
	const sess = "synthetic"
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var evs []events.Event
	seq := 0
	add := func(p events.Payload) events.Event {
		seq++
		ev := events.New(fmt.Sprintf("e%06d", seq), "", sess, t0.Add(time.Duration(seq)*time.Second), p)
		evs = append(evs, ev)
		return ev
	}
	add(&events.SessionStarted{Format: "native", Agent: "synthetic", Provider: "anthropic", Model: "claude-sonnet-4-5", Title: fmt.Sprintf("%d items", n)})
	add(&events.Message{Item: "m0", Role: events.RoleUser, Text: "start", Tokens: 40})
	items, req, facts := 1, 0, 2
	var marks []string
	for items < n {
		k := items
		add(&events.ToolCall{Item: fmt.Sprintf("c%d", k), CallID: fmt.Sprintf("call%d", k), Tool: "Read", Input: []byte(`{"file_path":"a.go"}`), InputTokens: 20})
		res := fmt.Sprintf("r%d", k)
		add(&events.ToolResult{Item: res, CallID: fmt.Sprintf("call%d", k), Tool: "Read", OutputRef: &events.ContentRef{Hash: fmt.Sprintf("sha256:%064d", k%50), Tokens: 50 + (k*37)%900}})
		items += 2
		facts += 2
		if k%7 == 0 {
			m := add(&events.Mark{Item: res, Decision: events.Prune, Rung: events.L0, Reason: events.ReasonDuplicateOutput, Part: "output", TokensEstimated: 100, Cause: evs[len(evs)-1].ID, CauseIndex: facts - 1, PolicyVersion: "synthetic"})
			marks = append(marks, m.ID)
		}
		if items%10 < 2 {
			id := fmt.Sprintf("req%d", req)
			if len(marks) > 0 {
				add(&events.Application{Request: id, Marks: marks, Trigger: events.Trigger("cache_expired"), FirstDivergence: 100, MutationRadius: 0, TokensRemoved: 100 * len(marks), PolicyVersion: "synthetic"})
				marks = nil
			}
			add(&events.ModelRequest{Request: id, Provider: "anthropic", Model: "claude-sonnet-4-5"})
			req++
			facts++
		}
	}
	return evs
}

// TestFirstPaintLargeSession renders a 20,000-item session's page in the
// browser and reports the server's render time and the browser's first
// contentful paint (reported, never asserted: tests do not time the
// machine). The strip must aggregate its blocks.
func TestFirstPaintLargeSession(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the 20,000-item page is built and priced in full")
	}
	if raceEnabled {
		// Pricing 20,000 items under the race detector takes half a
		// minute and measures the detector; .ci/run runs this test
		// without it.
		t.Skip("race detector on: run go test ./inspector -run TestFirstPaintLargeSession -v (as .ci/run does)")
	}
	ctx := withBrowser(t)
	evs := syntheticSession(20000)
	src := newMemSource(evs)
	h := inspector.New(inspector.Config{Source: src, Tenant: func(*http.Request) (string, int, error) { return events.DefaultTenant, 200, nil }})
	srv := httptest.NewServer(h)
	defer srv.Close()

	start := time.Now()
	resp, err := http.Get(srv.URL + "/ui/sessions/synthetic")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	serverTime := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("session page: %d", resp.StatusCode)
	}

	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/ui/sessions/synthetic"),
		chromedp.WaitVisible("#strip-section .strip .agg"),
	); err != nil {
		t.Fatalf("session page: %v", err)
	}
	type paint struct {
		FCP, DCL, Load float64
		Resp           float64
		Blocks, Aggs   int
		Slider         float64
	}
	p, err := chromedp.Run(ctx, chromedp.Evaluate[paint](`(() => {
		const fcp = performance.getEntriesByName("first-contentful-paint")[0];
		const nav = performance.getEntriesByType("navigation")[0];
		const s = document.getElementById("slider");
		const t0 = performance.now();
		s.value = Math.floor(s.max / 2); s.dispatchEvent(new Event("input"));
		const slider = performance.now() - t0;
		return {FCP: fcp ? fcp.startTime : -1, Resp: nav.responseEnd, DCL: nav.domContentLoadedEventEnd, Load: nav.loadEventEnd,
			Blocks: document.querySelectorAll("#strip-section .strip .b").length,
			Aggs: document.querySelectorAll("#strip-section .strip .agg").length, Slider: slider};
	})()`))
	if err != nil {
		t.Fatalf("measure: %v", err)
	}
	if p.Blocks != 0 || p.Aggs == 0 || p.Aggs > inspector.MaxBlocks {
		t.Errorf("20,000 items drawn as %d blocks and %d aggregates, want aggregates only (at most %d)", p.Blocks, p.Aggs, inspector.MaxBlocks)
	}
	// Zoom into one aggregate: its items, one block each.
	if err := chromedp.Do(ctx,
		chromedp.Click("#strip-section .strip .agg:nth-child(3)"),
		chromedp.WaitVisible("#zoom .strip .b"),
	); err != nil {
		t.Fatalf("zoom: %v", err)
	}
	t.Logf("20,000 items (%d events): server render %v; in the browser (from navigation start): response end %.0f ms, first contentful paint %.0f ms (%.0f ms after the response), DOMContentLoaded %.0f ms, load %.0f ms; %d aggregate blocks; slider step %.1f ms",
		len(evs), serverTime.Round(time.Millisecond), p.Resp, p.FCP, p.FCP-p.Resp, p.DCL, p.Load, p.Aggs, p.Slider)
}
