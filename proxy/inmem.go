package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/decide"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// Deciding in memory (issue 28). The proxy keeps each session's state in
// memory: both production cores (eligibility and scheduler, run as the
// workers run them, package decide) and a projection of the session, fed
// the same events in the same order as the log will hold them. A request
// is decided from that state, on its own facts, and forwarded at once; its
// facts go to the log after forwarding, through the session's write queue
// (writeQueue), in order with the answer's record. The log stays the
// source of truth: the queue then asks the pipeline to decide the same
// request from the log (SchedulerWorker.DecideLiveAfter, which publishes
// the application), and checks that it is byte for byte the application
// the proxy sent; any difference, failed write or decision not sent drops
// the in-memory state, which the session's next request rebuilds from the
// log (after the queue drained).

// logBackend is what a Backend offers for deciding in memory: the
// session's log and the token counter Append uses. service.ProxyBackend
// implements it; a Backend without it decides through the pipeline.
type logBackend interface {
	// ReadSession returns the session's events in log order.
	ReadSession(ctx context.Context, tenant, session string) ([]events.Event, error)
	// Tokens is the counter Append fills token counts with.
	Tokens() events.TokenCounter
	// PutBlob stores a payload by content address (an output appended as
	// its reference, its count estimated).
	PutBlob(ctx context.Context, hash string, data []byte) error
}

// factCounter is a Backend that can say how many facts of a session the
// pipeline holds through a stream sequence (service.ProxyBackend).
type factCounter interface {
	SessionFacts(tenant, session string, lastFact uint64) (int, bool)
}

// memState is a session's state in memory: the cores and the projection.
type memState struct {
	cores *decide.Session
	proj  *projections.Session
	// open says the last fact fed opens a request whose record (its model
	// request, the assistant's answer) has not followed yet: in a fleet,
	// another request of the session is in flight (fleet.go, rule 2).
	open bool
	// contentErr is the first failure of the cores to read a stored
	// output (noteContent); the state then no longer decides as the log
	// does (sessState.contentFailed).
	contentErr error
}

// noteContent keeps the first failure of the cores to read a stored
// output (decide.Session.ContentErr). The eligibility core then judged
// the output as if it were not stored, which the log does not say: the
// pipeline's worker judges such a fact again, and the proxy drops the
// state and rebuilds it (sessState.contentFailed) instead of deciding on
// it.
func (m *memState) noteContent() {
	if err := m.cores.ContentErr(); err != nil && m.contentErr == nil {
		m.contentErr = err
	}
}

// contentFailed marks the state stale and returns an error when its cores
// failed to read a stored output (memState.noteContent): the session's
// next load rebuilds it from the log, and nothing is decided on it (a
// request fails open). Caller holds st.mu.
func (st *sessState) contentFailed() error {
	if st.mem == nil {
		return nil
	}
	st.mem.noteContent()
	if st.mem.contentErr == nil {
		return nil
	}
	st.q.markStale()
	return fmt.Errorf("session state dropped: %w", st.mem.contentErr)
}

// inMemory returns the backend's log access when the proxy decides in
// memory.
func (p *Proxy) inMemory() (logBackend, bool) {
	if p.cfg.LogFirst {
		return nil, false
	}
	lb, ok := p.cfg.Backend.(logBackend)
	return lb, ok
}

// view runs fn on the session's projection: the in-memory one when the
// proxy decides in memory, else the pipeline's. Caller holds st.mu.
func (p *Proxy) view(pl *plan, fn func(*projections.Session)) bool {
	if m := pl.st.mem; m != nil {
		fn(m.proj)
		return true
	}
	return p.cfg.Backend.View(pl.tenant, pl.session, fn)
}

// newMem returns the empty in-memory state of a session.
func (p *Proxy) newMem(tenant, session string, st *sessState) *memState {
	var content func(string) (io.ReadCloser, error)
	if p.cfg.Policy.Eligibility.SpanRefsEnabled() {
		// Span references compare the lines of stored reads: the outputs
		// still in the write queue first (read where they lie), then the
		// request's own (bodyOutputs), then the log's.
		content = func(h string) (io.ReadCloser, error) {
			if s, ok := st.q.blob(h); ok {
				return io.NopCloser(strings.NewReader(s)), nil
			}
			if s, ok := st.body.output(h); ok {
				return io.NopCloser(strings.NewReader(s)), nil
			}
			b, err := p.cfg.Backend.Blob(p.bg.ctx, h)
			if err != nil {
				return nil, fmt.Errorf("span references: output %s: %w", h, err)
			}
			return io.NopCloser(bytes.NewReader(b)), nil
		}
	}
	return &memState{cores: decide.NewSession(*p.cfg.Policy, tenant, session, content), proj: projections.NewSession(tenant, session)}
}

