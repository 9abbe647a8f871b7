package proxy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/agenttools"
	"github.com/prunesched/prunesched/placeholder"
	"github.com/prunesched/prunesched/projections"
)

// parseChecked reads a request body of api, reusing the cached parse of
// the longest matching prefix of its messages array in pc (nil: none),
// after checking its text as events.CheckText does: a body with a string
// the log would store altered is refused with CheckText's error, whatever
// else is wrong with it. The bytes of the reused prefix were checked with
// the body they came from, so only the rest is scanned (arrScan.checkText),
// and a body that fails the check is never cached.
func parseChecked(api API, body []byte, pc *parseCache) (*conversation, error) {
	return parseCheckedLater(api, body, pc, false)
}

// parseCheckedLater is parseChecked; with later, the parse is cached only
// when the conversation's cacheParse is called (once the request is
// forwarded), and the copies of its new blocks' raw values made then.
func parseCheckedLater(api API, body []byte, pc *parseCache, later bool) (*conversation, error) {
	a := &arrScan{pc: pc, api: api, body: body, check: true, later: later}
	c, err := parseScan(a)
	if err != nil {
		if terr := events.CheckText(body); terr != nil {
			return nil, terr
		}
		return nil, err
	}
	if err := a.checkText(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseScan runs a.api's parser over a.body.
func parseScan(a *arrScan) (*conversation, error) {
	switch a.api {
	case APIAnthropic:
		return parseAnthropicScan(a)
	case APIOpenAIChat:
		return parseOpenAIChatScan(a)
	case APIOpenAIResponses:
		return parseOpenAIResponsesScan(a)
	}
	return nil, fmt.Errorf("unknown API %q", a.api)
}

// process is one request's prunesched stage: parse, identify, append the
// new facts, decide, render. It returns a nil plan for requests that are
// not agent turns (no tools offered: title generators, quota checks), which
// pass through untouched and unlogged. ctx bounds appends; decideCtx ends
// with the budget.
func (p *Proxy) process(ctx, decideCtx context.Context, api API, h http.Header, body []byte, at time.Time, abandoned *atomic.Bool, early *earlyRead) (*plan, error) {
	// Each stage's time goes to prunesched_proxy_stage_seconds, failed or
	// not.
	t := time.Now()
	// The early build, if any, gets the parsed body below, or nothing
	// when the parse panics.
	defer early.give(nil)
	// Text the parse would change (not UTF-8, a lone surrogate) is never
	// recorded altered: the request goes upstream untouched (fail open).
	// The parse checks it (parseChecked).
	conv, err := parseCheckedLater(api, body, &p.parses, true)
	early.give(conv)
	t = p.met.stage(api, StageParse, t)
	if err != nil {
		return nil, staged(StageParse, err)
	}
	if !conv.tools {
		return nil, nil
	}
	tenant, base, source := early.identity(p, h, conv)
	pl := &plan{api: api, tenant: tenant, source: source, at: at, conv: conv, req: "preq-" + events.NewID()}
	st, session, caughtUp, err := p.lane(ctx, tenant, base, conv, early)
	if err != nil {
		p.met.stage(api, StageLoad, t)
		return nil, staged(StageLoad, err)
	}
	pl.session, pl.st = session, st
	st.lock()
	defer st.unlock()
	st.body = &bodyOutputs{conv: conv}
	defer func() { st.body = nil }()
	if _, fleet := p.fleet(); fleet && st.loaded && st.mem != nil {
		p.storeEarly(st, st.body)
	}
	err = p.load(ctx, tenant, session, st, caughtUp, early)
	t = p.met.stage(api, StageLoad, t)
	if err != nil {
		return nil, staged(StageLoad, err)
	}
	if st.mem != nil {
		// In a fleet a request decided on a view another proxy extended
		// meanwhile is decided again on the log (fleet.go).
		// A request decided before the read of the session's last fact
		// answered, on a state the log had passed, is decided again as
		// its first attempt (decideBeforeRead).
		confirm := early.confirmed(tenant, session)
		for attempt := 1; ; attempt++ {
			try := *pl
			try.confirm, confirm = confirm, nil
			out, err := p.processMem(ctx, &try, h, t, abandoned, attempt)
			switch {
			case errors.Is(err, errNotCurrent):
				attempt--
			case errors.Is(err, errRace):
				p.met.raced()
			default:
				return out, err
			}
			t = time.Now()
			err = p.load(ctx, tenant, session, st, false, nil)
			t = p.met.stage(api, StageLoad, t)
			if err != nil {
				return nil, staged(StageLoad, err)
			}
		}
	}
	err = p.appendNew(ctx, pl, h)
	t = p.met.stage(api, StageAppend, t)
	if err != nil {
		return nil, staged(StageAppend, err)
	}
	if abandoned.Load() {
		return nil, staged(StageTimeout, errBudget)
	}
	app, err := p.decide(decideCtx, pl)
	t = p.met.stage(api, StageDecide, t)
	if err != nil {
		return nil, staged(decideStage(decideCtx), err)
	}
	pl.app = app
	err = p.render(decideCtx, pl)
	p.met.stage(api, StageRender, t)
	if err != nil {
		return nil, staged(StageRender, err)
	}
	pl.rendered = true
	return pl, nil
}

// processMem is process's rest when the session's state is in memory
// (inmem.go): the request's new facts go to the in-memory cores, the
// request is decided there and rendered, and its log write is queued, to
// run once the request is forwarded (plan.settle). Any failure makes the
// request fail open; its facts are still written, and the in-memory state
// is rebuilt from the log at the next request. Caller holds pl.st.mu.
//
// In a fleet (Config.Fleet) the queued write publishes the request's
// facts and application guarded, after forwarding (publishBehind),
// unless the log shows another request of the session in flight, or an
// earlier attempt lost a race: then they are published before forwarding
// (publishFirst), and when that finds the session extended by another
// proxy and attempts are left (attempt < fleetAttempts), nothing is
// written, the state is marked stale and errRace returned, for the
// caller to decide again (fleet.go, rule 2).
func (p *Proxy) processMem(ctx context.Context, pl *plan, h http.Header, t time.Time, abandoned *atomic.Bool, attempt int) (*plan, error) {
	st, api := pl.st, pl.api
	pl.write = &logWrite{tenant: pl.tenant, session: pl.session, api: api, decided: true, at: pl.at, req: pl.req, fate: make(chan bool, 1), wrote: make(chan struct{})}
	if _, fleet := p.fleet(); !fleet {
		pl.write.ended = make(chan struct{})
	}
	// The log's state before the request's own facts: another request of
	// the session in flight (its facts in the log, its record not yet).
	inFlight := st.mem.open
	ok := false
	defer func() {
		if !ok {
			// The write learns the decision did not go upstream (and
			// marks the state stale when the cores judged it).
			pl.settle(false)
			if pl.write.decided {
				st.q.markStale()
			}
		}
		if !pl.write.dropped && (len(pl.write.evs) > 0 || pl.write.decided) {
			p.enqueue(st, pl.write)
		}
	}()
	err := p.appendNew(ctx, pl, h)
	t = p.met.stage(api, StageAppend, t)
	if err != nil {
		return nil, staged(StageAppend, err)
	}
	if abandoned.Load() {
		// Past the budget: the request goes out unchanged. Its facts are
		// in the state and will be in the log; no decision is judged, so
		// the state stays the log's (as the log-first path appends and
		// does not decide).
		pl.write.decided = false
		return nil, staged(StageTimeout, errBudget)
	}
	if err := st.contentFailed(); err != nil {
		// The request's own facts met an output the cores could not
		// read: nothing is decided on the state.
		return nil, staged(StageDecide, err)
	}
	pl.write.facts = st.mem.cores.Facts()
	pl.app = st.mem.decide(pl.at, pl.req)
	pl.write.app = pl.app
	t = p.met.stage(api, StageDecide, t)
	err = p.render(ctx, pl)
	t = p.met.stage(api, StageRender, t)
	if err != nil {
		return nil, staged(StageRender, err)
	}
	if pl.confirm != nil {
		if err := pl.confirm(); err != nil {
			pl.write.dropped = true
			st.q.markStale()
			return nil, err
		}
	}
	if fb, fleet := p.fleet(); fleet {
		if st.body != nil {
			pl.write.early = st.body.early
		}
		if !inFlight && attempt == 1 {
			pl.write.behind = true
			pl.rendered, ok = true, true
			return pl, nil
		}
		err = p.publishFirst(ctx, fb, pl)
		p.met.stage(api, StageAppend, t)
		if errors.Is(err, errRace) && attempt < fleetAttempts {
			pl.write.dropped = true
			st.q.markStale()
			return nil, errRace
		}
		if err != nil {
			return nil, staged(StageAppend, err)
		}
	}
	pl.rendered, ok = true, true
	return pl, nil
}

// decide decides the request live and waits for the projection to apply
// the decision (and the request's facts). Caller holds pl.st.mu.
func (p *Proxy) decide(decideCtx context.Context, pl *plan) (*events.Event, error) {
	st := pl.st
	app, err := p.cfg.Backend.DecideLive(decideCtx, pl.tenant, pl.session, st.lastSeq, pl.at, pl.req)
	if err != nil {
		return nil, err
	}
	wait := st.lastSeq
	if app != nil {
		wait = max(wait, app.Seq)
	}
	if err := p.cfg.Backend.WaitSeq(decideCtx, wait); err != nil {
		return nil, err
	}
	return app, nil
}

// decideStage names a decide failure: the budget running out, or the
// decision itself.
func decideStage(decideCtx context.Context) string {
	if decideCtx.Err() != nil {
		return StageTimeout
	}
	return StageDecide
}

// state returns the proxy's state of one session.
func (p *Proxy) state(tenant, session string) *sessState {
	now := p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.lastSweep) >= sweepEvery || len(p.sessions) >= maxSessions && now.Sub(p.lastSweep) >= time.Second {
		p.sweep(now)
	}
	k := sessionKey{tenant, session}
	st := p.sessions[k]
	if st == nil {
		st = &sessState{known: map[string]struct{}{}, counts: map[string]int{}}
		p.sessions[k] = st
	}
	st.lastUse = now
	return st
}

// EvictIdle drops the state of every session no request used for
// Config.SessionIdle (by Config.Now), that no request holds and whose log
// writes are done, and returns how many. A session's state is a cache of
// the log: its next request rebuilds it from the log, to the same
// decisions. The proxy runs it at most once a minute on its own.
func (p *Proxy) EvictIdle() int {
	now := p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sweep(now)
}

// sweep drops the states of sessions idle for Config.SessionIdle that no
// request holds and whose log writes are done. Caller holds p.mu.
func (p *Proxy) sweep(now time.Time) int {
	p.lastSweep = now
	n := 0
	for k, st := range p.sessions {
		if now.Sub(st.lastUse) < p.cfg.SessionIdle || !st.mu.TryLock() {
			continue
		}
		if st.pending != nil || !st.q.idle() {
			// A record still pending, or its log writes still running:
			// the state is the only record of what they will write until
			// they are done.
			st.unlock()
			continue
		}
		delete(p.sessions, k)
		p.tail.forget(k.tenant, k.session)
		st.unlock()
		n++
	}
	return n
}

// lane picks the session of a request: the base session when it is new or
// already holds the request's first user message, otherwise base + "-" +
// 8 hex digits of that message's item id (another conversation under the
// same client session: a subagent, a restarted or host-compacted
// conversation). caughtUp says the lane loaded the session it returns
// for this request (in a fleet: caught up with the log after the request
// arrived), so the request's own load need not ask the log again; early
// is the request's earlyRead (nil: none), which the base session's load
// takes as the request's own would.
func (p *Proxy) lane(ctx context.Context, tenant, base string, c *conversation, early *earlyRead) (st *sessState, session string, caughtUp bool, err error) {
	st = p.state(tenant, base)
	first := c.firstUserItem()
	if first == "" {
		return st, base, false, nil
	}
	st.lock()
	loaded := false
	if !p.knowsWithoutLoad(st, first) {
		st.body = &bodyOutputs{conv: c}
		err = p.load(ctx, tenant, base, st, false, early)
		st.body = nil
		loaded = err == nil
	}
	_, has := st.known[first]
	empty := len(st.known) == 0
	st.unlock()
	if err != nil {
		return nil, "", false, err
	}
	if empty || has {
		return st, base, loaded, nil
	}
	session = base + "-" + hash12(first)[:8]
	if len(session) > 128 {
		session = session[len(session)-128:]
	}
	return p.state(tenant, session), session, false, nil
}

// knowsWithoutLoad says whether a fleet proxy's state of the session,
// in memory and not stale, already holds the item: it then needs no
// catch-up to place a request in this lane (a session's items only grow,
// so the log holds it too). The request's own load catches up before it
// is decided. Caller holds st.mu.
func (p *Proxy) knowsWithoutLoad(st *sessState, item string) bool {
	if _, fleet := p.fleet(); !fleet || !st.loaded || st.mem == nil || st.q.isStale() {
		return false
	}
	_, ok := st.known[item]
	return ok
}

// firstUserItem is the item id of the first user text of the request.
func (c *conversation) firstUserItem() string {
	for _, b := range c.blocks {
		if b.role == events.RoleUser && b.kind == bText {
			return b.item
		}
	}
	return ""
}

// load is loadState, refusing a state whose cores failed to read a
// stored output (sessState.contentFailed): it is marked stale, so the
// next load rebuilds it, and the load fails.
func (p *Proxy) load(ctx context.Context, tenant, session string, st *sessState, caughtUp bool, early *earlyRead) error {
	if err := p.loadState(ctx, tenant, session, st, caughtUp, early); err != nil {
		return err
	}
	return st.contentFailed()
}

// loadState fills st from the log the first time the proxy sees the session
// (after a restart the log, not the proxy, knows what was appended).
// In a fleet every load ends caught up with the session's last fact as
// the stream's leader gives it after the call began (catchUp); caughtUp
// says a load during this request did so already (the lane's), and only
// the session's queued writes are waited for (the request's earlyRead,
// early, then serves nothing: the lane's load took the log's answer);
// early, when not nil, is the request's earlyRead: its last fact read
// serves the catch-up, and when its early build loaded st (earlyBuild)
// st is caught up as after the lane's load. Caller holds st.mu.
func (p *Proxy) loadState(ctx context.Context, tenant, session string, st *sessState, caughtUp bool, early *earlyRead) error {
	if lb, ok := p.inMemory(); ok {
		fb, fleet := p.fleet()
		if !fleet && st.loaded && st.mem != nil && !st.q.isStale() {
			return nil
		}
		// Rebuilt from the log once the session's queued writes are in it
		// (in a fleet, caught up with the log once they are).
		if _, err := st.q.drain(ctx); err != nil {
			return fmt.Errorf("load session %s: %w", session, err)
		}
		if fleet && st.loaded && st.mem != nil && !st.q.isStale() {
			if caughtUp || early.built(st) {
				return nil
			}
			last, since := early.forLoad(tenant, session)
			return p.catchUp(ctx, fb, tenant, session, st, last, since, early)
		}
		if fleet {
			// The state is built from the tail's warm copy or read whole
			// while the leader is asked for the session's last fact.
			last := p.lastFactSoon(ctx, tenant, session)
			if !p.warmStart(ctx, tenant, session, st) {
				if err := p.rebuild(ctx, fb, tenant, session, st); err != nil {
					return err
				}
			}
			return p.catchUp(ctx, fb, tenant, session, st, last, math.MaxUint64, nil)
		}
		return p.loadMem(ctx, lb.ReadSession, tenant, session, st)
	}
	if st.loaded {
		return nil
	}
	last, err := p.cfg.Backend.LastFactSeq(ctx, tenant, session)
	if err != nil {
		return fmt.Errorf("load session %s: %w", session, err)
	}
	if last > 0 {
		if err := p.cfg.Backend.WaitSeq(ctx, last); err != nil {
			return fmt.Errorf("load session %s: %w", session, err)
		}
		p.cfg.Backend.View(tenant, session, func(s *projections.Session) {
			for _, it := range s.Items() {
				st.remember(it.ID)
			}
		})
	}
	st.lastSeq = last
	st.loaded = true
	return nil
}

// remember records an item id as known, counting text occurrences.
func (st *sessState) remember(id string) {
	st.known[id] = struct{}{}
	if i := strings.LastIndexByte(id, '.'); i > 0 && (strings.Contains(id, ".text.") || strings.Contains(id, ".thinking.")) {
		if n, ok := atoiPrefix(id[i+1:]); ok && n+1 > st.counts[id[:i]] {
			st.counts[id[:i]] = n + 1
		}
	}
}

// appendNew appends the session start (first time) and every request block
// whose item the log does not hold yet. Caller holds st.mu.
func (p *Proxy) appendNew(ctx context.Context, pl *plan, h http.Header) error {
	st := pl.st
	var evs []events.Event
	tenant := tenantField(pl.tenant)
	if len(st.known) == 0 && st.lastSeq == 0 {
		agent := h.Get("User-Agent")
		if i := strings.IndexByte(agent, ' '); i > 0 {
			agent = agent[:i]
		}
		evs = append(evs, events.New(events.DerivedID("proxy-start", pl.tenant, pl.session), tenant, pl.session, pl.at, &events.SessionStarted{
			Format: "proxy", SourceID: sanitizeSource(pl.source), Agent: agent, Provider: pl.api.provider(), Model: pl.conv.model,
		}))
		p.met.sessionStarted()
	}
	// The blocks the session's last request logged are shared with this
	// one (the parse cache reuses them) and all known: only the blocks
	// after them are looked up.
	c := pl.conv
	arr := c.blocks[c.arrBlocks:]
	skip := 0
	for n := min(len(st.logged), len(arr)); skip < n && arr[skip] == st.logged[skip]; skip++ {
	}
	seen := map[string]bool{}
	var news []*block
	for _, part := range [][]*block{c.blocks[:c.arrBlocks], arr[skip:]} {
		for _, b := range part {
			if _, ok := st.known[b.item]; ok || seen[b.item] {
				continue
			}
			seen[b.item] = true
			news = append(news, b)
		}
	}
	// The context tools' results are answered here (agent.go): the blocks
	// before the first of them go to the log with the removal requests,
	// the rest once the requests are judged, each result carrying its
	// answer.
	calls := agentCalls(c, news)
	split := len(news)
	if len(calls) > 0 {
		for i, b := range news {
			if b == calls[0].res {
				split = i
				break
			}
		}
		asks, err := p.prepareAgent(ctx, pl, calls, tenant)
		if err != nil {
			return err
		}
		if len(asks) > 0 {
			if err := p.appendFacts(ctx, pl, tenant, evs, news[:split], nil, nil); err != nil {
				return err
			}
			evs, news = nil, news[split:]
			// The requests' ids derive from the result and the handles; a
			// request that failed open after storing them finds them
			// stored (with its own time): they stand as stored.
			if err := p.appendFacts(ctx, pl, tenant, nil, nil, asks, nil); err != nil && !errors.Is(err, events.ErrIDConflict) {
				return err
			}
			// In memory the cores judged them as they were fed.
			if st.mem == nil {
				if err := p.cfg.Backend.Judged(ctx, pl.tenant, pl.session, st.lastSeq); err != nil {
					return fmt.Errorf("judge the agent's removal requests in %s: %w", pl.session, err)
				}
			}
		}
		for _, ac := range calls {
			if ac.kind == agenttools.Prune {
				p.pruneAnswer(pl, ac)
			}
		}
	}
	if err := p.appendFacts(ctx, pl, tenant, evs, news, nil, calls); err != nil {
		return err
	}
	st.logged = arr
	return nil
}

// appendFacts appends evs, the facts of blocks (the context-tool results
// among them carrying their calls' answers) and extra, and remembers the
// blocks' items and the answers. Caller holds st.mu.
func (p *Proxy) appendFacts(ctx context.Context, pl *plan, tenant string, evs []events.Event, blocks []*block, extra []events.Event, calls []*agentCall) error {
	st := pl.st
	for _, b := range blocks {
		ev, err := p.factOf(pl, b, tenant, pl.at)
		if err != nil {
			return err
		}
		for _, ac := range calls {
			if ac.res == b {
				tr := ev.Data.(*events.ToolResult)
				answer := strings.ToValidUTF8(ac.answer, "\uFFFD")
				tr.Output, tr.Tool, tr.IsError = &answer, ac.tool, false
				ac.answer = answer
			}
		}
		evs = append(evs, ev)
	}
	evs = append(evs, extra...)
	if len(evs) == 0 {
		return nil
	}
	if st.mem != nil {
		if err := p.feedMem(st, pl.write, evs); err != nil {
			return err
		}
	} else {
		stored, err := p.cfg.Backend.Append(ctx, evs)
		if err != nil {
			return fmt.Errorf("append %d facts to %s: %w", len(evs), pl.session, err)
		}
		for _, e := range stored {
			st.lastSeq = max(st.lastSeq, e.Seq)
		}
	}
	for _, b := range blocks {
		st.remember(b.item)
	}
	for _, ac := range calls {
		st.rememberAnswer(ac.res.item, ac.answer)
	}
	return nil
}

// sanitizeSource keeps a client session id for SessionStarted.SourceID.
// It is an identifier the client sends in clear, never a credential.
func sanitizeSource(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

func tenantField(t string) string {
	if t == events.DefaultTenant {
		return ""
	}
	return t
}

// factOf turns a request block into its fact event. The event id derives
// from the session and item, so a retried append is deduplicated.
func (p *Proxy) factOf(pl *plan, b *block, tenant string, at time.Time) (events.Event, error) {
	id := events.DerivedID("proxy-fact", pl.tenant, pl.session, b.item)
	var payload events.Payload
	switch b.kind {
	case bText:
		text := b.payloadText()
		payload = &events.Message{Item: b.item, Role: b.role, Kind: events.KindText, Text: text, Meta: isMeta(text)}
	case bThinking:
		payload = &events.Message{Item: b.item, Role: events.RoleAssistant, Kind: events.KindThinking, Text: b.text, Signature: b.signature}
	case bToolUse:
		in := b.input
		if len(in) == 0 {
			in = []byte("{}")
		}
		payload = &events.ToolCall{Item: b.item, CallID: b.callID, Tool: orUnknown(b.tool), Input: in}
	case bToolResult:
		out := b.payloadText()
		tr := &events.ToolResult{Item: b.item, CallID: b.callID, Tool: b.tool, IsError: b.isError, Output: &out}
		if pl.api == APIOpenAIResponses {
			if code, ok := codexExitCode(out); ok {
				tr.ExitCode = &code
				if code != 0 {
					tr.IsError = true
				}
			}
			tr.Source = codexCatSource(b.tool, b.callInput, out)
		}
		payload = tr
	default:
		return events.Event{}, fmt.Errorf("block %s: unknown kind", b.item)
	}
	ev := events.New(id, tenant, pl.session, at, payload)
	if err := ev.Validate(); err != nil {
		return events.Event{}, fmt.Errorf("fact for %s: %w", b.item, err)
	}
	return ev, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// isMeta recognises harness-injected text (Claude Code's reminders).
func isMeta(t string) bool {
	t = strings.TrimSpace(t)
	return strings.HasPrefix(t, "<system-reminder>") && strings.HasSuffix(t, "</system-reminder>")
}

// render splices the placeholders of the session's pruned items into the
// client's body. Caller holds st.mu.
func (p *Proxy) render(ctx context.Context, pl *plan) error {
	var snap projections.Snapshot
	if !p.view(pl, func(s *projections.Session) { snap = s.Snapshot() }) {
		return fmt.Errorf("session %s not in the projection", pl.session)
	}
	items := snap.Pruned()
	pruned := make(map[string]*projections.BundleItem, len(items))
	for i := range items {
		pruned[items[i].ID] = &items[i]
	}
	agentIDs := contextCalls(pl.conv)
	if len(pruned) == 0 && agentIDs == nil {
		return nil
	}
	var edits []edit
	firstNew := -1
	for i, b := range pl.conv.blocks {
		if b.valStart < 0 {
			continue
		}
		bi := pruned[b.item]
		if bi == nil {
			// A context tool's result: its recorded answer in place of
			// the MCP server's stub, at every send (agent.go).
			if b.kind == bToolResult && agentIDs[b.callID] != nil {
				if a, ok := p.answerOf(ctx, pl, b.item); ok {
					start, end := pl.conv.span(b)
					edits = append(edits, edit{start: start, end: end, repl: quote(a)})
				}
			}
			continue
		}
		start, end := pl.conv.span(b)
		var repl []byte
		var spanned []edit
		part := "output"
		switch b.kind {
		case bToolResult:
			if len(bi.Spans) > 0 {
				// A span reference: the client's own output with each
				// run replaced by its reference line, the rest verbatim;
				// or, when the runs are not the lines the reference
				// names, sent whole, as a rendering of the log does
				// (BundleItem.RenderSpans).
				es, ok := p.spanEdits(pl, b, bi, start, end)
				if !ok {
					continue
				}
				spanned = es
				pl.saved += bi.SpanSaved()
				break
			}
			repl = quote(bi.Placeholder)
		case bText:
			repl, part = quote(bi.Placeholder), "text"
		case bToolUse:
			part = "input"
			obj, err := prunedInputJSON(bi)
			if err != nil {
				return err
			}
			repl = obj
			if b.inputIsString {
				repl = quote(string(obj))
			}
		default:
			continue // thinking blocks are never rewritten
		}
		if spanned != nil {
			edits = append(edits, spanned...)
		} else {
			edits = append(edits, edit{start: start, end: end, repl: repl})
		}
		p.met.replacedBlock(part)
		pl.replaced++
		if bi.Placeholder != "" {
			pl.saved += max(bi.PricedTokens()-placeholder.Count(bi.Placeholder), 0)
		}
		if firstNew < 0 && pl.app != nil && bi.Applied != nil && bi.Applied.Application == pl.app.ID {
			firstNew = i
		}
	}
	if len(edits) == 0 {
		return nil
	}
	if pl.api == APIAnthropic && firstNew >= 0 {
		if e, ok := p.breakpointBefore(pl.conv, firstNew); ok {
			edits = append(edits, e)
		}
	}
	out, err := splice(pl.conv.body, edits)
	if err != nil {
		return err
	}
	pl.body = out
	return nil
}

// breakpointBefore implements the cache_control rule: the client's
// breakpoints are all kept (every block stays, so each is still valid).
// When a prune applied by this request lands before one of them, the
// prefix up to the pruned block is unchanged but the entry the provider
// wrote at the client's breakpoint no longer matches, so the proxy adds one
// breakpoint on the last block before the first newly pruned block (a copy
// of the next client breakpoint's cache_control, so TTL ordering holds),
// letting the provider find the longest cached prefix that survived. It
// does so only when the request has fewer than 4 breakpoints; with 4 the
// request is left as the client made it.
func (p *Proxy) breakpointBefore(c *conversation, first int) (edit, bool) {
	if c.breakpoints >= 4 {
		return edit{}, false
	}
	var next *block
	for _, b := range c.blocks[first:] {
		if b.cache {
			next = b
			break
		}
	}
	if next == nil {
		return edit{}, false
	}
	for i := first - 1; i >= 0; i-- {
		b := c.blocks[i]
		if b.cache {
			return edit{}, false // already a breakpoint right there
		}
		objEnd := c.objEndOf(b)
		if objEnd < 0 {
			continue
		}
		cc := next.cc
		if cc == nil {
			cc = []byte(`{"type":"ephemeral"}`)
		}
		ins := append([]byte(`,"cache_control":`), cc...)
		p.met.breakpointAdded()
		return edit{start: objEnd, end: objEnd, repl: ins}, true
	}
	return edit{}, false
}

// prunedInputJSON is a pruned tool input as the projection renders it: an
// object carrying the placeholder and the residue's fields.
func prunedInputJSON(bi *projections.BundleItem) ([]byte, error) {
	var b strings.Builder
	b.WriteString(`{"prunesched_pruned":`)
	b.Write(quote(bi.Placeholder))
	if r := bi.Residue; r != nil {
		for _, kv := range [][2]string{{"tool", r.Tool}, {"error_type", r.ErrorType}, {"error_message", truncUTF8(r.ErrorMessage, 240)}, {"skeleton", truncUTF8(r.Skeleton, 120)}} {
			if kv[1] != "" {
				b.WriteString(`,"` + kv[0] + `":`)
				b.Write(quote(kv[1]))
			}
		}
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// truncUTF8 cuts s to at most n bytes on a rune boundary, marking a cut
// with "…", as the projection does.
func truncUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "…"
	cut := max(n-len(ell), 0)
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + ell
}
