package proxy

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/httplimit"
)

// Proxy is the HTTP proxy. Create it with New; serve Handler.
type Proxy struct {
	cfg      Config
	log      *slog.Logger
	met      *Metrics
	upstream *url.URL
	openai   *url.URL

	mu        sync.Mutex
	sessions  map[sessionKey]*sessState
	lastSweep time.Time

	// parses caches the parses of recent request bodies.
	parses parseCache

	// bg tracks the work that outlives its request (Close).
	bg background

	// exact takes the exact counts of payloads decided on estimates, in
	// the log writes after forwarding (exact.go).
	exact *exactCounter

	// spanSeed seeds the fingerprints of the span verdicts
	// (spanFingerprint), secret to clients.
	spanSeed maphash.Seed

	// tail follows the log in a fleet (fleettail.go); nil otherwise.
	tail *fleetTail
	// adv tracks the tail's advance loop (advanceLoop), which Close waits
	// for.
	adv sync.WaitGroup

	// recordGo starts a pending record's goroutine (record.go); nil: a
	// plain go statement. Tests set it to hold the goroutine back.
	recordGo func(func())
}

// background tracks the goroutines the proxy leaves running after a
// handler returns: a response's record, which goes on after the response
// ended, and appends that continue after the budget ran out. Close waits
// for them; after Close new work is not tracked (a record then finishes
// before its response ends, as before there was a background).
type background struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	// ctx is the parent of the tracked work's contexts; Close cancels it
	// when its own context ends first.
	ctx    context.Context
	cancel context.CancelFunc
}

// add counts one goroutine about to start; false after Close.
func (b *background) add() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	return true
}

// Close stops a fleet proxy's tail of the log and waits for the proxy's
// background work (records of responses already sent, appends past the
// budget) to finish. When ctx ends first
// the work is cancelled (a cancelled record fails and is counted in
// prunesched_proxy_record_failures_total) and Close waits for it to
// return, then returns ctx's error. Call it after the HTTP server stopped
// (http.Server.Shutdown), before the Backend closes.
func (p *Proxy) Close(ctx context.Context) error {
	p.tail.stop()
	p.adv.Wait()
	b := &p.bg
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		b.cancel()
		<-done
		return fmt.Errorf("proxy: close: background work cancelled: %w", ctx.Err())
	}
}

type sessionKey struct{ tenant, session string }

// sessState is what the proxy remembers of one session: the item ids the
// log holds (so a request's diff costs a map lookup per block) and the
// occurrence counts of texts. mu serialises the session's requests while
// they append and decide.
type sessState struct {
	mu      sync.Mutex
	loaded  bool
	known   map[string]struct{}
	counts  map[string]int // text item id prefix -> occurrences in the log
	lastSeq uint64         // last fact seq the proxy appended or saw
	// logged are the array blocks of the last request appendNew handled,
	// all known: a request sharing them (the parse cache) skips their
	// lookups.
	logged []*block
	// lastUse is when a request last took the state (under Proxy.mu).
	lastUse time.Time
	// answers caches the recorded answers of context-tool results by
	// item (see agent.go), spliced over the stub the client resends.
	answers map[string]string
	// spans keeps, by item, whether the span references of a pruned tool
	// result applied to the client's bytes last time, and where their runs
	// sit (spansplice.go): a request resending the same bytes does not
	// hash the runs again. Dropped with the state.
	spans map[string]spanVerdict
	// mem is the session's state in memory when the proxy decides there
	// (inmem.go); nil otherwise.
	mem *memState
	// q orders the session's log writes after forwarding (inmem.go).
	q writeQueue
	// body holds the outputs of the request holding mu (bodyoutputs.go).
	body *bodyOutputs
	// pending is a response's record that let go of mu before it ran
	// (record.go); whoever takes mu next runs it first (lock). Only
	// set while mu is free.
	pending func()
	// advancing is set while an advance between requests holds mu
	// (fleet.go, advance): a request arriving then still starts its early
	// read of the log (startEarlyRead).
	advancing atomic.Bool
	// again is an advance that gave way to the session's holder (its
	// lock, or a queued write) and is to run once the holder lets go
	// (fleet.go, freed); nil when none waits.
	again atomic.Pointer[advanceAgain]
}

