package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

// memFailing is a Backend that decides in memory (it has the log's
// ReadSession, Tokens and PutBlob) and fails where told: readFail makes
// ReadSession fail, readBlock makes it wait for its context or release,
// appendFail makes every Append fail.
type memFailing struct {
	Backend
	lb         logBackend
	readFail   atomic.Bool
	readBlock  atomic.Bool
	release    chan struct{} // ends a blocked ReadSession
	appendFail atomic.Bool
}

func (m *memFailing) ReadSession(ctx context.Context, tenant, session string) ([]events.Event, error) {
	if m.readFail.Load() {
		return nil, fmt.Errorf("injected read failure")
	}
	if m.readBlock.Load() {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-m.release:
			return nil, fmt.Errorf("injected slow read, released")
		}
	}
	return m.lb.ReadSession(ctx, tenant, session)
}

func (m *memFailing) Tokens() events.TokenCounter { return m.lb.Tokens() }

func (m *memFailing) PutBlob(ctx context.Context, hash string, data []byte) error {
	return m.lb.PutBlob(ctx, hash, data)
}

func (m *memFailing) Append(ctx context.Context, evs []events.Event) ([]events.Event, error) {
	if m.appendFail.Load() {
		return nil, fmt.Errorf("injected append failure")
	}
	return m.Backend.Append(ctx, evs)
}

// TestInMemoryFailOpen: deciding in memory, a failure to load the session
// from the log, or a load past the budget, sends the client's bytes
// upstream unchanged and counts the stage; a failed log write after
// forwarding does not touch the request (it was decided already), counts
// a record failure, and the session's next request, rebuilt from the log,
// renders again and writes the facts the failed write lost.
func TestInMemoryFailOpen(t *testing.T) {
	t.Parallel()
	f := &fakeUpstream{}
	up := okUpstream(f)
	mf := &memFailing{release: make(chan struct{})}
	b := setup(t, testPolicy(t), up, func(c *Config) {
		c.Budget = time.Hour
		mf.Backend, mf.lb = c.Backend, c.Backend.(logBackend)
		c.Backend = mf
	})
	send := func(session, body string) {
		t.Helper()
		req, _ := http.NewRequest("POST", b.url+"/v1/messages", strings.NewReader(body))
		req.Header.Set("x-api-key", secretKey)
		req.Header.Set(SessionHeader, session)
		resp, err := http.DefaultClient.Do(req)
		testutil.NoError(t, err)
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		testutil.True(t, resp.StatusCode == 200 && bytes.Contains(out, []byte(`"ok"`)), "client got %d %s", resp.StatusCode, out)
	}
	body := func(n int) string {
		msgs := `{"role":"user","content":"hello"}`
		for i := range n {
			msgs += fmt.Sprintf(`,{"role":"assistant","content":[{"type":"tool_use","id":"t%d","name":"Read","input":{"file_path":"/a.go"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"package a // the same file, read again"}]}`, i, i)
		}
		return `{"model":"m","max_tokens":10,"tools":[{"name":"Read"}],"messages":[` + msgs + `]}`
	}
	last := func() string {
		reqs := f.requests()
		return string(reqs[len(reqs)-1].body)
	}

	mf.readFail.Store(true)
	send("load", body(0))
	testutil.True(t, last() == body(0), "load failure: the body changed")
	testutil.True(t, counter(t, b, "prunesched_proxy_fail_open_total", "stage", StageLoad) == 1, "load failure not counted")
	mf.readFail.Store(false)

	// A load past the budget: the budget is the proxy's, so a second
	// proxy with a short one shares the log.
	mf.readBlock.Store(true)
	px, err := New(Config{Upstream: b.upstream.URL, Backend: mf, Budget: 20 * time.Millisecond, Registry: nil})
	testutil.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = px.Close(ctx)
	})
	pl, err := px.budgeted(context.Background(), APIAnthropic, http.Header{SessionHeader: {"slow"}}, []byte(body(0)), time.Now(), newHold(func() {}), nil)
	testutil.True(t, pl == nil && err != nil && strings.Contains(err.Error(), StageTimeout), "a load past the budget: plan %v, err %v", pl, err)
	mf.readBlock.Store(false)
	close(mf.release)

	// A failed write after forwarding: the request was decided and goes
	// as decided; the next request rebuilds the state from the log.
	send("write", body(1))
	mf.appendFail.Store(true)
	send("write", body(2))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testutil.NoError(t, b.px.Flush(ctx))
	testutil.True(t, counter(t, b, "prunesched_proxy_record_failures_total") >= 1, "the failed write was not counted")
	mf.appendFail.Store(false)
	send("write", body(3))
	testutil.True(t, counter(t, b, "prunesched_proxy_fail_open_total", "stage", StageAppend) == 0, "a failed log write made a request fail open")
	items := b.items(t, events.DefaultTenant, b.session("write", http.Header{"X-Api-Key": {secretKey}}))
	have := map[string]bool{}
	for _, it := range items {
		have[it.ID] = true
	}
	for i := range 3 {
		id := fmt.Sprintf("t%d", i)
		testutil.True(t, have[id], "item %s lost with the failed write", id)
	}
	testutil.True(t, counter(t, b, "prunesched_proxy_decision_divergences_total") == 0, "decisions diverged")
}

