package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/decide"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// bigFile is a tool output far above exactBelow whose exact count differs
// from its bytes/4 estimate.
func bigFile(lines int) string {
	var sb strings.Builder
	for i := range lines {
		fmt.Fprintf(&sb, "%5d\tfunc handle%d(w http.ResponseWriter, r *http.Request) { serve(w, r, %d) } // é\n", i+1, i, i*i)
	}
	return sb.String()
}

// stripExact is evs without the exact counts: the log as it was before
// they were recorded.
func stripExact(evs []events.Event) []events.Event {
	out := make([]events.Event, len(evs))
	for i, ev := range evs {
		out[i] = ev
		switch d := ev.Data.(type) {
		case *events.Message:
			cp := *d
			cp.TokensExact = 0
			out[i].Data = &cp
		case *events.ToolCall:
			cp := *d
			cp.InputTokensExact = 0
			out[i].Data = &cp
		case *events.ToolResult:
			if d.OutputRef != nil {
				cp, ref := *d, *d.OutputRef
				ref.TokensExact = 0
				cp.OutputRef = &ref
				out[i].Data = &cp
			}
		}
	}
	return out
}

// encodeApps is the applications of evs, each encoded as stored (Seq
// aside), one a line.
func encodeApps(t testing.TB, evs []events.Event) string {
	t.Helper()
	var sb strings.Builder
	for _, ev := range evs {
		if _, ok := ev.Data.(*events.Application); !ok {
			continue
		}
		ev.Seq = 0
		b, err := events.EncodeValidated(ev)
		testutil.NoError(t, err)
		sb.Write(b)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// TestExactCountsAfterForwarding: deciding in memory, a large new tool
// output and a long prompt are decided on their estimates; the log's facts
// record the estimates as the decision counts and, beside them, the exact
// counts the write took after forwarding (the second copy of the output
// too, decided on the estimate like the first). Rebuilding the log's
// decisions, with or without the exact counts, gives the applications the
// log holds byte for byte; the economics (the projection's ledger, the
// unpruned session's prices, the Prometheus tokens removed) use the exact
// counts, computed here with a tokenizer of the test's own.
func TestExactCountsAfterForwarding(t *testing.T) {
	t.Parallel()
	f := &fakeUpstream{}
	pol := testPolicy(t)
	b := setup(t, pol, anthropicFake(f, readScript("/p")), nil)
	file := bigFile(300)
	prompt := "read a.txt twice, then b.txt twice. " + strings.Repeat("Keep every answer short and say which file you read. ", 8)
	c := &simClient{t: t, url: b.url, session: "exact-1", files: map[string]string{"/p/a.txt": file, "/p/b.txt": "b version 1\n"}}
	testutil.Equal(t, c.run(prompt), 5, "requests")
	session := b.session("exact-1", f.requests()[0].header)
	b.items(t, events.DefaultTenant, session) // the writes and the pipeline are done
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs, err := b.svc.Store.ReadSession(ctx, events.DefaultTenant, session)
	testutil.NoError(t, err)

	tc := tokens.New()
	fileExact, promptExact := tc.Count(file), tc.Count(prompt)
	fileEst := events.EstimateTokens(len(file))
	testutil.True(t, fileExact != fileEst && promptExact != events.EstimateTokens(len(prompt)), "the test's texts must count apart from their estimates")
	var outputs, prompts int
	for _, ev := range evs {
		switch d := ev.Data.(type) {
		case *events.ToolResult:
			if d.Item != "toolu_a1" && d.Item != "toolu_a2" {
				testutil.Equal(t, d.OutputRef.TokensExact, 0, d.Item+": exact count beside an exact decision count")
				continue
			}
			outputs++
			testutil.Equal(t, d.OutputRef.Tokens, fileEst, d.Item+": decision count")
			testutil.Equal(t, d.OutputRef.TokensExact, fileExact, d.Item+": exact count")
		case *events.Message:
			if d.Text != prompt {
				continue
			}
			prompts++
			testutil.Equal(t, d.Tokens, events.EstimateTokens(len(prompt)), "prompt: decision count")
			testutil.Equal(t, d.TokensExact, promptExact, "prompt: exact count")
		case *events.ToolCall:
			testutil.Equal(t, d.InputTokensExact, 0, d.Item+": exact count beside an exact decision count")
		}
	}
	testutil.Equal(t, outputs, 2, "copies of a.txt in the log")
	testutil.Equal(t, prompts, 1, "prompts in the log")

	// The decisions: rebuilt from the log's facts, with and without the
	// exact counts, they are the applications the log holds.
	var facts []events.Event
	for _, ev := range evs {
		if ev.IsFact() {
			ev.Tenant = ev.TenantOrDefault() // as the pipeline derives ids
			facts = append(facts, ev)
		}
	}
	logged := encodeApps(t, evs)
	testutil.True(t, strings.Contains(logged, `"toolu_a2"`), "the second copy of a.txt was not pruned:\n%s", logged)
	content := func(h string) ([]byte, error) { return b.svc.Store.GetBlob(ctx, h) }
	for name, fs := range map[string][]events.Event{"the log's facts": facts, "without exact counts": stripExact(facts)} {
		_, apps := decide.Run(pol, fs, content)
		testutil.Equal(t, encodeApps(t, apps), logged, name+": applications")
	}

	// The economics price the exact counts.
	extra := 2*(fileExact-fileEst) + promptExact - events.EstimateTokens(len(prompt))
	stats := func(evs []events.Event) projections.Stats {
		s := projections.NewSession(events.DefaultTenant, session)
		for _, ev := range evs {
			s.Observe(ev)
		}
		st, err := s.Stats(ctx, nil, tc)
		testutil.NoError(t, err)
		return st
	}
	with, without := stats(evs), stats(stripExact(evs))
	testutil.Equal(t, with.Tokens.Removed, fileExact, "tokens removed (the pruned copy, exact)")
	testutil.Equal(t, with.Tokens.Raw-without.Tokens.Raw, extra, "raw tokens over the estimates")
	none, noneEst := scheduler.Simulate(pol, evs, scheduler.StrategyNone), scheduler.Simulate(pol, stripExact(evs), scheduler.StrategyNone)
	testutil.Equal(t, none.Head, 0, "head (usage below the bundle)")
	last := len(none.Requests) - 1
	testutil.Equal(t, none.Requests[last].Tokens-noneEst.Requests[last].Tokens, extra, "last request's tokens over the estimates")
	var app *events.Application
	for _, ev := range evs {
		if a, ok := ev.Data.(*events.Application); ok {
			app = a
		}
	}
	testutil.Equal(t, counter(t, b, "prunesched_tokens_removed_total"), float64(app.TokensRemoved+fileExact-fileEst), "Prometheus tokens removed")
}

// TestExactCountOffHotPath: the exact counts are not on a request's path.
// With the proxy's one count slot held (every exact count waits), a
// conversation that adds a large new output is answered request after
// request, decided in memory; its log write waits for the slot, and once
// it is free the facts reach the log with their exact counts.
func TestExactCountOffHotPath(t *testing.T) {
	t.Parallel()
	f := &fakeUpstream{}
	b := setup(t, testPolicy(t), anthropicFake(f, readScript("/p")), nil)
	b.px.exact.slot <- struct{}{} // held: no exact count can start
	file := bigFile(200)
	c := &simClient{t: t, url: b.url, session: "exact-2", files: map[string]string{"/p/a.txt": file, "/p/b.txt": "b version 1\n"}}
	testutil.Equal(t, c.run("read a.txt twice, then b.txt twice"), 5, "requests answered while no exact count could run")
	testutil.Equal(t, counter(t, b, "prunesched_proxy_requests_total", "outcome", "rendered"), 5.0, "requests rendered")
	testutil.Equal(t, counter(t, b, "prunesched_proxy_fail_open_total"), 0.0, "requests failed open")
	<-b.px.exact.slot
	session := b.session("exact-2", f.requests()[0].header)
	b.items(t, events.DefaultTenant, session)
	evs, err := b.svc.Store.ReadSession(context.Background(), events.DefaultTenant, session)
	testutil.NoError(t, err)
	want := tokens.New().Count(file)
	n := 0
	for _, ev := range evs {
		if r, ok := ev.Data.(*events.ToolResult); ok && r.OutputRef.Bytes == len(file) {
			n++
			testutil.Equal(t, r.OutputRef.TokensExact, want, r.Item+": exact count")
		}
	}
	testutil.Equal(t, n, 2, "copies of a.txt in the log")
}

// BenchmarkExactCount measures what the exact count of a new 200 KiB
// tool output costs: after forwarding, on one goroutine (what the log
// write does), against the parallel count a request would pay with
// Config.ExactCounts, and what a request pays by default (prepareMem: the
// content address and the estimate).
func BenchmarkExactCount(b *testing.B) {
	out := bigFile(2600)[:200<<10]
	tc := tokens.New()
	if err := tc.Check(); err != nil {
		b.Fatal(err)
	}
	b.Run("after-forwarding-serial", func(b *testing.B) {
		x := newExactCounter()
		b.SetBytes(int64(len(out)))
		for b.Loop() {
			x.count(context.Background(), tc, "", out)
		}
	})
	b.Run("after-forwarding-remembered", func(b *testing.B) {
		x := newExactCounter()
		h := events.HashString(out)
		x.count(context.Background(), tc, h, out)
		b.SetBytes(int64(len(out)))
		for b.Loop() {
			x.known(tc, h)
		}
	})
	b.Run("before-forwarding-parallel", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		for b.Loop() {
			tc.Count(out)
		}
	})
	b.Run("hot-path-prepare", func(b *testing.B) {
		ev := events.New("e1", "", "s1", time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC),
			&events.ToolResult{Item: "c1", CallID: "c1", Tool: "Bash", Output: &out})
		b.SetBytes(int64(len(out)))
		for b.Loop() {
			if _, _, _, inexact, err := prepareMem(ev, counts{tc: tc}, &writeQueue{}); err != nil || !inexact {
				b.Fatalf("prepareMem: inexact %v, err %v", inexact, err)
			}
		}
	})
}