// Bounds of the proxy's per-session memory. The state is a cache of the
// log (a session taken again after eviction reloads from it): states idle
// longer than Config.SessionIdle are dropped, checked at most once per
// sweepEvery (once a second while there are more than maxSessions).
const (
	maxSessions = 4096
	sweepEvery  = time.Minute
)

// New returns a proxy for cfg.
func New(cfg Config) (*Proxy, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.IdentityKey == nil {
		k, err := NewIdentityKey()
		if err != nil {
			return nil, fmt.Errorf("proxy: %w", err)
		}
		cfg.IdentityKey = k
	} else {
		cfg.IdentityKey = append([]byte(nil), cfg.IdentityKey...)
	}
	up, _ := parseUpstream("Upstream", cfg.Upstream, true)
	oa, _ := parseUpstream("OpenAIUpstream", cfg.OpenAIUpstream, false)
	if oa == nil {
		oa = up
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger, upstream: up, openai: oa, sessions: map[sessionKey]*sessState{}, exact: newExactCounter(), spanSeed: maphash.MakeSeed()}
	p.bg.ctx, p.bg.cancel = context.WithCancel(context.Background())
	if cfg.Registry != nil {
		p.met = NewMetrics(cfg.Registry)
	}
	p.tail = p.startTail()
	return p, nil
}

// Handler returns the proxy's routes: the three model APIs are processed,
// every other path (count_tokens, models, ...) is passed through untouched.
func (p *Proxy) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", p.serveAPI(APIAnthropic))
	mux.HandleFunc("POST /v1/chat/completions", p.serveAPI(APIOpenAIChat))
	mux.HandleFunc("POST /chat/completions", p.serveAPI(APIOpenAIChat))
	mux.HandleFunc("POST /v1/responses", p.serveAPI(APIOpenAIResponses))
	mux.HandleFunc("POST /responses", p.serveAPI(APIOpenAIResponses))
	mux.HandleFunc("/", p.passthrough)
	return mux
}

// plan is one request's trip through prunesched.
type plan struct {
	api     API
	tenant  string
	session string
	source  string
	req     string
	at      time.Time
	conv    *conversation
	st      *sessState
	// body is the rewritten request; nil when nothing changed.
	body []byte
	// rendered is true when the scheduler decided this request and its
	// decision is what goes upstream.
	rendered bool
	app      *events.Event
	replaced int
	// saved is the tokens the replaced blocks' placeholders keep out of
	// this request (payload minus placeholder).
	saved int
	// write is the request's queued log write when it was decided in
	// memory (inmem.go); settle says whether its decision went upstream.
	write *logWrite
	// confirm, when not nil, waits for the read of the session's last
	// fact the request was decided before (fleet.go, decideBeforeRead)
	// and says whether it may go as decided (errNotCurrent: decide it
	// again).
	confirm func() error
}

var errBudget = errors.New("time budget exceeded")

