package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
)

// spyBackend keeps every event the proxy appended.
type spyBackend struct {
	Backend
	mu  sync.Mutex
	evs []events.Event
}

func (s *spyBackend) Append(ctx context.Context, evs []events.Event) ([]events.Event, error) {
	out, err := s.Backend.Append(ctx, evs)
	if err == nil {
		s.mu.Lock()
		s.evs = append(s.evs, evs...)
		s.mu.Unlock()
	}
	return out, err
}

// install puts the spy in front of c's backend (a setup mod).
func (s *spyBackend) install(c *Config) {
	s.Backend = c.Backend
	c.Backend = s
}

func (s *spyBackend) appended() []events.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]events.Event(nil), s.evs...)
}

// manualTimer is a Config.AfterFunc whose timer fires only when the test
// calls fire: the stall tests never race a clock.
type manualTimer struct {
	mu    sync.Mutex
	f     func()
	on    bool
	armed chan struct{} // a value each time the timer is (re)started
}

func newManualTimer() *manualTimer { return &manualTimer{armed: make(chan struct{}, 1)} }

func (m *manualTimer) afterFunc(_ time.Duration, f func()) Timer {
	m.mu.Lock()
	m.f = f
	m.mu.Unlock()
	m.Reset(0)
	return m
}

func (m *manualTimer) Stop() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	was := m.on
	m.on = false
	return was
}

func (m *manualTimer) Reset(time.Duration) bool {
	m.mu.Lock()
	was := m.on
	m.on = true
	m.mu.Unlock()
	select {
	case m.armed <- struct{}{}:
	default:
	}
	return was
}

// fire waits until the timer is running (the proxy waits for the
// upstream's next bytes), then fires it.
func (m *manualTimer) fire(t testing.TB) {
	t.Helper()
	for {
		m.mu.Lock()
		if m.on {
			m.on = false
			f := m.f
			m.mu.Unlock()
			f()
			return
		}
		m.mu.Unlock()
		receive(t, m.armed, "the proxy to wait for the upstream's next bytes")
	}
}

// streamShape is one API's stream: a request that the proxy processes,
// the events of an answer cut before its end (a text and a tool call),
// and the terminal events that would have completed it.
type streamShape struct {
	api  API
	path string
	body string
	// partial carries assistant content but not the event that says the
	// answer is whole.
	partial string
}

var streamShapes = []streamShape{
	{
		api: APIAnthropic, path: "/v1/messages",
		body: `{"model":"m","max_tokens":10,"stream":true,"tools":[{"name":"Read"}],"messages":[{"role":"user","content":"read a.go"}]}`,
		partial: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":120,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"I will read a.go\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_partial\",\"name\":\"Read\",\"input\":{}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\":\\\"a.go\\\"}\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
	},
	{
		api: APIOpenAIChat, path: "/v1/chat/completions",
		body: `{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"Read"}}],"messages":[{"role":"user","content":"read a.go"}]}`,
		partial: "data: {\"id\":\"chatcmpl-1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"I will read a.go\"},\"finish_reason\":null}]}\n\n" +
			"data: {\"id\":\"chatcmpl-1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_partial\",\"type\":\"function\",\"function\":{\"name\":\"Read\",\"arguments\":\"{\\\"path\\\":\\\"a.go\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
	},
	{
		api: APIOpenAIResponses, path: "/v1/responses",
		body: `{"model":"m","stream":true,"tools":[{"type":"function","name":"Read"}],"input":[{"role":"user","content":"read a.go"}]}`,
		partial: "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"model\":\"m\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
			"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"I will read a.go\"}]}}\n\n" +
			"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":{\"type\":\"function_call\",\"call_id\":\"call_partial\",\"name\":\"Read\",\"arguments\":\"{\\\"path\\\":\\\"a.go\\\"}\"}}\n\n",
	},
}

// streamUpstream sends the headers and chunks of an SSE answer, flushing
// each, then ends as end says: "cut" drops the connection mid-stream,
// "stall" sends nothing more until the test releases it (closing
// cancelled if the proxy gives up first), "clean" ends the body cleanly.
func streamUpstream(chunks []string, end string, release <-chan struct{}, cancelled chan<- struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for _, c := range chunks {
			_, _ = io.WriteString(w, c)
			fl.Flush()
		}
		switch end {
		case "cut":
			panic(http.ErrAbortHandler)
		case "stall":
			select {
			case <-r.Context().Done():
				close(cancelled)
			case <-release:
			}
		}
	})
}

// post sends the shape's request under session and returns the response.
func (s streamShape) post(t testing.TB, b *bench, session string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", b.url+s.path, strings.NewReader(s.body))
	testutil.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SessionHeader, session)
	resp, err := http.DefaultClient.Do(req)
	testutil.NoError(t, err)
	testutil.True(t, resp.StatusCode == 200, "status %d", resp.StatusCode)
	return resp
}

// closeProxy waits for the proxy's records (Close), so what they append
// is in the spy.
func closeProxy(t testing.TB, b *bench) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testutil.NoError(t, b.px.Close(ctx))
}