// TestInMemoryOrderWithHeldRecord: deciding in memory, the client's next
// request does not wait for the previous response's record to reach the
// log (the test holds the record's append): it is decided from memory and
// goes upstream at once, rendered; its facts reach the log only after the
// record (orderBackend fails the test otherwise), and the log holds the
// answer before the tool result, as when the record is not held.
func TestInMemoryOrderWithHeldRecord(t *testing.T) {
	t.Parallel()
	f := &fakeUpstream{}
	g, release := newGate()
	o := &orderBackend{t: t}
	up := anthropicFake(f, func(req map[string]any) turn {
		if countToolResults(req) == 0 {
			return turn{tool: "Read", id: "toolu_r1", input: map[string]any{"file_path": "/p/a.txt"}}
		}
		return turn{text: "done"}
	})
	b := setup(t, testPolicy(t), up, func(c *Config) {
		o.Backend = c.Backend
		g.Backend = o
		c.Backend = &memFailing{Backend: g, lb: c.Backend.(logBackend)}
	})
	t.Cleanup(release)
	user := map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "read a.txt"}}}
	body := func(msgs ...any) []byte {
		out, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 100, "tools": []any{map[string]any{"name": "Read"}}, "messages": msgs})
		return out
	}
	post := func(body []byte) {
		t.Helper()
		resp, err := http.Post(b.url+"/v1/messages", "application/json", bytes.NewReader(body))
		testutil.NoError(t, err)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		testutil.True(t, resp.StatusCode == 200, "status %d", resp.StatusCode)
	}
	post(body(user))
	receive(t, g.entered, "the record's log write to start")
	// The record's append is held: the next request is answered anyway.
	post(body(user,
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_r1", "name": "Read", "input": map[string]any{"file_path": "/p/a.txt"}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_r1", "content": "alpha"}}}))
	testutil.True(t, len(f.requests()) == 2, "upstream saw %d requests", len(f.requests()))
	testutil.True(t, counter(t, b, "prunesched_proxy_requests_total", "outcome", "rendered") == 2,
		"requests not both rendered: fail open %v", counter(t, b, "prunesched_proxy_fail_open_total"))
	release()
	requireAnswerFirst(t, b, "toolu_r1")
}

// TestInMemoryForeignFacts: a fact another writer appends to the session
// (here straight to the log, as the API appends a pin or a manual prune)
// is found after the proxy's next request (the pipeline holds more facts
// than the in-memory cores), and the request after it decides on a state
// rebuilt from the log, which holds the fact.
func TestInMemoryForeignFacts(t *testing.T) {
	t.Parallel()
	f := &fakeUpstream{}
	b := setup(t, testPolicy(t), okUpstream(f), nil)
	h := http.Header{"X-Api-Key": {secretKey}}
	session := b.session("foreign", h)
	send := func(n int) {
		t.Helper()
		msgs := `{"role":"user","content":"hello"}`
		for i := range n {
			msgs += fmt.Sprintf(`,{"role":"assistant","content":[{"type":"tool_use","id":"t%d","name":"Read","input":{"file_path":"/a%d.go"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"package a%d"}]}`, i, i, i, i)
		}
		b.post(t, "foreign", `{"model":"m","max_tokens":10,"tools":[{"name":"Read"}],"messages":[`+msgs+`]}`)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		testutil.NoError(t, b.px.Flush(ctx))
	}
	state := func() *sessState {
		b.px.mu.Lock()
		defer b.px.mu.Unlock()
		return b.px.sessions[sessionKey{events.DefaultTenant, session}]
	}
	send(1)
	first := state().mem
	testutil.True(t, first != nil && !state().q.isStale(), "not decided in memory")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := b.svc.Store.Append(ctx, []events.Event{events.New(events.NewID(), "", session, time.Now(), &events.Message{Item: "user.text.foreign.0", Role: events.RoleUser, Kind: events.KindText, Text: "a note the API appended"})})
	testutil.NoError(t, err)
	send(2)
	testutil.True(t, state().q.isStale(), "the foreign fact was not noticed")
	send(3)
	st := state()
	testutil.True(t, st.mem != first && !st.q.isStale(), "the state was not rebuilt")
	_, ok := st.mem.proj.IndexOf("user.text.foreign.0")
	testutil.True(t, ok, "the rebuilt state lacks the foreign fact")
	testutil.True(t, counter(t, b, "prunesched_proxy_fail_open_total") == 0, "a request failed open")
}