// stageError names the fail-open stage of an error.
type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string { return e.stage + ": " + e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

func staged(stage string, err error) error { return &stageError{stage: stage, err: err} }

func (p *Proxy) serveAPI(api API) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		at := p.cfg.Now()
		// The work left for after the response starts once the response
		// is written whole (sent.go); deferred first, so it runs last.
		sent := newAfterSent(r)
		defer sent.done()
		// The answer may take minutes (generation): the server's write
		// timeout is replaced by one per write (copyResponse).
		httplimit.StreamWrite(w, 0)
		// In a fleet the log is asked for the session's last fact while
		// the body is read and parsed (earlyRead).
		// A session it holds no current state of is built meanwhile
		// (earlyBuild), which waits for the parsed body at the first
		// output it reads: a body that will not be parsed says so at
		// once (give).
		early := p.startEarlyRead(r.Context(), r.Header)
		defer early.give(nil)
		readStart := time.Now()
		rb, over, err := httplimit.ReadBodyOrStream(w, r, p.cfg.Bodies, p.cfg.MaxBodyBytes)
		p.met.stage(api, StageRead, readStart)
		if over != nil || err != nil {
			early.give(nil)
		}
		if over != nil {
			p.forwardOver(w, r, api, over)
			return
		}
		if err != nil {
			// The client's body could not be read whole: there is nothing
			// to forward. Answer as the upstream would.
			p.met.failedOpen(StageRead)
			p.log.Warn("proxy: read request body", "api", api, "err", err)
			switch code := httplimit.Status(err); code {
			case http.StatusRequestEntityTooLarge:
				writeAPIError(w, api, code, "request_too_large", "prunesched proxy: "+err.Error())
			case http.StatusServiceUnavailable:
				w.Header().Set("Retry-After", "1")
				writeAPIError(w, api, code, "overloaded_error", "prunesched proxy: "+err.Error())
			case http.StatusRequestTimeout:
				w.Header().Set("Connection", "close")
				writeAPIError(w, api, code, "invalid_request_error", "prunesched proxy: "+err.Error())
			default:
				writeAPIError(w, api, http.StatusBadRequest, "invalid_request_error", "could not read the request body")
			}
			return
		}
		// The body's bytes stay in the in-flight budget until the request
		// has gone upstream and the work on it (which may go on in the
		// background past the time budget) has ended. The hold keeps the
		// reservation, not the bytes: once forwarded, the body is garbage
		// while a background append goes on with what it decoded from it
		// (which the reservation stands for).
		raw := rb.Bytes
		rb.Bytes = nil
		hold := newHold(rb.Release)
		released := false
		release := func() {
			if !released {
				released = true
				hold.done()
			}
		}
		defer release()
		out := raw
		var pl *plan
		outcome := "passthrough"
		body, encoded, err := decodeBody(raw, r.Header.Get("Content-Encoding"), p.bodyLimit())
		if err != nil {
			early.give(nil)
			p.failOpen(api, StageDecode, err)
			outcome = "fail_open"
		} else {
			pl, err = p.budgeted(r.Context(), api, r.Header, body, at, hold, early)
			switch {
			case err != nil:
				var se *stageError
				stage := StagePanic
				if errors.As(err, &se) {
					stage = se.stage
				}
				p.failOpen(api, stage, err)
				outcome = "fail_open"
				pl = nil
			case pl != nil:
				outcome = "rendered"
				if pl.body != nil {
					out = pl.body
					encoded = false
				}
			}
		}
		p.met.addedLatency(api, p.cfg.Now().Sub(at).Seconds())
		p.met.request(api, outcome)
		p.logRequest(api, pl, outcome)
		modified := pl != nil && pl.body != nil
		// The upstream request ends when the client leaves, or when its
		// response body stalls (StreamIdleTimeout).
		idle := p.watchIdle(r.Context())
		defer idle.done()
		ur := r.WithContext(idle.ctx)
		resp, err := p.forward(ur, api, out, modified || !encoded, pl.forwarded)
		if err == nil && modified && resp.StatusCode == http.StatusBadRequest {
			// The upstream refused the rewritten body: whatever the reason,
			// the agent must not see an error the proxy caused. Resend the
			// original.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			p.failOpen(api, StageUpstreamRejected, errors.New("upstream answered 400 to the rewritten request"))
			pl.rendered = false
			resp, err = p.forward(ur, api, raw, false, nil)
		}
		// The request is forwarded: its facts (decided in memory) go to
		// the log now, with its application if it went as decided, which
		// is checked against the log once the response has ended.
		defer sent.later(pl.responded)
		pl.settle(pl != nil && pl.rendered)
		if err != nil {
			p.upstreamFailed(w, r, api, err)
			return
		}
		defer resp.Body.Close()
		// The request body is sent: its bytes leave the in-flight budget
		// (the plan may keep a few of them; the response is streamed).
		release()
		if resp.StatusCode/100 == 5 {
			p.met.upstreamError(UpstreamKind5xx)
		}
		var cap *capture
		if pl != nil && resp.StatusCode/100 == 2 {
			cap = newCapture(api, isSSE(resp.Header))
		}
		recorded := false
		rec := func() {
			if !recorded {
				recorded = true
				p.record(pl, cap, sent.later)
			}
		}
		err = copyResponse(w, resp, cap, rec, p.cfg.WriteTimeout, idle)
		if cap != nil {
			rec()
		}
		session := ""
		if pl != nil {
			session = pl.session
		}
		p.streamBroke(r, api, session, idle, err)
		abortIfBroken(err)
	}
}