// TestExactCountLeftOutPastHalfTheWrite: when no exact count can start
// within half of the write's RecordTimeout (the proxy's one count slot is
// held throughout), the facts are appended with their estimates alone,
// and the write does not fail.
func TestExactCountLeftOutPastHalfTheWrite(t *testing.T) {
	t.Parallel()
	f := &fakeUpstream{}
	b := setup(t, testPolicy(t), okUpstream(f), func(c *Config) { c.RecordTimeout = 6 * time.Second })
	b.px.exact.slot <- struct{}{}
	defer func() { <-b.px.exact.slot }()
	file := bigFile(100)
	body := fmt.Sprintf(`{"model":"m","max_tokens":10,"tools":[{"name":"Read"}],"messages":[{"role":"user","content":"hello"},{"role":"assistant","content":[{"type":"tool_use","id":"t0","name":"Read","input":{"file_path":"/a.go"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t0","content":%q}]}]}`, file)
	status, _ := b.post(t, "exact-3", body)
	testutil.Equal(t, status, 200, "status")
	session := b.session("exact-3", http.Header{"X-Api-Key": {secretKey}})
	b.items(t, events.DefaultTenant, session)
	evs, err := b.svc.Store.ReadSession(context.Background(), events.DefaultTenant, session)
	testutil.NoError(t, err)
	n := 0
	for _, ev := range evs {
		if r, ok := ev.Data.(*events.ToolResult); ok && r.Item == "t0" {
			n++
			testutil.Equal(t, r.OutputRef.Tokens, events.EstimateTokens(len(file)), "decision count")
			testutil.Equal(t, r.OutputRef.TokensExact, 0, "exact count (left out)")
		}
	}
	testutil.Equal(t, n, 1, "outputs in the log")
	testutil.Equal(t, counter(t, b, "prunesched_proxy_record_failures_total"), 0.0, "failed writes")
}