// requireNoAnswerRecorded waits for the proxy's records and fails if the
// answer became assistant items or the model request was not recorded.
func requireNoAnswerRecorded(t testing.TB, b *bench, spy *spyBackend) {
	t.Helper()
	closeProxy(t, b)
	items, request := assistantFacts(spy)
	testutil.True(t, len(items) == 0, "partial answer recorded as assistant items: %v", items)
	testutil.True(t, request, "the model request was not recorded")
}

// assistantFacts returns the assistant items the proxy appended, and
// whether it recorded the model request.
func assistantFacts(spy *spyBackend) (items []string, request bool) {
	for _, e := range spy.appended() {
		switch d := e.Data.(type) {
		case *events.ModelRequest:
			request = true
		case *events.Message:
			if d.Role == events.RoleAssistant {
				items = append(items, d.Item)
			}
		case *events.ToolCall:
			items = append(items, d.Item)
		}
	}
	return items, request
}

// TestBrokenStreamAborts: an upstream that drops the connection in the
// middle of a stream reaches the client as a broken stream (the bytes
// sent so far unchanged, then an unexpected EOF, never a clean end), and
// the partial answer is not recorded as the assistant's items (the model
// request is). Before, the client saw a clean end of a partial answer
// and its text and tool call were recorded.
func TestBrokenStreamAborts(t *testing.T) {
	t.Parallel()
	for _, s := range streamShapes {
		t.Run(string(s.api), func(t *testing.T) {
			t.Parallel()
			spy := &spyBackend{}
			b := setup(t, testPolicy(t), streamUpstream([]string{s.partial}, "cut", nil, nil), spy.install)
			session := "cut-" + string(s.api)
			resp := s.post(t, b, session)
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			testutil.True(t, errors.Is(err, io.ErrUnexpectedEOF), "client read: err %v, want unexpected EOF (a clean end hides the break)", err)
			testutil.True(t, string(got) == s.partial, "the client got other bytes than the upstream sent:\n%q\nwant\n%q", got, s.partial)
			requireNoAnswerRecorded(t, b, spy)
			logs := b.logs.String()
			testutil.True(t, strings.Contains(logs, "upstream response broke off") && strings.Contains(logs, "session="+session), "not logged with the session:\n%s", logs)
			testutil.True(t, strings.Contains(logs, "incomplete answer"), "incomplete record not logged:\n%s", logs)
			testutil.True(t, counter(t, b, "prunesched_proxy_upstream_errors_total", "kind", UpstreamKindStream) == 1, "broken stream not counted")
		})
	}
}

// TestStalledStreamAborts: an upstream that sends its headers and first
// events, then nothing, is cancelled by the stream idle timeout; the
// stall is logged with the session and counted, the client's stream is
// aborted, and the partial answer is not recorded. The timer is the
// test's: it fires once the proxy waits for bytes that never come.
// Before, there was no timeout: the client waited as long as the upstream
// held the connection, and nothing was logged.
func TestStalledStreamAborts(t *testing.T) {
	t.Parallel()
	for _, s := range streamShapes {
		t.Run(string(s.api), func(t *testing.T) {
			t.Parallel()
			spy := &spyBackend{}
			timer := newManualTimer()
			release, cancelled := make(chan struct{}), make(chan struct{})
			b := setup(t, testPolicy(t), streamUpstream([]string{s.partial}, "stall", release, cancelled), func(c *Config) {
				spy.install(c)
				c.AfterFunc = timer.afterFunc
			})
			// Before the upstream server closes (cleanups run last
			// first): it waits for its handlers.
			t.Cleanup(func() { close(release) })
			session := "stall-" + string(s.api)
			resp := s.post(t, b, session)
			defer resp.Body.Close()
			first := make([]byte, len(s.partial))
			_, err := io.ReadFull(resp.Body, first)
			testutil.NoError(t, err)
			testutil.True(t, string(first) == s.partial, "the client got other bytes than the upstream sent: %q", first)
			timer.fire(t)
			rest, err := io.ReadAll(resp.Body)
			testutil.True(t, errors.Is(err, io.ErrUnexpectedEOF), "client read after the stall: err %v, want unexpected EOF", err)
			testutil.True(t, len(rest) == 0, "bytes after the stall: %q", rest)
			receive(t, cancelled, "the upstream request to be cancelled")
			requireNoAnswerRecorded(t, b, spy)
			logs := b.logs.String()
			testutil.True(t, strings.Contains(logs, "upstream response stalled") && strings.Contains(logs, "session="+session), "stall not logged with the session:\n%s", logs)
			testutil.True(t, counter(t, b, "prunesched_proxy_upstream_errors_total", "kind", UpstreamKindIdle) == 1, "stall not counted")
			testutil.True(t, counter(t, b, "prunesched_proxy_upstream_errors_total", "kind", UpstreamKindStream) == 0, "stall counted as a broken stream")
		})
	}
}