// abortIfBroken aborts the client's response when the upstream body did
// not end cleanly (it broke off, or stalled past the idle timeout): the
// client must see a broken stream, as it would without the proxy, never a
// clean end of a partial answer. A handler that returns ends a chunked
// response cleanly; panicking with http.ErrAbortHandler makes the server
// drop the connection (HTTP/1: no final chunk, so the client reads an
// unexpected EOF; HTTP/2: the stream is reset) without logging a stack.
// Every byte the upstream sent has been relayed before.
func abortIfBroken(err error) {
	if err != nil {
		panic(http.ErrAbortHandler)
	}
}

// upstreamFailed answers a request the upstream gave no response for. A
// client that went away is neither answered nor counted: its own cancel
// is not an upstream error.
func (p *Proxy) upstreamFailed(w http.ResponseWriter, r *http.Request, api API, err error) {
	if r.Context().Err() != nil {
		p.log.Debug("proxy: client went away before the upstream answered", "api", api, "path", r.URL.Path)
		return
	}
	kind := UpstreamKindUnreachable
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		kind = UpstreamKindTimeout
	}
	p.met.upstreamError(kind)
	p.log.Warn("proxy: upstream failed", "api", api, "path", r.URL.Path, "kind", kind, "err", err)
	writeAPIError(w, api, http.StatusBadGateway, "api_error", "prunesched proxy: upstream "+kind)
}

// streamBroke logs and counts an upstream body that broke off, or that
// idle cancelled because it stalled, while the client was still reading.
// session is the request's session, empty when the proxy did not process
// it.
func (p *Proxy) streamBroke(r *http.Request, api API, session string, idle *idleWatch, err error) {
	if err == nil {
		return
	}
	if idle.idled() {
		p.met.upstreamError(UpstreamKindIdle)
		p.log.Warn("proxy: upstream response stalled: no bytes within the stream idle timeout; upstream request cancelled, client's response aborted",
			"api", api, "path", r.URL.Path, "session", session, "timeout", idle.d)
		return
	}
	if r.Context().Err() != nil {
		return
	}
	p.met.upstreamError(UpstreamKindStream)
	p.log.Warn("proxy: upstream response broke off; client's response aborted", "api", api, "path", r.URL.Path, "session", session, "err", err)
}

// failOpen logs and counts a failure that sent the original upstream.
// logRequest is the one line per agent request: its session, what the
// request carries pruned and what that keeps out of it, and the
// application decided for it (a failed-open request has its own warning
// from failOpen).
func (p *Proxy) logRequest(api API, pl *plan, outcome string) {
	if pl == nil {
		if outcome == "passthrough" {
			p.log.Debug("proxy: request passed through (not an agent turn)", "api", api)
		}
		return
	}
	args := []any{"api", api, "session", pl.session, "pruned_blocks", pl.replaced, "tokens_kept_out", pl.saved}
	if pl.app != nil {
		if a, ok := pl.app.Data.(*events.Application); ok {
			args = append(args, "applied_now", len(a.Items), "trigger", a.Trigger, "cache_break_usd", a.CacheCost, "expected_saving_usd", a.ExpectedSaving)
		}
	}
	p.log.Info("proxy: request", args...)
}