// loadMem builds the session's in-memory state from the log, the
// session's events as read returns them (logBackend.ReadSession; in a
// fleet, rebuild's): every fact through both cores, with the applications
// the log holds fed at the positions they were decided at (as the
// scheduler worker rebuilds), and the projection fed the facts, the
// cores' marks and the applications. Caller holds st.mu; the session's
// write queue is empty.
func (p *Proxy) loadMem(ctx context.Context, read func(ctx context.Context, tenant, session string) ([]events.Event, error), tenant, session string, st *sessState) error {
	evs, err := read(ctx, tenant, session)
	if err != nil {
		return fmt.Errorf("load session %s: %w", session, err)
	}
	p.met.sessionLoaded()
	p.fillMem(tenant, session, st, evs)
	return nil
}

// fillMem builds the session's in-memory state from its events in log
// order, as loadMem reads them. Caller holds st.mu; the session's write
// queue is empty.
func (p *Proxy) fillMem(tenant, session string, st *sessState, evs []events.Event) {
	m, last := p.buildMem(tenant, session, st, evs)
	st.install(m, last)
}

// buildMem feeds a new in-memory state of the session its events in log
// order (fillMem), and returns it with the stream sequence of its last
// fact, without installing it: it changes nothing in st (a warm start
// builds it while the log is asked whether it may). Caller holds st.mu.
func (p *Proxy) buildMem(tenant, session string, st *sessState, evs []events.Event) (*memState, uint64) {
	m := p.newMem(tenant, session, st)
	var last uint64
	scheduler.Replay(evs, 0, scheduler.Replayer{
		Application: m.observeApp,
		Fact: func(e events.Event) {
			m.feed(e)
			last = max(last, e.Seq)
		},
	})
	return m, last
}

// install makes m, fed the session's events through its last fact last
// (buildMem), the session's state. Caller holds st.mu; the session's
// write queue is empty.
func (st *sessState) install(m *memState, last uint64) {
	clear(st.known)
	clear(st.counts)
	for _, it := range m.proj.Items() {
		st.remember(it.ID)
	}
	st.mem = m
	st.logged = nil
	st.lastSeq = last
	st.q.reset(last)
	st.loaded = true
}

// feed feeds the session's next fact (in stored form) to the cores and the
// projection, with the marks it causes and the application decided at it
// (a model request the log holds no application for, as a rebuilding
// worker decides it).
func (m *memState) feed(fact events.Event) {
	m.open = opensRequest(fact)
	marks, app := m.cores.Feed(fact)
	m.noteContent()
	if app != nil {
		m.proj.Observe(*app)
	}
	m.proj.Observe(fact)
	for _, mk := range marks {
		m.proj.Observe(mk)
	}
}

// observeApp feeds an application decided at the cores' position.
func (m *memState) observeApp(app events.Event) {
	m.cores.ObserveApplication(app)
	m.proj.Observe(app)
}

// decide decides request req at time at on the session's facts so far,
// and applies it to the projection.
func (m *memState) decide(at time.Time, req string) *events.Event {
	app := m.cores.Decide(at, req)
	if app != nil {
		m.proj.Observe(*app)
	}
	return app
}

// exactBelow is the size up to which new text is counted exactly before
// deciding (about 0.2 ms at the tokenizer's ~0.7 µs per byte here); a
// larger payload the counter has not seen gets events.EstimateTokens
// unless Config.ExactCounts.
const exactBelow = 256

// knownCounter is a token counter that can say, without counting, whether
// it remembers a payload's count by content address (tokens.Counter).
type knownCounter interface {
	Known(hash string) (int, bool)
}

// counts is how a fact's token counts are taken before deciding.
type counts struct {
	tc    events.TokenCounter
	exact bool // Config.ExactCounts
}

// text counts a new text: exactly when small or asked, else the bytes/4
// estimate (estimated says so). Whatever it returns is the count the fact
// records, so the log decides as the proxy did.
func (c counts) text(s string) (n int, estimated bool) {
	if c.exact || len(s) <= exactBelow {
		return c.tc.Count(s), false
	}
	return events.EstimateTokens(len(s)), true
}