// TestStreamIdleTimeoutRealTimer: the same stall with the default timer
// and a short idle timeout. It asserts only what is observed (the abort,
// the log), never how long it took.
func TestStreamIdleTimeoutRealTimer(t *testing.T) {
	t.Parallel()
	s := streamShapes[0]
	release, cancelled := make(chan struct{}), make(chan struct{})
	b := setup(t, testPolicy(t), streamUpstream([]string{s.partial}, "stall", release, cancelled), func(c *Config) {
		c.StreamIdleTimeout = 20 * time.Millisecond
	})
	t.Cleanup(func() { close(release) })
	resp := s.post(t, b, "stall-real")
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	testutil.True(t, errors.Is(err, io.ErrUnexpectedEOF), "client read: err %v, want unexpected EOF", err)
	testutil.True(t, strings.HasPrefix(s.partial, string(got)), "the client got bytes the upstream did not send: %q", got)
	receive(t, cancelled, "the upstream request to be cancelled")
	waitFor(t, "the stall to be logged", func() bool {
		return strings.Contains(b.logs.String(), "upstream response stalled") && strings.Contains(b.logs.String(), "session=stall-real")
	})
}

// TestStreamEndWithoutTerminal: an upstream that ends its body cleanly is
// relayed with a clean end (the proxy never changes how an answer ends),
// but only an answer whose terminal event arrived is recorded: an
// Anthropic stream ended by an error event, or a Responses stream ended
// by response.incomplete, is not; a Chat Completions stream with a
// finish_reason is whole even without [DONE].
func TestStreamEndWithoutTerminal(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		shape streamShape
		tail  string
		whole bool
	}{
		{"anthropic error event", streamShapes[0], "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", false},
		{"anthropic message_stop", streamShapes[0], "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":17}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", true},
		{"chat no finish_reason", streamShapes[1], "", false},
		{"chat finish_reason without DONE", streamShapes[1], "data: {\"id\":\"chatcmpl-1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n", true},
		{"responses incomplete", streamShapes[2], "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"id\":\"resp_1\",\"model\":\"m\",\"status\":\"incomplete\",\"output\":[]}}\n\n", false},
		{"responses completed", streamShapes[2], "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"model\":\"m\",\"status\":\"completed\",\"output\":[]}}\n\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spy := &spyBackend{}
			b := setup(t, testPolicy(t), streamUpstream([]string{tc.shape.partial, tc.tail}, "clean", nil, nil), spy.install)
			resp := tc.shape.post(t, b, "end-"+string(tc.shape.api))
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			testutil.NoError(t, err)
			testutil.True(t, string(got) == tc.shape.partial+tc.tail, "the client got other bytes than the upstream sent: %q", got)
			closeProxy(t, b)
			items, request := assistantFacts(spy)
			testutil.True(t, request, "the model request was not recorded")
			if tc.whole {
				testutil.True(t, len(items) == 2, "a whole answer's text and tool call not recorded: %v", items)
			} else {
				testutil.True(t, len(items) == 0, "an answer without its terminal event recorded as assistant items: %v", items)
			}
			testutil.True(t, counter(t, b, "prunesched_proxy_upstream_errors_total") == 0, "a clean end counted as an upstream error")
		})
	}
}

// TestPassthroughBrokenStreamAborts: a path the proxy only passes through
// is aborted the same way when its upstream body breaks off.
func TestPassthroughBrokenStreamAborts(t *testing.T) {
	t.Parallel()
	const sent = "data: {\"partial\":true}\n\n"
	b := setup(t, testPolicy(t), streamUpstream([]string{sent}, "cut", nil, nil), nil)
	resp, err := http.Get(b.url + "/v1/other")
	testutil.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	testutil.True(t, errors.Is(err, io.ErrUnexpectedEOF), "client read: err %v, want unexpected EOF", err)
	testutil.True(t, string(got) == sent, "got %q", got)
}

// TestStreamIdleDisabled: a negative StreamIdleTimeout starts no timer.
func TestStreamIdleDisabled(t *testing.T) {
	t.Parallel()
	p := &Proxy{cfg: Config{StreamIdleTimeout: -1, AfterFunc: func(time.Duration, func()) Timer {
		t.Fatal("a timer was started with the idle timeout disabled")
		return nil
	}}}
	w := p.watchIdle(context.Background())
	w.arm()
	w.disarm()
	w.done()
	testutil.True(t, !w.idled(), "idled without a timer")
}

// TestBrokenJSONAnswerAborts: a non-streamed answer whose body breaks off
// before its declared length is aborted too, and not recorded.
func TestBrokenJSONAnswerAborts(t *testing.T) {
	t.Parallel()
	const sent = `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"I will read a.go"}`
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "1000")
		_, _ = io.WriteString(w, sent)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	})
	spy := &spyBackend{}
	b := setup(t, testPolicy(t), up, spy.install)
	s := streamShapes[0]
	s.body = strings.Replace(s.body, `"stream":true`, `"stream":false`, 1)
	resp := s.post(t, b, "cut-json")
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	testutil.True(t, errors.Is(err, io.ErrUnexpectedEOF), "client read: err %v, want unexpected EOF", err)
	testutil.True(t, string(got) == sent, "got %q", got)
	requireNoAnswerRecorded(t, b, spy)
}