// TestFactsWrittenWhileUpstreamWorks: a request's facts reach the log once
// the request is written upstream, while the upstream still works on its
// answer, so their write does not compete with relaying the answer. The
// upstream here answers only after the test has seen the facts in the log
// (with the facts written after the answer's headers, it would never
// answer and the wait would fail).
func TestFactsWrittenWhileUpstreamWorks(t *testing.T) {
	t.Parallel()
	answer := make(chan struct{})
	b := setup(t, testPolicy(t), heldUpstream(&fakeUpstream{}, answer, nil), nil)
	const session = "facts-early"
	body := oneReadBody
	done := postWhileFactsLogged(t, b, session, body, "t1")
	close(answer)
	testutil.Equal(t, <-done, http.StatusOK)
	testutil.True(t, counter(t, b, "prunesched_proxy_requests_total", "outcome", "rendered") == 1,
		"request not rendered: fail open %v", counter(t, b, "prunesched_proxy_fail_open_total"))
}

// checkSpy is memFailing that notes, at each decision the pipeline makes
// from the log (the check of a decision the proxy sent), whether the
// upstream had finished its answer.
type checkSpy struct {
	*memFailing
	finished *atomic.Bool
	checks   atomic.Int32
	early    atomic.Int32
}

func (c *checkSpy) DecideLive(ctx context.Context, tenant, session string, afterSeq uint64, at time.Time, req string) (*events.Event, error) {
	c.checks.Add(1)
	if !c.finished.Load() {
		c.early.Add(1)
	}
	return c.memFailing.DecideLive(ctx, tenant, session, afterSeq, at, req)
}

// TestDecisionCheckedAfterResponse: the check of a decision that went
// upstream (the pipeline deciding the request again from the log) runs
// once the response has ended, not while its answer is relayed, where it
// would take the processors the relay needs. The upstream here sends the
// answer's first half, then holds the rest until the request's facts are
// in the log (their write does not wait for the response).
func TestDecisionCheckedAfterResponse(t *testing.T) {
	t.Parallel()
	var finished atomic.Bool
	rest := make(chan struct{})
	const answer = `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":1,"output_tokens":1}}`
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer[:len(answer)/2])
		w.(http.Flusher).Flush()
		select {
		case <-rest:
		case <-r.Context().Done():
			return
		}
		finished.Store(true)
		_, _ = io.WriteString(w, answer[len(answer)/2:])
	})
	var spy *checkSpy
	b := setup(t, testPolicy(t), up, func(c *Config) {
		spy = &checkSpy{memFailing: &memFailing{Backend: c.Backend, lb: c.Backend.(logBackend)}, finished: &finished}
		c.Backend = spy
	})
	const session = "check-after-response"
	body := oneReadBody
	done := postWhileFactsLogged(t, b, session, body, "t1")
	close(rest)
	testutil.Equal(t, <-done, http.StatusOK)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testutil.NoError(t, b.px.Flush(ctx))
	testutil.True(t, counter(t, b, "prunesched_proxy_requests_total", "outcome", "rendered") == 1,
		"request not rendered: fail open %v", counter(t, b, "prunesched_proxy_fail_open_total"))
	testutil.True(t, spy.checks.Load() >= 1, "the decision was never checked against the log")
	testutil.True(t, spy.early.Load() == 0, "the decision was checked while the answer was still being relayed")
}

// oneReadBody is an agent turn whose one tool result (call t1) is new.
const oneReadBody = `{"model":"m","max_tokens":10,"tools":[{"name":"Read"}],"messages":[{"role":"user","content":"hello"},` +
	`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/a.go"}}]},` +
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"package a"}]}]}`

// heldUpstream is okUpstream(f) answering each request once release is
// closed (having read its body first), after setting finished (when not
// nil).
func heldUpstream(f *fakeUpstream, release <-chan struct{}, finished *atomic.Bool) http.Handler {
	ok := okUpstream(f)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		if finished != nil {
			finished.Store(true)
		}
		ok.ServeHTTP(w, r)
	})
}

// postAsync posts body to the session in the background; the channel
// gets the response's status (0: no response).
func postAsync(b *bench, session, body string) <-chan int {
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", b.url+"/v1/messages", strings.NewReader(body))
		req.Header.Set("x-api-key", secretKey)
		req.Header.Set(SessionHeader, session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	return done
}

// postWhileFactsLogged posts body to the session in the background and
// returns once the log holds the result of call, while the upstream (the
// caller's) may still hold the answer; the channel gets the response's
// status (0: no response).
func postWhileFactsLogged(t *testing.T, b *bench, session, body, call string) <-chan int {
	t.Helper()
	done := postAsync(b, session, body)
	sid := b.session(session, http.Header{"X-Api-Key": {secretKey}})
	testutil.Eventually(t, func() error {
		evs, err := b.svc.Store.ReadSession(context.Background(), events.DefaultTenant, sid)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if r, isResult := e.Data.(*events.ToolResult); isResult && r.CallID == call {
				return nil
			}
		}
		return fmt.Errorf("the request's tool result is not in the log while the upstream holds its answer (%d events)", len(evs))
	})
	return done
}