// content counts a payload known by content address: its remembered count
// when the counter has one (a re-read, a repeated output), else as text.
// estimated says the estimate was taken.
func (c counts) content(h, s string) (n int, estimated bool) {
	if kc, ok := c.tc.(knownCounter); ok {
		if n, ok := kc.Known(h); ok {
			return n, false
		}
	}
	if c.exact || len(s) <= exactBelow {
		if cc, ok := c.tc.(events.ContentCounter); ok {
			return cc.CountContent(h, s), false
		}
		return c.tc.Count(s), false
	}
	return events.EstimateTokens(len(s)), true
}

// prepareMem returns fact in the form the log will store it, with the
// token counts the in-memory cores decide on, and the input form to
// append, which carries the same counts so that Append does not count
// again (an estimated output goes as its content reference, its blob put
// by the write). A tool output is kept in the write queue until it is in
// the log (span references may read it meanwhile), as the string it was
// decoded to: hashed and stored from there, never copied whole. est is
// the output's content address when its count was estimated; inexact
// says the fact's count (an output's, a text's) is an estimate, whose
// exact count the write takes after forwarding (countExact).
func prepareMem(ev events.Event, c counts, q *writeQueue) (stored, input events.Event, est string, inexact bool, err error) {
	stored, input = ev, ev
	switch d := ev.Data.(type) {
	case *events.Message:
		if d.Tokens == 0 && d.Text != "" {
			cp := *d
			cp.Tokens, inexact = c.text(d.Text)
			stored.Data, input.Data = &cp, &cp
		}
	case *events.ToolCall:
		if d.InputTokens == 0 && len(d.Input) > 0 {
			cp := *d
			cp.InputTokens, inexact = c.text(string(d.Input))
			stored.Data, input.Data = &cp, &cp
		}
	case *events.ToolResult:
		if d.Output != nil {
			data := *d.Output
			h := events.HashString(data)
			n, estimated := c.content(h, data)
			cp := *d
			cp.OutputRef = &events.ContentRef{Hash: h, Bytes: len(data), Tokens: n}
			cp.Output = nil
			stored.Data = &cp
			if estimated {
				input.Data, est, inexact = &cp, h, true
			}
			q.keepBlob(h, data)
		}
	}
	// What the log's readers decode, exactly (times, empty fields).
	b, err := events.EncodeValidated(stored)
	if err != nil {
		return stored, input, "", false, fmt.Errorf("fact %s: %w", ev.ID, err)
	}
	stored, err = events.Decode(b)
	if err != nil {
		return stored, input, "", false, fmt.Errorf("fact %s: %w", ev.ID, err)
	}
	return stored, input, est, inexact, nil
}

// writeQueue orders a session's log writes (the facts of a request after
// it is forwarded, the record of its answer) in the order the in-memory
// state took them. Each write runs once the one before it finished.
type writeQueue struct {
	mu sync.Mutex
	// tail is closed when the last queued write finished (nil: none).
	tail chan struct{}
	// stale says the in-memory state no longer matches what the log will
	// hold (a write failed, a decision was not sent or differed): the
	// next request rebuilds it from the log.
	stale bool
	// lastSeq is the stream sequence of the last fact the queue appended.
	lastSeq uint64
	// blobs are queued tool outputs by content address, until stored.
	blobs map[string]string
}

func (q *writeQueue) blob(h string) (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	b, ok := q.blobs[h]
	return b, ok
}

func (q *writeQueue) keepBlob(h string, b string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.blobs == nil {
		q.blobs = map[string]string{}
	}
	q.blobs[h] = b
}

// took records facts the log stored for the session: the state's last
// fact moves to the latest of them, and the queued outputs of hashes
// (nil: none) are forgotten, the log now referring to their blobs.
func (q *writeQueue) took(stored []events.Event, hashes []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range stored {
		q.lastSeq = max(q.lastSeq, e.Seq)
	}
	for _, h := range hashes {
		delete(q.blobs, h)
	}
}

// reset starts the queue over for a state rebuilt from the log (the
// queue is drained): outputs a failed write left behind are dropped.
func (q *writeQueue) reset(last uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stale = false
	q.lastSeq = last
	q.blobs = nil
}

func (q *writeQueue) markStale() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stale = true
}