func (p *Proxy) failOpen(api API, stage string, err error) {
	p.met.failedOpen(stage)
	p.log.Warn("proxy: failing open, original request forwarded", "api", api, "stage", stage, "err", err)
}

// budgeted runs process with the time budget. On timeout the work
// continues in the background (facts keep being appended so the log stays
// complete) but it no longer decides: the request goes out unchanged.
func (p *Proxy) budgeted(ctx context.Context, api API, h http.Header, body []byte, at time.Time, hold *hold, early *earlyRead) (*plan, error) {
	type result struct {
		pl  *plan
		err error
	}
	done := make(chan result, 1)
	var abandoned atomic.Bool
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.RecordTimeout)
	decideCtx, cancelDecide := context.WithDeadline(bg, at.Add(p.cfg.Budget))
	// The work may outlive the request (past the budget): Close waits
	// for it, or cancels it.
	tracked := p.bg.add()
	stopOnClose := context.AfterFunc(p.bg.ctx, cancel)
	hold.add()
	go func() {
		defer hold.done()
		if tracked {
			defer p.bg.wg.Done()
		}
		defer stopOnClose()
		defer cancel()
		defer cancelDecide()
		defer func() {
			if v := recover(); v != nil {
				done <- result{err: staged(StagePanic, fmt.Errorf("%v", v))}
			}
		}()
		pl, err := p.process(bg, decideCtx, api, h.Clone(), body, at, &abandoned, early)
		done <- result{pl, err}
	}()
	wait := time.Until(at.Add(p.cfg.Budget))
	t := time.NewTimer(max(wait, 0))
	defer t.Stop()
	select {
	case r := <-done:
		return r.pl, r.err
	case <-t.C:
		abandoned.Store(true)
		cancelDecide()
		// A result that raced the timer is still usable.
		select {
		case r := <-done:
			return r.pl, r.err
		default:
		}
		// A plan decided too late did not go upstream: its facts are
		// written, its decision is not.
		go func() { (<-done).pl.settle(false) }()
		return nil, staged(StageTimeout, errBudget)
	}
}

// decodeBody undoes a gzip content encoding. It reports whether the body
// was encoded; other encodings are an error (fail open), and so is a body
// that decodes to more than limit bytes (limit <= 0: no limit): the
// decoded copy is held beside the encoded one, so it is held to the limit
// of a body.
func decodeBody(raw []byte, enc string, limit int64) ([]byte, bool, error) {
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "", "identity":
		return raw, false, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, true, fmt.Errorf("gzip body: %w", err)
		}
		var src io.Reader = zr
		if limit > 0 {
			src = io.LimitReader(zr, limit+1)
		}
		b, err := io.ReadAll(src)
		if err != nil {
			return nil, true, fmt.Errorf("gzip body: %w", err)
		}
		if limit > 0 && int64(len(b)) > limit {
			return nil, true, fmt.Errorf("gzip body: decodes to over the %d-byte body limit (%s)", limit, httplimit.FormatBytes(limit))
		}
		return b, true, nil
	}
	return nil, true, fmt.Errorf("content-encoding %q not supported", enc)
}

// bodyLimit is the most a request body may be for the proxy to read it:
// the per-request maximum, or the whole in-flight budget when smaller.
func (p *Proxy) bodyLimit() int64 {
	limit := p.cfg.MaxBodyBytes
	if m := p.cfg.Bodies.Max(); m > 0 && (limit <= 0 || m < limit) {
		limit = m
	}
	return limit
}