// appendSpy is memFailing that notes, at each append holding the result
// of call, whether the upstream had finished its answer.
type appendSpy struct {
	*memFailing
	call     string
	finished *atomic.Bool
	appends  atomic.Int32
	early    atomic.Int32
}

func (a *appendSpy) Append(ctx context.Context, evs []events.Event) ([]events.Event, error) {
	for _, e := range evs {
		if r, ok := e.Data.(*events.ToolResult); ok && r.CallID == a.call {
			a.appends.Add(1)
			if !a.finished.Load() {
				a.early.Add(1)
			}
		}
	}
	return a.memFailing.Append(ctx, evs)
}

// TestExactCountAfterResponse: a request's facts that need an exact count
// (a new output over the estimate's threshold) are counted and appended
// once the response has ended, not beside the relay of the answer; a
// request with nothing to count exactly still has its facts written while
// the upstream works. The upstream holds every answer until the small
// request's facts are in the log (so the log writes are running), and the
// large output's append must come after the answers finished, with its
// exact count.
func TestExactCountAfterResponse(t *testing.T) {
	t.Parallel()
	var finished atomic.Bool
	rest := make(chan struct{})
	var spy *appendSpy
	b := setup(t, testPolicy(t), heldUpstream(&fakeUpstream{}, rest, &finished), func(c *Config) {
		spy = &appendSpy{memFailing: &memFailing{Backend: c.Backend, lb: c.Backend.(logBackend)}, call: "big1", finished: &finished}
		c.Backend = spy
	})
	file := bigFile(40)
	content, err := json.Marshal(file)
	testutil.NoError(t, err)
	large := `{"model":"m","max_tokens":10,"tools":[{"name":"Read"}],"messages":[{"role":"user","content":"hello"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"big1","name":"Read","input":{"file_path":"/big.go"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"big1","content":` + string(content) + `}]}]}`
	largeDone := postAsync(b, "exact-after", large)
	smallDone := postWhileFactsLogged(t, b, "exact-small", oneReadBody, "t1")
	close(rest)
	testutil.Equal(t, <-smallDone, http.StatusOK)
	testutil.Equal(t, <-largeDone, http.StatusOK)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testutil.NoError(t, b.px.Flush(ctx))
	testutil.Equal(t, counter(t, b, "prunesched_proxy_requests_total", "outcome", "rendered"), 2.0, "requests rendered")
	testutil.True(t, spy.appends.Load() >= 1, "the large output was never appended")
	testutil.Equal(t, spy.early.Load(), int32(0), "appends of the large output while the answer was held")
	session := b.session("exact-after", http.Header{"X-Api-Key": {secretKey}})
	evs, err := b.svc.Store.ReadSession(ctx, events.DefaultTenant, session)
	testutil.NoError(t, err)
	n := 0
	for _, ev := range evs {
		if r, ok := ev.Data.(*events.ToolResult); ok && r.CallID == "big1" {
			n++
			testutil.True(t, r.OutputRef != nil, "the large output is stored by reference")
			testutil.Equal(t, r.OutputRef.TokensExact, tokens.New().Count(file), "exact count")
		}
	}
	testutil.Equal(t, n, 1, "large outputs in the log")
}