// drain waits until every queued write finished and reports whether the
// in-memory state went stale.
func (q *writeQueue) drain(ctx context.Context) (stale bool, err error) {
	q.mu.Lock()
	tail := q.tail
	q.mu.Unlock()
	if tail != nil {
		select {
		case <-tail:
		case <-ctx.Done():
			return false, fmt.Errorf("wait for the session's log writes: %w", ctx.Err())
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stale, nil
}

// idle reports whether no write is queued.
func (q *writeQueue) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.tail == nil {
		return true
	}
	select {
	case <-q.tail:
		return true
	default:
		return false
	}
}

// logWrite is one queued write.
type logWrite struct {
	tenant, session string
	api             API
	// evs are the facts to append, in input form.
	evs    []events.Event
	hashes []string
	// estimated are the outputs appended by reference (their counts
	// estimated): their blobs are put first.
	estimated []string
	// inexact are the ids of the facts whose decision count is an
	// estimate: their exact counts are taken before they are appended
	// (countExact).
	inexact map[string]bool
	// decided is set for a request: its in-memory application (nil: none)
	// at time at for request req, to be decided again from the log and
	// compared once the request is known to have been sent.
	decided bool
	app     *events.Event
	// facts is the number of facts the in-memory cores held when they
	// decided.
	facts int
	at    time.Time
	req   string
	// fate receives whether the request's decision went upstream (nil:
	// not a request, or known already).
	fate chan bool
	// wrote is closed once the request's bytes are written upstream
	// (plan.forwarded; nil with fate): its facts may go to the log then,
	// while the upstream works on the answer, before its fate is known
	// (unless they need exact counts: afterResponse).
	wrote     chan struct{}
	wroteOnce sync.Once
	// ended is closed once the request's response has ended, whatever
	// the ending (plan.responded; nil: no wait, as in a fleet, whose
	// responses wait for their writes instead). A decision that went
	// upstream is checked against the log after it: the check (the
	// pipeline deciding from the log, its round trips and its workers)
	// would otherwise run on the same processors while the answer is
	// relayed, and stretch it.
	ended     chan struct{}
	endedOnce sync.Once
	// dropped says the write is not to run: its request lost a fleet
	// race and is decided again (fleet.go).
	dropped bool
	// published says the application (or that there is none) was
	// published by the proxy (a fleet, fleet.go): nothing is decided from
	// the log after.
	published bool
	// behind says the write publishes the request's facts and its
	// application guarded, after forwarding (a fleet: publishBehind).
	behind bool
	// early is closed once the outputs storeEarly started for the
	// request are stored (nil: none started).
	early chan struct{}
	// unrecorded says the request's guarded publish after forwarding
	// failed (another proxy extended the session first): the log records
	// it as a request that failed open, without its application or model
	// request (publishBehind).
	unrecorded atomic.Bool
	// of is, for a response's record, its request's write: the record
	// leaves out the model request when that write is unrecorded.
	of *logWrite
}

// forwarded says the plan's request has been written upstream, whatever
// comes back: its facts can be written. It may be called more than once.
func (pl *plan) forwarded() {
	if pl == nil {
		return
	}
	// The request's parse goes to the parse cache now, off the request's
	// path (its new outputs' raw values copied), while the upstream works.
	go pl.conv.cacheParse()
	if pl.write == nil || pl.write.wrote == nil {
		return
	}
	pl.write.wroteOnce.Do(func() { close(pl.write.wrote) })
}

// responded says the plan's response has ended (logWrite.ended). It may
// be called more than once.
func (pl *plan) responded() {
	if pl == nil || pl.write == nil || pl.write.ended == nil {
		return
	}
	pl.write.endedOnce.Do(func() { close(pl.write.ended) })
}

// settle says whether the plan's decision went upstream. It may be called
// more than once; the first call counts.
func (pl *plan) settle(sent bool) {
	if pl == nil || pl.write == nil || pl.write.fate == nil {
		return
	}
	select {
	case pl.write.fate <- sent:
	default:
	}
}

// enqueue queues w after the session's previous writes.
func (p *Proxy) enqueue(st *sessState, w *logWrite) {
	q := &st.q
	done := make(chan struct{})
	q.mu.Lock()
	prev := q.tail
	q.tail = done
	q.mu.Unlock()
	tracked := p.bg.add()
	go func() {
		if tracked {
			defer p.bg.wg.Done()
		}
		// Once the write is done (after close), an advance that gave way
		// to it runs again.
		defer st.freed()
		defer close(done)
		if prev != nil {
			<-prev
		}
		// The facts go once the request is on its way upstream (or its
		// fate is known): their write runs while the upstream works on
		// the answer, not while the answer is relayed. What the log
		// holds of the decision waits for the upstream's status. A write
		// with exact counts to take waits for the response's end
		// (afterResponse).
		sent, known := true, w.fate == nil
		if !known && len(w.inexact) > 0 && w.ended != nil {
			sent, known = p.afterResponse(w)
		}
		if !known {
			select {
			case <-w.wrote:
			case sent = <-w.fate:
				known = true
			case <-p.bg.ctx.Done():
				sent, known = false, true
			}
		}
		fail := func(err error) {
			q.markStale()
			p.met.recordFailure()
			p.log.Warn("proxy: log write after forwarding failed; the session is rebuilt from the log at its next request", "api", w.api, "session", w.session, "err", err)
		}
		ctx, cancel := context.WithTimeout(p.bg.ctx, p.cfg.RecordTimeout)
		defer cancel()
		start := time.Now()
		err := p.writeFacts(ctx, q, w, sent)
		took := time.Since(start)
		if err != nil {
			p.met.observeStage(w.api, StageLog, took)
			fail(err)
			return
		}
		if !known {
			select {
			case sent = <-w.fate:
			case <-p.bg.ctx.Done():
				sent = false
			}
			// The decision's check has a record timeout of its own.
			cancel()
			ctx, cancel = context.WithTimeout(p.bg.ctx, p.cfg.RecordTimeout)
			defer cancel()
		}
		if sent && w.ended != nil {
			// Only the handler that sent the decision knows when its
			// response ends; a request that did not go as decided may
			// have no handler left to say so.
			select {
			case <-w.ended:
			case <-p.bg.ctx.Done():
			}
		}
		start = time.Now()
		err = p.checkDecision(ctx, q, w, sent)
		p.met.observeStage(w.api, StageLog, took+time.Since(start))
		if err != nil {
			fail(err)
		}
	}()
}

// afterResponse holds back a request's write whose facts need exact
// counts (logWrite.inexact) until the request's response has ended, or
// the request is known not to have gone as decided, or the proxy closes.
// The exact count of a new output is the heaviest work after forwarding
// (one core for tens of milliseconds per new large output, and most of
// what the proxy allocates: the tokenizer allocates per piece), and how
// long the model thinks before answering is unknown: started when the
// request was written, the count and the garbage collections it brings
// on ran beside the upstream's read of the request and the relay of the
// answer, and the slowest requests of proxy-replay waited for them
// (docs/performance.md, "What the slowest requests wait for"). Facts
// held back this way reach the log after the response, as a record's
// do; a proxy killed meanwhile loses nothing the next request does not
// restore. It returns the request's fate when it learned it (known).
func (p *Proxy) afterResponse(w *logWrite) (sent, known bool) {
	sent, fate := true, w.fate
	for {
		select {
		case <-w.ended:
			return sent, known
		case s := <-fate:
			sent, known, fate = s, true, nil
			if !s {
				return sent, known
			}
		case <-p.bg.ctx.Done():
			return false, true
		}
	}
}

// errDiverged reports an application the pipeline decided from the log
// that differs from the one the proxy sent.
type errDiverged struct{ sent, logged *events.Event }

func (e *errDiverged) Error() string {
	name := func(a *events.Event) string {
		if a == nil {
			return "none"
		}
		return a.ID
	}
	return fmt.Sprintf("decision diverged: sent %s, the log's %s", name(e.sent), name(e.logged))
}

// writeFacts runs a queued write's first half: take the exact counts of
// the facts decided on estimates, then append the facts. In a fleet a
// request's write publishes its facts and, when sent, its application
// instead (publishBehind), and the record of a request whose write went
// unrecorded leaves out its model request.
func (p *Proxy) writeFacts(ctx context.Context, q *writeQueue, w *logWrite, sent bool) error {
	if fb, ok := p.fleet(); ok && w.behind {
		return p.publishBehind(ctx, fb, q, w, sent)
	}
	if w.of != nil && w.of.unrecorded.Load() {
		w.evs = slices.DeleteFunc(w.evs, func(e events.Event) bool {
			r, ok := e.Data.(*events.ModelRequest)
			return ok && r.Request == w.of.req
		})
	}
	p.countExact(ctx, q, w)
	if err := p.putEstimated(ctx, q, w); err != nil {
		return err
	}
	if len(w.evs) > 0 {
		stored, err := p.appendQueued(ctx, q, w.evs)
		if err != nil {
			return fmt.Errorf("append %d facts to %s: %w", len(w.evs), w.session, err)
		}
		q.took(stored, w.hashes)
	}
	return nil
}

// checkDecision runs a queued write's second half, once the request's
// fate is known: for a request whose decision went upstream, have the
// pipeline decide it from the log, which publishes the application, and
// check it is the one sent.
func (p *Proxy) checkDecision(ctx context.Context, q *writeQueue, w *logWrite, sent bool) error {
	if !w.decided || w.unrecorded.Load() {
		return nil
	}
	if !sent {
		// The in-memory cores judged a request that did not go out as
		// decided: the log will not hold that decision (or, published
		// before forwarding, holds one that was not sent).
		q.markStale()
		return nil
	}
	if w.published {
		return nil
	}
	q.mu.Lock()
	last := q.lastSeq
	q.mu.Unlock()
	got, err := p.cfg.Backend.DecideLive(ctx, w.tenant, w.session, last, w.at, w.req)
	if err != nil {
		return fmt.Errorf("decide %s from the log: %w", w.session, err)
	}
	if !sameApplication(got, w.app) {
		p.met.diverged()
		return &errDiverged{sent: w.app, logged: got}
	}
	if fc, ok := p.cfg.Backend.(factCounter); ok {
		if n, ok := fc.SessionFacts(w.tenant, w.session, last); ok && n != w.facts {
			// Another writer added facts (a pin, a manual prune through
			// the API): the next request decides on a state rebuilt from
			// the log, which holds them.
			q.markStale()
			p.log.Info("proxy: facts another writer appended; the session's state is rebuilt from the log at its next request", "session", w.session, "log_facts", n, "proxy_facts", w.facts)
		}
	}
	return nil
}

// sameApplication compares two applications as stored (Seq aside).
func sameApplication(a, b *events.Event) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	x, y := *a, *b
	x.Seq, y.Seq = 0, 0
	ea, err1 := events.EncodeValidated(x)
	eb, err2 := events.EncodeValidated(y)
	return err1 == nil && err2 == nil && bytes.Equal(ea, eb)
}