// forwardOver fails open for a body over the body limit: it goes upstream
// unchanged as a stream (the part already read, then the rest as it
// arrives), never buffered beyond the limit, and nothing is recorded.
func (p *Proxy) forwardOver(w http.ResponseWriter, r *http.Request, api API, over *httplimit.Over) {
	defer over.Release()
	p.failOpen(api, StageRead, fmt.Errorf("request body over the %s of %d bytes (%s): forwarded unchanged as a stream, not recorded", over.What, over.Limit, httplimit.FormatBytes(over.Limit)))
	p.met.request(api, "fail_open")
	p.relay(w, r, api, api, over.Reader(), over.Release)
}

// hold counts the holders of a request body's bytes and gives them back to
// the in-flight budget when the last one is done: the request (once sent
// upstream) and the prunesched work on it (which may outlive the request).
type hold struct {
	n       atomic.Int32
	release func()
}

// newHold returns a hold with one holder (the request).
func newHold(release func()) *hold {
	h := &hold{release: release}
	h.n.Store(1)
	return h
}

// add adds a holder.
func (h *hold) add() { h.n.Add(1) }

// done drops a holder; the last one releases the bytes.
func (h *hold) done() {
	if h.n.Add(-1) == 0 {
		h.release()
	}
}

// hopHeaders are not forwarded in either direction.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// upstreamURL joins the upstream base with the request path; a base ending
// in /v1 does not double it.
func upstreamURL(base *url.URL, r *http.Request) string {
	u := *base
	path := r.URL.Path
	bp := strings.TrimSuffix(u.Path, "/")
	if strings.HasSuffix(bp, "/v1") && strings.HasPrefix(path, "/v1/") {
		path = strings.TrimPrefix(path, "/v1")
	}
	u.Path = bp + path
	u.RawPath = ""
	u.RawQuery = r.URL.RawQuery
	return u.String()
}

func (p *Proxy) baseFor(api API, path string) *url.URL {
	switch api {
	case APIOpenAIChat, APIOpenAIResponses:
		return p.openai
	}
	for _, pre := range []string{"/v1/chat/", "/v1/responses", "/v1/completions", "/v1/embeddings", "/chat/", "/responses"} {
		if strings.HasPrefix(path, pre) {
			return p.openai
		}
	}
	return p.upstream
}

// forward sends body upstream with the client's headers (hop-by-hop and
// X-Prunesched-* removed). When plain is true the body goes without the
// client's Content-Encoding (it was decoded or rewritten). wrote (nil:
// none) runs once the request is written, before the answer comes.
func (p *Proxy) forward(r *http.Request, api API, body []byte, plain bool, wrote func()) (*http.Response, error) {
	ctx := r.Context()
	if wrote != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote() }})
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, upstreamURL(p.baseFor(api, r.URL.Path), r), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build upstream request: %w", err)
	}
	req.Header = upstreamHeaders(r.Header)
	if plain {
		req.Header.Del("Content-Encoding")
	}
	req.ContentLength = int64(len(body))
	return p.cfg.Client.Do(req)
}

func upstreamHeaders(in http.Header) http.Header {
	h := in.Clone()
	for _, k := range hopHeaders {
		h.Del(k)
	}
	h.Del(TenantHeader)
	h.Del(SessionHeader)
	h.Del("Content-Length")
	// The transport asks for gzip and decodes it, so the response can be
	// read for usage; the client gets the same bytes uncompressed.
	h.Del("Accept-Encoding")
	return h
}

// passthrough forwards any other request (count_tokens, models, ...) as is.
func (p *Proxy) passthrough(w http.ResponseWriter, r *http.Request) {
	httplimit.StreamWrite(w, 0)
	p.relay(w, r, "", APIAnthropic, r.Body, func() {})
}