func (q *writeQueue) isStale() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stale
}

// blobOf returns a stored tool output's text by content address: from
// the session's write queue while it waits there, else from the log.
func (p *Proxy) blobOf(ctx context.Context, pl *plan, h string) (string, error) {
	if s, ok := pl.st.q.blob(h); ok {
		return s, nil
	}
	b, err := p.cfg.Backend.Blob(ctx, h)
	return string(b), err
}

// putBlobString stores an output held as a string: streamed when the
// backend can (events.StringBlobPutter), else copied once.
func putBlobString(ctx context.Context, lb logBackend, h, data string) error {
	if sp, ok := lb.(events.StringBlobPutter); ok {
		return sp.PutBlobString(ctx, h, data)
	}
	return lb.PutBlob(ctx, h, []byte(data))
}

// feedMem feeds facts (input form) to the session's in-memory state, with
// the token counts Append will store, and adds them to the queued write w.
// Caller holds st.mu.
func (p *Proxy) feedMem(st *sessState, w *logWrite, evs []events.Event) error {
	lb, _ := p.cfg.Backend.(logBackend)
	c := counts{tc: lb.Tokens(), exact: p.cfg.ExactCounts}
	for _, ev := range evs {
		stored, input, est, inexact, err := prepareMem(ev, c, &st.q)
		if err != nil {
			return err
		}
		if est != "" {
			w.estimated = append(w.estimated, est)
		}
		if inexact {
			if w.inexact == nil {
				w.inexact = map[string]bool{}
			}
			w.inexact[ev.ID] = true
		}
		if r, ok := stored.Data.(*events.ToolResult); ok && r.OutputRef != nil {
			w.hashes = append(w.hashes, r.OutputRef.Hash)
		}
		st.mem.feed(stored)
		w.evs = append(w.evs, input)
	}
	return nil
}

// Flush waits until every session's queued log writes are done (tests,
// tools that read the log right after a response).
func (p *Proxy) Flush(ctx context.Context) error {
	p.mu.Lock()
	states := make([]*sessState, 0, len(p.sessions))
	for _, st := range p.sessions {
		states = append(states, st)
	}
	p.mu.Unlock()
	for _, st := range states {
		// A record holding the lock queues its write before it lets go;
		// one left pending runs here.
		st.lock()
		st.unlock()
		if _, err := st.q.drain(ctx); err != nil {
			return fmt.Errorf("proxy: flush: %w", err)
		}
	}
	return nil
}