// relay sends r upstream (the upstream of api) with body as it is,
// streamed, and streams the answer back; errors are answered in errAPI's
// shape. sent runs once the request has gone upstream.
func (p *Proxy) relay(w http.ResponseWriter, r *http.Request, api, errAPI API, body io.Reader, sent func()) {
	idle := p.watchIdle(r.Context())
	defer idle.done()
	req, err := http.NewRequestWithContext(idle.ctx, r.Method, upstreamURL(p.baseFor(api, r.URL.Path), r), body)
	if err != nil {
		writeAPIError(w, errAPI, http.StatusBadGateway, "api_error", "prunesched proxy: bad upstream request")
		return
	}
	req.Header = upstreamHeaders(r.Header)
	req.ContentLength = r.ContentLength
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		p.upstreamFailed(w, r, errAPI, err)
		return
	}
	defer resp.Body.Close()
	sent()
	if resp.StatusCode/100 == 5 {
		p.met.upstreamError(UpstreamKind5xx)
	}
	// The body has been sent: the read timeout no longer applies.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	err = copyResponse(w, resp, nil, nil, p.cfg.WriteTimeout, idle)
	p.streamBroke(r, api, "", idle, err)
	abortIfBroken(err)
}

// copyResponse streams resp to w unchanged (status, headers, body),
// flushing as bytes arrive, and feeds cap until beforeEnd ran (then cap
// belongs to the record, which may run in the background, and is not
// touched again). With cap, beforeEnd runs once
// before the end of the response can reach the client: before the bytes
// that carry the stream's last event (cap.terminal), or, for a body that
// is not an event stream, before its last bytes (held back one read, which
// costs nothing: a JSON body is useless until whole); and at the latest
// when the upstream body ends. It returns the error that broke off the
// upstream body (nil at its end or when the client went away). Every write
// to the client must finish within writeTimeout (a client that stops
// reading is cut off; one that reads a long stream is not). idle (nil:
// none) bounds each wait for the upstream body's next bytes.
func copyResponse(w http.ResponseWriter, resp *http.Response, cap *capture, beforeEnd func(), writeTimeout time.Duration, idle *idleWatch) error {
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = append([]string(nil), vs...)
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	if resp.Uncompressed || resp.ContentLength < 0 {
		h.Del("Content-Length")
	} else {
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	fl, _ := w.(http.Flusher)
	ended := false
	end := func() {
		if !ended && cap != nil && beforeEnd != nil {
			ended = true
			beforeEnd()
		}
	}
	write := func(b []byte) bool {
		if len(b) == 0 {
			return true
		}
		httplimit.StreamWrite(w, writeTimeout)
		if _, err := w.Write(b); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	holdLast := cap != nil && !cap.sse
	buf := make([]byte, 32<<10)
	var held []byte
	if holdLast {
		held = make([]byte, 0, 32<<10)
	}
	for {
		idle.arm()
		n, err := resp.Body.Read(buf)
		idle.disarm()
		if n > 0 {
			chunk := buf[:n]
			if cap != nil && !ended {
				// Once the record started, the capture belongs to it
				// (it runs in the background): bytes after the last
				// event are not read.
				cap.write(chunk)
			}
			if holdLast {
				if !write(held) {
					return nil
				}
				held = append(held[:0], chunk...)
			} else {
				if cap != nil && !ended && cap.terminal {
					end()
				}
				if !write(chunk) {
					return nil
				}
			}
		}
		if err != nil {
			if cap != nil && !ended && errors.Is(err, io.EOF) {
				cap.eof = true
			}
			end()
			write(held)
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// writeAPIError answers in the API's error shape. It is only used when
// there is no upstream answer to pass on.
func writeAPIError(w http.ResponseWriter, api API, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if api == APIAnthropic {
		fmt.Fprintf(w, `{"type":"error","error":{"type":%s,"message":%s}}`, quote(typ), quote(msg))
		return
	}
	fmt.Fprintf(w, `{"error":{"type":%s,"message":%s}}`, quote(typ), quote(msg))
}

func isSSE(h http.Header) bool {
	return strings.HasPrefix(strings.ToLower(h.Get("Content-Type")), "text/event-stream")
}
