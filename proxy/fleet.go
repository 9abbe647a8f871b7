package proxy

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/jsask"
	"github.com/prunesched/prunesched/scheduler"
)

// A fleet (issue 29): several proxies on one log, behind a load balancer
// that routes without session affinity, so any request of a conversation
// may reach any proxy. Config.Fleet turns on three rules, and they
// coordinate through JetStream alone (the session's last fact sequence,
// an ordered consumer, expected-sequence atomic batches, one KV entry),
// with no protocol of ours:
//
//  1. Catch up before deciding. The proxy asks the log for the session's
//     last fact sequence (one request to the stream's leader, sent as
//     the request arrives, while its body is read and parsed, or while a
//     session met for the first time is built: earlyRead, lastFactSoon;
//     either way after the request arrived); when the log is ahead of the
//     session's state in memory (another proxy took the previous
//     requests), it takes the events after its state's last fact from
//     its tail of the log when the tail delivered that fact (fleettail.go:
//     one ordered consumer per proxy), else reads them from the log, and
//     feeds them, the applications at the positions they were decided at,
//     as a rebuild would (catchUp). When that read is still out and the
//     tail vouches for the session, the request is decided meanwhile and
//     sent only once the answer shows the state was current, else decided
//     again after a rebuild (decideBeforeRead). Between requests the proxy does that
//     feeding as its tail delivers the events (advance), so that the
//     request usually finds its state current. A session the proxy meets for the
//     first time is built from its tail's warm copy when the log's first
//     fact of the session says the copy holds it all (warmStart), else
//     read whole (rebuild); either is then caught up the same way, and
//     starts as the request's headers arrive when they name the session
//     (earlyBuild), while the body is read and parsed. Outputs
//     fed by reference that span references read are taken from the
//     request, which resends them (bodyOutputs), not from the blob store.
//  2. Publish behind forwarding, guarded. The request is decided in
//     memory on the caught-up view and forwarded at once; once its bytes
//     are written upstream, its new facts and then its application go to
//     the log while the upstream works on the answer (publishBehind), as
//     one chain guarded by the expected last sequence of the session's
//     fact subject (an atomic batch where the stream takes them, else one
//     guarded publish each). The application's position (AfterIndex) is
//     the view's fact count, so the guard is what makes it true in the
//     log: the facts before it are the ones the decision saw. The proxy
//     publishes its own application (no wait for the workers, which
//     decide the same one at the request's model request fact; the
//     server drops that copy by message id within its duplicate window).
//     Exception (publishFirst): when the caught-up log shows another
//     request of the session in flight (its last fact opens a request
//     whose record has not followed: opensRequest), the chain is
//     published before forwarding, and a view another proxy extended
//     meanwhile is found before anything goes upstream (errRace): the
//     proxy rebuilds the session from the log and decides the request
//     again, publishing first again; after fleetAttempts it fails open,
//     its facts written after forwarding as usual.
//     Two requests of one session that reach two proxies at once, neither
//     in the log when the other caught up, both go upstream, each decided
//     on the same view. The first chain stored wins; the other's guard
//     fails after its request went upstream on a view the log will not
//     hold (its application's position would count facts it never saw).
//     No record of that decision replays true, so it is recorded as a
//     request that failed open is: its facts the log lacks are appended
//     after the winner's (Append: none twice), its application and its
//     model request are not (logWrite.unrecorded; counted in
//     prunesched_proxy_fleet_unrecorded_total), and the proxy rebuilds the
//     session from the log at its next request. So nothing is lost or
//     stored twice, every application in the log was decided on the log's
//     prefix before its position and sent as recorded, and replaying the
//     log (scheduler.Replay, analyze, the workers) decides each later
//     request as the proxies do. What the log does not hold is the losing
//     request's own pruning (as for any request that failed open after
//     its body went out); for a client's retry of a request still in
//     flight, the usual case, both sent the same body. The same holds
//     when the publish after forwarding fails for another reason.
//  3. Hold the end of each response until the log holds the request's
//     facts, its application and the response's record (model request,
//     assistant content), at most FleetHold: the client's next request,
//     whichever proxy it reaches, then finds them, and finds no request
//     of the session in flight.
//
// So for a conversation whose requests follow one another (an agent
// waits for an answer before its next request), N proxies give the
// decisions, forwarded bodies and log of one proxy, and no round trip of
// the publish is spent before forwarding.
// The session ids' key is shared the documented way (one key file copied
// to every proxy); JoinFleet refuses a proxy whose key differs.

// fleetAttempts is how many times a request whose guarded publish lost a
// race is decided again before it fails open.
const fleetAttempts = 3

// errRace says another writer appended facts to the session after the
// view the request was decided on: the guarded publish stored nothing.
var errRace = errors.New("another proxy appended to the session since its state was read")

// fleetBackend is what a Backend offers a proxy of a fleet
// (service.ProxyBackend): the session's events after a sequence, and facts
// appended after an expected last fact.
type fleetBackend interface {
	// FactsAndApplicationsAfter returns the session's facts and
	// applications after stream sequence after, in log order (the cores
	// derive the marks); lastFact, when not 0, is the session's last fact
	// sequence as just read (one request fewer).
	FactsAndApplicationsAfter(ctx context.Context, tenant, session string, after, lastFact uint64) ([]events.Event, error)
	// AppendAfter appends events of one session in order (facts, then at
	// most an application), each only if the session's last fact is still
	// the one before it (the first: at expect; 0: no fact yet). It returns
	// the events stored before a failure; a failed expectation wraps
	// events.ErrConflict.
	AppendAfter(ctx context.Context, evs []events.Event, expect uint64) ([]events.Event, error)
	// ReadSessionLeader returns the session's events in log order
	// through its last event as the stream's leader knows it, whatever
	// answers the stream's gets (rebuild).
	ReadSessionLeader(ctx context.Context, tenant, session string) ([]events.Event, error)
}

// fleet returns the backend's fleet operations when Config.Fleet is set
// and the proxy decides in memory.
func (p *Proxy) fleet() (fleetBackend, bool) {
	if !p.cfg.Fleet {
		return nil, false
	}
	if _, ok := p.inMemory(); !ok {
		return nil, false
	}
	fb, ok := p.cfg.Backend.(fleetBackend)
	return fb, ok
}

// catchUp brings the session's state in memory up to the log when the log
// holds facts past it. Caller holds st.mu; the session's write queue is
// drained and the state is loaded and not stale.
//
// early, when not nil, gives the session's last fact from a read at the
// stream's leader started after this request arrived: while the body
// was read and parsed (earlyRead), or while the state was built from the
// tail or the log (lastFactSoon). It serves only when the tail already
// kept the session's events from before it (arm re-armed nothing):
// otherwise an event stored between the read and the arming would be in
// neither the state nor the tail. since is the state's last fact when
// the read started (earlyRead.queued; math.MaxUint64: the state's now):
// an answer older than that is asked again, not taken for a replica's.
// An answer between since and the state's last fact says the state took
// the log past it meanwhile (an advance from the tail, or another
// request's facts): it holds everything the log held when the read was
// answered, after the request arrived, and is current. Else the leader
// is asked now.
//
// spec, when not nil, is the request's earlyRead whose read is early:
// when that read has not answered yet and the tail vouches for the
// session, the catch-up does not wait for it (decideBeforeRead).
func (p *Proxy) catchUp(ctx context.Context, fb fleetBackend, tenant, session string, st *sessState, early func() (uint64, error), since uint64, spec *earlyRead) error {
	defer p.met.fleetStage(StageCatchUp, time.Now())
	read := func() (uint64, error) { return p.cfg.Backend.LastFactSeq(ctx, tenant, session) }
	if p.tail.arm(tenant, session) {
		early = nil
	}
	var last uint64
	var err error
	have := st.q.last()
	if early != nil && spec.unanswered() {
		if done, err := p.decideBeforeRead(ctx, fb, tenant, session, st, early, min(since, have), spec); done {
			return err
		}
	}
	if early != nil {
		if last, err = early(); err == nil && last < min(since, have) {
			early = nil
		}
	}
	if early == nil {
		last, err = read()
	}
	if err != nil {
		return fmt.Errorf("catch up session %s: %w", session, err)
	}
	if last == have || early != nil && last < have {
		return nil
	}
	if last < have {
		// A replica behind the leader answered; a rebuild reads the
		// session through the consumer, which waits for it.
		return p.rebuild(ctx, fb, tenant, session, st)
	}
	// What other proxies appended: from the tail when it delivered all of
	// it through the last fact, else from the log.
	evs, tailed := p.tail.after(tenant, session, have, last)
	if tailed {
		p.met.tailed()
	} else if evs, err = fb.FactsAndApplicationsAfter(ctx, tenant, session, have, last); err != nil {
		return fmt.Errorf("catch up session %s: %w", session, err)
	}
	if !p.takeLog(tenant, session, st, have, evs) {
		return p.rebuild(ctx, fb, tenant, session, st)
	}
	p.tail.complete(tenant, session)
	p.met.caughtUp()
	return nil
}

// errNotCurrent says a request decided before the read of the session's
// last fact answered (decideBeforeRead) was decided on a state the log
// had passed: it is decided again, after a load that waits for the log.
var errNotCurrent = errors.New("the session's state was behind the log when the request was decided")

// decideBeforeRead lets the request be decided while the read of the
// session's last fact at the stream's leader, sent as the request
// arrived (earlyRead), is still out, when the tail vouches for the
// session: the state takes what the tail delivered after its last fact
// (as an advance does), and the request goes on to its decision and
// rendering at once. The read is waited for before anything goes
// upstream (earlyRead.confirmed, processMem): when it says the log held
// no fact past the state's (its answer between floor and the state's
// last fact, as catchUp takes it), the decision is the one a catch-up
// that waited would have let the request make, on the same state;
// otherwise (the tail had not delivered all the log held, or the read
// failed or answered older than floor) the decision is dropped unsent,
// the state marked stale, and the request decided again after a load
// that rebuilds it from the log (errNotCurrent; nothing was written).
// So the round trip to the leader overlaps the in-memory work of
// feeding the request's facts, deciding and rendering, instead of
// coming before it, and no decision changes. done is false when the
// catch-up must go on as without spec (the tail does not vouch for the
// session). Caller holds st.mu; the session's write queue is drained.
func (p *Proxy) decideBeforeRead(ctx context.Context, fb fleetBackend, tenant, session string, st *sessState, early func() (uint64, error), floor uint64, spec *earlyRead) (done bool, err error) {
	have := st.q.last()
	evs, ok := p.tail.since(tenant, session, have)
	if !ok {
		return false, nil
	}
	if len(evs) > 0 {
		if !p.takeLog(tenant, session, st, have, evs) {
			return true, p.rebuild(ctx, fb, tenant, session, st)
		}
		p.met.tailed()
		p.met.caughtUp()
	}
	spec.confirm = func() error {
		defer p.met.fleetStage(StageReadWait, time.Now())
		last, err := early()
		if err != nil {
			return fmt.Errorf("%w: read the last fact of %s: %w", errNotCurrent, session, err)
		}
		if last < floor || last > st.q.last() {
			p.met.fleetCount(func(f *fleetMetrics) prometheus.Counter { return f.behind })
			return errNotCurrent
		}
		p.met.fleetCount(func(f *fleetMetrics) prometheus.Counter { return f.early })
		return nil
	}
	return true, nil
}

// takeLog feeds the state the session's facts and applications the log
// holds after the state's last fact have, in log order, each application
// at the fact position it was decided at, as a rebuild does. It reports
// false when only a rebuild can place them (an application decided at a
// position the state has passed, or past the facts given: the log moved
// meanwhile); the state may then hold part of them and must be rebuilt.
// Caller holds st.mu; the session's write queue is drained.
func (p *Proxy) takeLog(tenant, session string, st *sessState, have uint64, evs []events.Event) bool {
	m := st.mem
	sched := m.cores.Scheduler()
	// The applications the state has not seen, each at the position it
	// was decided at; one decided at a position the state has passed is
	// fed where it belongs only by a rebuild.
	fresh := evs[:0:0]
	for _, e := range evs {
		if a, ok := e.Data.(*events.Application); ok {
			if sched.Seen(e.ID) {
				continue
			}
			if a.AfterIndex < m.cores.Facts() {
				return false
			}
		}
		fresh = append(fresh, e)
	}
	lastFact := have
	_, unplaced := scheduler.Replay(fresh, 0, scheduler.Replayer{
		From:        m.cores.Facts(),
		Application: m.observeApp,
		Fact: func(f events.Event) {
			m.feed(f)
			lastFact = max(lastFact, f.Seq)
		},
	})
	if unplaced > 0 {
		return false
	}
	// The items the fresh facts added (the projection's items are the
	// state's before them and these).
	for _, e := range fresh {
		if id := factItem(e); id != "" {
			st.remember(id)
		}
	}
	st.logged = nil
	st.q.reset(lastFact)
	return true
}

// advanceLoop runs advance for each session the tail kept events of
// (fleetTail.takeDirty), until ctx ends.
func (p *Proxy) advanceLoop(ctx context.Context, t *fleetTail) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.wake:
		}
		for _, k := range t.takeDirty() {
			p.advance(ctx, k.tenant, k.session)
		}
	}
}

// advance feeds a session's state what other proxies appended, as the
// tail delivers it, between the session's requests to this proxy: the
// request's catch-up then finds the state current (or nearly) and only
// waits for its read of the log's last fact, instead of feeding two
// requests' worth of facts to the cores before deciding. It is the
// catch-up's feeding (takeLog) moved off the request's path, and
// changes nothing the request decides on: the events are the log's, in
// log order, from the state's last fact on, as the tail vouches for them
// (fleetTail.since), and the request's catch-up still asks the log for
// the session's last fact and takes the rest. It gives way to any
// request: it runs only when the session's lock is free and its state
// loaded, current and without queued writes. The outputs the events
// name that span references read are fetched from the blob store
// before the lock is taken (the request that resends them is not there
// yet).
//
// An advance that gives way to the session's holder (its lock held, a
// write queued) runs again once the holder lets go: the lock's holder as
// it unlocks (sessState.unlock) and a queued write as it ends (enqueue)
// call freed, which marks the session dirty again for this loop. So the
// state does not wait for the tail's next event of the session (often
// the next request's own) to take what arrived while the session was
// busy, no request waits for it (it still only tries the lock), and
// nothing loops: each run again follows a holder letting go. One whose
// outputs could not be fetched runs again the same way, or at the
// tail's next event; a state not loaded or stale is left to the
// request's load, which rebuilds it.
func (p *Proxy) advance(ctx context.Context, tenant, session string) {
	st := p.held(tenant, session)
	if st == nil {
		return
	}
	evs, ok := p.tail.since(tenant, session, st.q.last())
	if !ok || len(evs) == 0 {
		return
	}
	// Marked before the lock and the queue are looked at: a holder that
	// lets go after the look found it (and any later) runs this again.
	st.again.Store(&advanceAgain{t: p.tail, k: tailKey(tenant, session)})
	// A blob store that does not answer holds up this loop, not a
	// request: bounded as a record is.
	fctx, cancel := context.WithTimeout(ctx, p.cfg.RecordTimeout)
	outs, ok := p.fetchOutputs(fctx, evs)
	cancel()
	if !ok || !st.tryLock() {
		return
	}
	// Its own letting go does not run it again (st.mu, not unlock).
	defer st.mu.Unlock()
	st.advancing.Store(true)
	defer st.advancing.Store(false)
	if !st.loaded || st.mem == nil || st.q.isStale() {
		st.again.Store(nil)
		return
	}
	if !st.q.idle() {
		return
	}
	st.again.Store(nil)
	have := st.q.last()
	if evs, ok = p.tail.since(tenant, session, have); !ok || len(evs) == 0 {
		return
	}
	st.body = &bodyOutputs{byHash: outs}
	defer func() { st.body = nil }()
	if !p.takeLog(tenant, session, st, have, evs) {
		// The request's load rebuilds the session from the log.
		st.q.markStale()
		return
	}
	if st.contentFailed() != nil {
		return // marked stale: the request's load rebuilds it
	}
	p.met.advanced()
}

// advanceAgain names the session an advance gave way on, for the one
// who lets go of it (freed).
type advanceAgain struct {
	t *fleetTail
	k sessionKey
}

// unlock lets go of the session's lock, and has an advance that gave way
// to the holder run again (freed). Every holder but an advance lets go
// this way.
func (st *sessState) unlock() {
	st.mu.Unlock()
	st.freed()
}

// freed says the holder of the session (its lock, or a queued write) let
// go of it: an advance that gave way meanwhile (again) is marked to run
// again.
func (st *sessState) freed() {
	if st.again.Load() == nil {
		return
	}
	if a := st.again.Swap(nil); a != nil {
		a.t.redo(a.k)
	}
}

// held is the state of a session the proxy holds, or nil (none is
// created). The tail names the default tenant; the proxy's sessions may
// name it "".
func (p *Proxy) held(tenant, session string) *sessState {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.sessions[sessionKey{tenant, session}]; st != nil {
		return st
	}
	if tenant == events.DefaultTenant {
		return p.sessions[sessionKey{"", session}]
	}
	return nil
}

// fetchOutputs reads from the blob store the tool outputs that evs name
// by reference, by content address, when span references may read them
// (the state's content reader, newMem); false when one cannot be read.
func (p *Proxy) fetchOutputs(ctx context.Context, evs []events.Event) (map[string]string, bool) {
	if !p.cfg.Policy.Eligibility.SpanRefsEnabled() {
		return nil, true
	}
	outs := map[string]string{}
	for _, e := range evs {
		r, ok := e.Data.(*events.ToolResult)
		if !ok || r.OutputRef == nil {
			continue
		}
		if _, ok := outs[r.OutputRef.Hash]; ok {
			continue
		}
		b, err := p.cfg.Backend.Blob(ctx, r.OutputRef.Hash)
		if err != nil {
			return nil, false
		}
		outs[r.OutputRef.Hash] = string(b)
	}
	return outs, true
}

// opensRequest says whether the fact, the last of a session's log, shows
// a request of the session in flight: any fact but those a response's
// record ends with (its model request, the assistant's text, thinking or
// tool calls). A request's facts end with the client's side (a user
// message, a tool result) and its record follows once the upstream
// answered; a fact of another kind (a pin, a session start) counts as
// open too, which only costs a publish before forwarding.
func opensRequest(e events.Event) bool {
	switch d := e.Data.(type) {
	case *events.ModelRequest, *events.ToolCall:
		return false
	case *events.Message:
		return d.Role != events.RoleAssistant
	}
	return true
}

// factItem is the item a fact adds to the session (a message, a tool
// call, a tool result), or "".
func factItem(e events.Event) string {
	switch d := e.Data.(type) {
	case *events.Message:
		return d.Item
	case *events.ToolCall:
		return d.Item
	case *events.ToolResult:
		return d.Item
	}
	return ""
}

// rebuild reads the whole session from the log into the proxy's state, the
// tail keeping the session's events from then on (a fleet). Caller holds
// st.mu; the session's write queue is drained.
//
// The read is bounded by the session's last event as the stream's leader
// knows it, asked after watch (fleetBackend.ReadSessionLeader). A running
// tail vouches for the session from watch on (it is not fresh): the
// events it passed before watch are the read's alone, and it never feeds
// them. A bound from a replica behind the leader (a direct get, were the
// stream to allow them) could stop the read short of such an event, and
// the state would lack it for good while the proxy took it for current.
// The leader holds every event a consumer delivered, so its bound covers
// them all. That costs nothing: the bound is one request either way, and
// the leader answers it today (the stream allows no direct gets). Marking
// the session fresh instead (a catch-up then reads the log after the
// state) would cost every rebuild a second request to the leader, in
// series (the early read of the last fact no longer serves), and a read
// of what the tail had kept meanwhile.
func (p *Proxy) rebuild(ctx context.Context, fb fleetBackend, tenant, session string, st *sessState) error {
	defer p.met.fleetStage(StageRebuild, time.Now())
	p.tail.watch(tenant, session)
	return p.loadMem(ctx, fb.ReadSessionLeader, tenant, session, st)
}

// firstFacter is a Backend that can say where a session's first fact is
// (service.ProxyBackend): a proxy of a fleet then builds a session it
// meets for the first time from its tail's warm copy (warmStart).
type firstFacter interface {
	// FirstFactSeq is the stream sequence of the session's first fact (0:
	// none known).
	FirstFactSeq(ctx context.Context, tenant, session string) (uint64, error)
}

// warmStart builds the session's state in memory from the tail's warm
// copy (fleettail.go) when the log says the copy holds the session from
// its first fact, instead of reading the whole session: one request
// (the first fact's sequence) in place of a read. The state is fed the
// copy while that request is out, and kept only once the log's answer
// says the copy holds the session whole (a state fed a part is
// dropped, unused). The catch-up that follows brings the state up to
// the log's last fact, as after a read. It reports false, having
// changed nothing, when there is no such copy. Caller holds st.mu; the
// session's write queue is drained.
func (p *Proxy) warmStart(ctx context.Context, tenant, session string, st *sessState) bool {
	ff, ok := p.cfg.Backend.(firstFacter)
	if !ok {
		return false
	}
	evs, first, ok := p.tail.warmed(tenant, session)
	if !ok {
		return false
	}
	defer p.met.fleetStage(StageWarmStart, time.Now())
	type answer struct {
		seq uint64
		err error
	}
	asked := make(chan answer, 1)
	go func() {
		seq, err := ff.FirstFactSeq(ctx, tenant, session)
		asked <- answer{seq, err}
	}()
	m, last := p.buildMem(tenant, session, st, evs)
	if a := <-asked; a.err != nil || a.seq != first {
		// Older than the copy (or not known to the replica that
		// answered): read from the log.
		return false
	}
	st.install(m, last)
	p.tail.adopt(tenant, session)
	p.met.warmStarted()
	return true
}

// earlyRead is a read of a session's last fact at the stream's leader
// started as a request arrived, before its body was read and parsed
// (startEarlyRead), so that the request's catch-up (rule 1) waits less
// or not at all for the round trip. It was started after the request
// arrived, so it sees everything the log held then (the previous
// response's record, which the fleet hold put there before that
// response ended); it serves the request's catch-up only when it read
// the session the request is placed in (its lane) and the session's
// state took no fact since it started (its last fact still queued).
//
// It also keeps what the request's headers say of its identity (its
// tenant and, named, its base session and their source: headerIdentity),
// which process takes (identity) instead of computing the credential tag
// again.
type earlyRead struct {
	tenant, session, source string
	named                   bool
	queued                  uint64
	// last waits for the read's answer; nil when none was started.
	last func() (uint64, error)
	// answered is closed once the read answered.
	answered <-chan struct{}
	// confirm, set by a catch-up that did not wait for the read
	// (decideBeforeRead), waits for it and says whether the request may
	// go as decided; nil when the catch-up waited.
	confirm func() error
	// build is the session's state built as the request arrived, when
	// the proxy held none current to read for (startEarlyBuild); nil
	// when none was started.
	build *earlyBuild
}

// earlyBuild is the load of a session's state (a warm start from the
// tail's copy, or a read of the whole session, then the catch-up: load)
// started as a request's headers arrived, when they name a session the
// proxy holds no current state of (the session's first request at this
// proxy, or the first after its state went stale), so that the load's
// round trips to the log and its feeding of the cores run while the
// body is read and parsed instead of after. It holds the session's lock
// from before startEarlyRead returns until it ends: the request's lane
// and load wait for it, and then find the state loaded and caught up
// with the log's last fact as read after the request arrived, as the
// load they would have run leaves it (built). It feeds what the load
// would feed, in the same order, so the decisions are the same. The
// outputs its span references read come from the request's body once
// parsed (bodyOutputs.later: give), as a load during the request takes
// them; a body that does not parse leaves them to the blob store. A
// build that fails (or panics) marks the state stale: the request's
// load builds it again, and fails open if that fails too.
type earlyBuild struct {
	st *sessState
	// conv takes the request's parsed conversation, or nil (give).
	conv chan *conversation
	gave sync.Once
	// ok says the build succeeded; set before the lock is let go.
	ok atomic.Bool
}

// give hands the early build, if any, the request's parsed conversation
// (nil: the body did not parse, or was not read); only the first call
// counts. Call it as soon as the body is parsed or known not to be, and
// before taking the session's lock: the build may wait for it holding
// that lock.
func (e *earlyRead) give(c *conversation) {
	if e == nil || e.build == nil {
		return
	}
	b := e.build
	b.gave.Do(func() { b.conv <- c })
}

// built says the early build loaded st, the request's state, and caught
// it up with the log after the request arrived: a load of st during the
// request need not ask the log again (as after the lane's load).
func (e *earlyRead) built(st *sessState) bool {
	return e != nil && e.build != nil && e.build.st == st && e.build.ok.Load()
}

// startEarlyRead starts an earlyRead when the proxy is in a fleet, the
// request's headers name its session, and the proxy holds that
// session's state current and idle (loaded, not stale, no write
// queued, no other request in it); when it holds none of it, or one
// not loaded or stale, and no other request or advance is in it, it
// starts building it instead (startEarlyBuild); otherwise it returns
// one that started nothing (the request's load then reads as before),
// or nil outside a fleet.
func (p *Proxy) startEarlyRead(ctx context.Context, h http.Header) *earlyRead {
	if _, fleet := p.fleet(); !fleet {
		return nil
	}
	e := &earlyRead{}
	e.tenant, e.session, e.source, e.named = p.headerIdentity(h, true)
	if !e.named {
		return e
	}
	p.mu.Lock()
	st := p.sessions[sessionKey{e.tenant, e.session}]
	p.mu.Unlock()
	if st == nil {
		if st = p.state(e.tenant, e.session); st.tryLock() {
			p.startEarlyBuild(ctx, e, st)
		}
		return e
	}
	var current bool
	switch {
	case st.tryLock():
		if !st.loaded || st.mem == nil || st.q.isStale() {
			p.startEarlyBuild(ctx, e, st)
			return e
		}
		current = st.q.idle()
		e.queued = st.q.last()
		st.unlock()
	case st.advancing.Load():
		// An advance holds the state, which it found current; the state's
		// last fact now is a lower bound of what it will hold.
		current, e.queued = true, st.q.last()
	}
	if current {
		e.last, e.answered = p.lastFactRead(context.WithoutCancel(ctx), e.tenant, e.session)
	}
	return e
}

// startEarlyBuild starts the early build of the session e names into
// st, whose lock the caller holds and hands over: the build lets it go
// when it ends. It is bounded as a request's work is
// (Config.RecordTimeout), and Close waits for it.
func (p *Proxy) startEarlyBuild(ctx context.Context, e *earlyRead, st *sessState) {
	if !p.bg.add() {
		st.unlock()
		return
	}
	b := &earlyBuild{st: st, conv: make(chan *conversation, 1)}
	e.build = b
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.RecordTimeout)
	stopOnClose := context.AfterFunc(p.bg.ctx, cancel)
	tenant, session := e.tenant, e.session
	go func() {
		defer p.bg.wg.Done()
		defer stopOnClose()
		defer cancel()
		defer st.unlock()
		defer func() { st.body = nil }()
		defer func() {
			if v := recover(); v != nil {
				st.q.markStale()
				p.log.Error("proxy: building a session's state as its request arrived panicked; the request builds it again", "session", session, "panic", v)
			}
		}()
		st.body = &bodyOutputs{later: b.conv, done: bctx.Done()}
		if err := p.load(bctx, tenant, session, st, false, nil); err != nil {
			st.q.markStale()
			p.log.Warn("proxy: building a session's state as its request arrived failed; the request builds it again", "session", session, "err", err)
			return
		}
		b.ok.Store(true)
	}()
}

// identity is the request's tenant, base session and its source
// (Proxy.identity), taking what the headers said when the early read
// started (nil: computing it).
func (e *earlyRead) identity(p *Proxy, h http.Header, c *conversation) (tenant, base, source string) {
	switch {
	case e == nil:
		return p.identity(h, c)
	case e.named:
		return e.tenant, e.session, e.source
	}
	return e.tenant, p.derivedSession(h, c), ""
}

// forLoad is the early read's answer for the catch-up of the given
// session, whose queued writes are drained (nil: read again), and the
// state's last fact when it started (catchUp's since).
func (e *earlyRead) forLoad(tenant, session string) (func() (uint64, error), uint64) {
	if e == nil || e.last == nil || e.tenant != tenant || e.session != session {
		return nil, 0
	}
	return e.last, e.queued
}

// lastFactSoon starts reading the session's last fact at the stream's
// leader (Backend.LastFactSeq) and returns what waits for the answer
// (catchUp), so that the read runs while the proxy builds the session's
// state from its tail or the log.
func (p *Proxy) lastFactSoon(ctx context.Context, tenant, session string) func() (uint64, error) {
	wait, _ := p.lastFactRead(ctx, tenant, session)
	return wait
}

// lastFactRead is lastFactSoon; answered is closed once the read
// answered.
func (p *Proxy) lastFactRead(ctx context.Context, tenant, session string) (wait func() (uint64, error), answered <-chan struct{}) {
	var seq uint64
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		seq, err = p.cfg.Backend.LastFactSeq(ctx, tenant, session)
	}()
	return func() (uint64, error) {
		<-done
		return seq, err
	}, done
}

// unanswered says the early read was started and has not answered yet.
func (e *earlyRead) unanswered() bool {
	if e == nil || e.answered == nil {
		return false
	}
	select {
	case <-e.answered:
		return false
	default:
		return true
	}
}

// confirmed takes the early read's confirmation of a decision made
// before it answered (decideBeforeRead) for the given session, if any
// (nil: the decision needs none).
func (e *earlyRead) confirmed(tenant, session string) func() error {
	if e == nil || e.confirm == nil || e.tenant != tenant || e.session != session {
		return nil
	}
	c := e.confirm
	e.confirm = nil
	return c
}

// last is the stream sequence of the last fact the session's state holds.
func (q *writeQueue) last() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lastSeq
}

// publishFirst appends the request's new facts and then its application
// (decided in memory) before the request is forwarded (rule 2's
// exception: another request of the session is in flight), as one chain
// guarded by the session's last fact as the state knows it
// (publishChain). On success the queued write has no facts left to
// append. A lost race (the chain's first publish refused, or, published
// one by one, the facts stored and the application refused) returns
// errRace: nothing published twice, the request decided again on the
// log. Caller holds st.mu; the session's write queue is drained.
func (p *Proxy) publishFirst(ctx context.Context, fb fleetBackend, pl *plan) error {
	defer p.met.fleetStage(StagePublish, time.Now())
	p.met.publishedFirst()
	w := pl.write
	facts, err := p.publishChain(ctx, fb, &pl.st.q, w, pl.app)
	if err == nil {
		return nil
	}
	all := len(w.evs) == 0
	if errors.Is(err, events.ErrConflict) && (facts == 0 || all) {
		return errRace
	}
	// The rest are appended after forwarding (the request fails open): a
	// fact that made it is not stored twice (its id).
	if all {
		return fmt.Errorf("publish the application of %s: %w", pl.session, err)
	}
	return fmt.Errorf("append %d facts to %s: %w", len(w.evs), pl.session, err)
}

// publishBehind is a request's queued write in a fleet (rule 2), run
// once the request is written upstream: its facts and then, when sent,
// its application (decided in memory; nil when the request did not go
// as decided) as one chain guarded by the session's last fact as the
// state knew it when deciding (publishChain), while the upstream works
// on the answer. When the guard finds the session extended by another
// proxy (two requests of the session in flight at once, neither seen by
// the other's catch-up), the request went upstream decided on a view the
// log will not hold: it is recorded as a request that failed open is
// (logWrite.unrecorded): its facts that the log lacks are appended after
// the other proxy's (none twice), its application and its model request
// are not, and the state is rebuilt from the log at the next request. So
// the log holds only applications decided on its own prefix, and
// replaying it decides each later request as the proxies do. The same
// holds when the publish fails for any other reason.
func (p *Proxy) publishBehind(ctx context.Context, fb fleetBackend, q *writeQueue, w *logWrite, sent bool) error {
	defer p.met.fleetStage(StagePublish, time.Now())
	var app *events.Event
	if sent {
		app = w.app
	}
	_, err := p.publishChain(ctx, fb, q, w, app)
	if err == nil {
		return nil
	}
	w.unrecorded.Store(true)
	q.markStale()
	if !errors.Is(err, events.ErrConflict) {
		return fmt.Errorf("publish %d facts and the application to %s: %w", len(w.evs), w.session, err)
	}
	p.met.unrecordedRace()
	p.log.Warn("proxy: another proxy appended to the session while this request was in flight; its decision is not recorded (as for a request that failed open)", "api", w.api, "session", w.session, "request", w.req)
	if len(w.evs) == 0 {
		return nil
	}
	stored, err := p.appendAfterOthers(ctx, q, w.evs)
	if err != nil {
		return fmt.Errorf("append %d facts to %s: %w", len(w.evs), w.session, err)
	}
	q.took(stored, nil)
	w.evs = nil
	return nil
}

// publishChain stores the write's new outputs and appends its facts and
// then app (nil: none) as one chain guarded by the session's last fact
// as the queue knows it: on a stream that takes atomic batches one round
// trip, which stores all of it or nothing. Every new output is stored
// first, at once (putQueued), most of them already while the state was
// caught up (storeEarly), so that no fact refers to an output the blob
// store lacks. The facts the log took leave w.evs; facts is how many. A
// failed expectation wraps events.ErrConflict. The proxy publishes its
// own application, so no proxy waits for the workers to decide it (they
// decide the same application at the request's model request fact; the
// server drops that copy by its message id).
func (p *Proxy) publishChain(ctx context.Context, fb fleetBackend, q *writeQueue, w *logWrite, app *events.Event) (facts int, err error) {
	// Every new output, not only those appended by reference: the chain's
	// publish then finds them stored (the store's cache of what it put)
	// instead of storing them one after the other.
	if w.early != nil {
		select {
		case <-w.early:
		case <-ctx.Done():
		}
	}
	if err := p.putQueued(ctx, q, w.session, w.hashes); err != nil {
		return 0, err
	}
	chain := w.evs
	if app != nil {
		chain = append(chain[:len(chain):len(chain)], *app)
	}
	if len(chain) == 0 {
		w.published = true
		return 0, nil
	}
	stored, err := fb.AppendAfter(ctx, chain, q.last())
	facts = min(len(stored), len(w.evs))
	all := facts == len(w.evs)
	var hashes []string
	if all {
		hashes = w.hashes
	}
	q.took(stored[:facts], hashes)
	w.evs = w.evs[facts:]
	if all {
		w.estimated, w.hashes = nil, nil
	}
	if err != nil {
		return facts, err
	}
	w.published = true
	return facts, nil
}

// holdEnd holds the end of a response until the session's queued writes
// (the response's record) are in the log, at most Config.FleetHold: a log
// that does not answer delays each response's end by that much, not
// more; the writes go on in the background.
func (p *Proxy) holdEnd(pl *plan) {
	defer p.met.fleetStage(StageHold, time.Now())
	ctx, cancel := context.WithCancel(p.bg.ctx)
	defer cancel()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _ = pl.st.q.drain(ctx)
	}()
	select {
	case <-drained:
	case <-p.cfg.RecordTimer(p.cfg.FleetHold):
		p.met.heldTooLong()
		p.log.Warn("proxy: the response's end was released before the log held its record (fleet hold)", "api", pl.api, "session", pl.session, "hold", p.cfg.FleetHold)
	}
}

// appendQueued appends a queued write's facts. In a fleet they are
// published after the session's last fact the state knows, each
// expecting the one before (no copy of the session's fact ids to bring up
// to date from the log first, which on a cluster costs a consumer); when
// another writer appended meanwhile, the rest go through
// appendAfterOthers.
func (p *Proxy) appendQueued(ctx context.Context, q *writeQueue, evs []events.Event) ([]events.Event, error) {
	fb, ok := p.fleet()
	if !ok {
		return p.cfg.Backend.Append(ctx, evs)
	}
	stored, err := fb.AppendAfter(ctx, evs, q.last())
	if err == nil {
		return stored, nil
	}
	if !errors.Is(err, events.ErrConflict) {
		return nil, err
	}
	more, err := p.appendAfterOthers(ctx, q, evs[len(stored):])
	if err != nil {
		return nil, err
	}
	return append(stored, more...), nil
}

// appendAfterOthers appends facts of a session another writer appended
// to since the state's last fact, through Append, which stores no fact
// twice. The state lacks the other writer's facts, and the queue's last
// fact will be past them, where a catch-up would not look: the state is
// rebuilt from the log at the next request.
func (p *Proxy) appendAfterOthers(ctx context.Context, q *writeQueue, rest []events.Event) ([]events.Event, error) {
	q.markStale()
	var stored []events.Event
	for len(rest) > 0 {
		more, err := p.cfg.Backend.Append(ctx, rest)
		var ee *events.EventError
		if err == nil {
			return append(stored, more...), nil
		}
		if !errors.Is(err, events.ErrIDConflict) || !errors.As(err, &ee) || ee.Index < 0 || ee.Index >= len(rest) {
			return nil, err
		}
		// Another proxy recorded this item first (its copy, with its own
		// time, stands): the rest, the model request among them, still go.
		p.log.Info("proxy: an item of the record is in the log already, recorded by another proxy; its copy stands", "session", rest[ee.Index].Session, "event", rest[ee.Index].ID)
		rest = append(rest[:ee.Index:ee.Index], rest[ee.Index+1:]...)
	}
	return stored, nil
}

// putEstimated stores the outputs a write appends by reference (their
// counts estimated) that are still in the queue.
func (p *Proxy) putEstimated(ctx context.Context, q *writeQueue, w *logWrite) error {
	return p.putQueued(ctx, q, w.session, w.estimated)
}

// putConcurrency bounds the outputs putQueued stores at once.
const putConcurrency = 8

// putQueued stores the outputs with the given content addresses that are
// still in the queue (not stored by an earlier write), at once, so that
// a request with several new outputs waits for the blob store's round
// trips about once. Its error is the first output's that failed.
func (p *Proxy) putQueued(ctx context.Context, q *writeQueue, session string, hashes []string) error {
	lb, _ := p.cfg.Backend.(logBackend)
	errs := make([]error, len(hashes))
	sem := make(chan struct{}, putConcurrency)
	var wg sync.WaitGroup
	for i, h := range hashes {
		data, ok := q.blob(h)
		if !ok {
			continue // stored by an earlier write
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := putBlobString(ctx, lb, h, data); err != nil {
				errs[i] = fmt.Errorf("store output %s of %s: %w", h, session, err)
			}
		})
	}
	wg.Wait()
	return firstErr(errs)
}

// firstErr is the first non-nil error of errs, or nil.
func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// FleetBucket is the JetStream key-value bucket where the proxies of a
// fleet check that they share one identity key (JoinFleet).
const FleetBucket = "PRUNESCHED_FLEET"

// fleetKeyEntry is FleetBucket's key holding the fleet's key fingerprint.
const fleetKeyEntry = "identity-key"

// KeyFingerprint is a short public fingerprint of an identity key: the
// first 16 hex digits of HMAC-SHA256(key, a fixed label). It tells two
// keys apart and reveals nothing usable about the key.
func KeyFingerprint(key []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("prunesched proxy identity key fingerprint"))
	return hex.EncodeToString(mac.Sum(nil))[:16]
}

// ErrFleetKey is returned (wrapped) by JoinFleet when the proxy's identity
// key is not the one the fleet's proxies use.
var ErrFleetKey = errors.New("the proxy's identity key differs from the one the other proxies on this log use")

// JoinFleet checks that a proxy about to serve on a shared log uses the
// fleet's identity key: the first proxy stores its key's fingerprint
// (KeyFingerprint) in the KV bucket FleetBucket (created with replicas
// when absent), every later one compares. A proxy with another key would
// give a conversation other session ids than its peers do (each request
// reaching it would start the session over), so it must not start: the
// error wraps ErrFleetKey and says how to fix it.
func JoinFleet(ctx context.Context, js jetstream.JetStream, key []byte, replicas int) error {
	if len(key) == 0 {
		return fmt.Errorf("join the fleet: %w: the key is random (no --data); give every proxy the same key file", ErrFleetKey)
	}
	kv, err := js.KeyValue(ctx, FleetBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: FleetBucket, Replicas: max(replicas, 1), History: 1,
			Description: "prunesched: the proxies of a fleet share one identity key (its fingerprint)"})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, FleetBucket)
		}
	}
	if err != nil {
		return fmt.Errorf("join the fleet: bucket %s: %w", FleetBucket, err)
	}
	mine := KeyFingerprint(key)
	if _, err := kv.Create(ctx, fleetKeyEntry, []byte(mine)); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("join the fleet: store the key fingerprint in %s: %w", FleetBucket, err)
	}
	// The fleet's fingerprint is read at the bucket's stream leader, asked
	// again while unanswered: a key-value get may be answered by a replica
	// (the bucket allows direct gets), and one behind the leader that
	// refused the create may not have the key yet: "key not found" would
	// refuse a proxy with the right key.
	theirs, err := jsask.Ask(ctx, jsask.DefaultAgain, func(ctx context.Context) (string, error) {
		_, data, err := jsask.LastAtLeader(ctx, js, "KV_"+FleetBucket, "$KV."+FleetBucket+"."+fleetKeyEntry, true)
		return string(data), err
	})
	if err != nil {
		return fmt.Errorf("join the fleet: read the key fingerprint in %s: %w", FleetBucket, err)
	}
	if theirs != mine {
		return fmt.Errorf("join the fleet: %w (fingerprint %s, the fleet's %s in bucket %s): copy proxy-identity.key from a running proxy's --data directory to this one's (mode 0600) and start it again (docs/operating.md)",
			ErrFleetKey, mine, theirs, FleetBucket)
	}
	return nil
}

// FleetStageSecondsMetric is the name of the histogram of the time a
// proxy of a fleet spends staying in step with the log, by stage
// (FleetStages).
const FleetStageSecondsMetric = "prunesched_proxy_fleet_stage_seconds"

// The stages of FleetStageSecondsMetric. Each is a part of a stage of
// LatencyStages, observed on its own to show where a fleet's time goes:
// warm_start (part of load: the first time the proxy meets a session,
// building it from the tail's warm copy, the log asked for its first
// fact), catch_up (part of load: asking the log for the session's last
// fact and reading what other proxies appended), rebuild (part of load:
// reading the whole session, the first time the proxy meets it without a
// warm copy or after a lost race); when the session is built as the
// request arrives (earlyBuild) these three run beside the body's read
// and parse, and load waits only for what is left of them. publish
// (the guarded publish of a request's facts and application: after
// forwarding, part of the log write, or, another request of the
// session in flight, before it, part of append), hold (after the
// response: its end held until the log holds the request's writes and
// its record) and read_wait (at the end of render, before forwarding:
// a request decided before the read of the session's last fact
// answered waits for it there; decideBeforeRead).
const (
	StageCatchUp = "catch_up"
	StageRebuild = "rebuild"
	StagePublish = "publish"
	StageHold    = "hold"
	// StageWarmStart is the stage named warm_start above.
	StageWarmStart = "warm_start"
	// StageReadWait is the stage named read_wait above.
	StageReadWait = "read_wait"
)

// FleetStages are the stages of FleetStageSecondsMetric in the order a
// request meets them.
var FleetStages = []string{StageWarmStart, StageCatchUp, StageRebuild, StageReadWait, StagePublish, StageHold}

// fleetMetrics count what a proxy of a fleet did to stay in step.
type fleetMetrics struct {
	early      prometheus.Counter
	behind     prometheus.Counter
	advanced   prometheus.Counter
	first      prometheus.Counter
	unrecorded prometheus.Counter
	warm       prometheus.Counter
	tailed     prometheus.Counter
	catchUps   prometheus.Counter
	races      prometheus.Counter
	held       prometheus.Counter
	stages     *prometheus.HistogramVec
}

func newFleetMetrics(reg prometheus.Registerer) *fleetMetrics {
	m := &fleetMetrics{
		catchUps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prunesched_proxy_fleet_catchups_total",
			Help: "Requests before which the proxy read facts another proxy of the fleet had appended to the session (Config.Fleet).",
		}),
		races: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prunesched_proxy_fleet_races_total",
			Help: "Requests whose guarded publish found the session extended by another proxy since their decision: decided again on the log (Config.Fleet).",
		}),
	}
	m.held = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "prunesched_proxy_fleet_hold_expired_total",
		Help: "Responses whose end was released after Config.FleetHold before the log held the request's writes (workers down or slow); the next request may then reach a proxy that does not see them yet.",
	})
	m.stages = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    FleetStageSecondsMetric,
		Help:    "Time a proxy of a fleet spent staying in step with the log, by stage (catch_up and rebuild within load; publish after forwarding, or before it within append when another request of the session is in flight; hold after the response; Config.Fleet).",
		Buckets: prometheus.ExponentialBucketsRange(0.00002, 2, 24),
	}, []string{"stage"})
	m.tailed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "prunesched_proxy_fleet_tailed_catchups_total",
		Help: "Catch-ups that took what other proxies appended from the proxy's tail of the log, without reading it (Config.Fleet).",
	})
	m.warm = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "prunesched_proxy_fleet_warm_starts_total",
		Help: "Sessions met for the first time whose state the proxy built from its tail's warm copy, without reading them from the log (Config.Fleet).",
	})
	m.first = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "prunesched_proxy_fleet_publish_first_total",
		Help: "Requests whose facts and application the proxy published before forwarding, because the log showed another request of the session in flight or an earlier attempt lost a race (Config.Fleet); the others publish after forwarding.",
	})
	m.unrecorded = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "prunesched_proxy_fleet_unrecorded_total",
		Help: "Requests forwarded on a view another proxy extended before their guarded publish after forwarding: recorded as requests that failed open (their facts, no application, no model request; Config.Fleet).",
	})
	m.advanced = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "prunesched_proxy_fleet_advances_total",
		Help: "Times the proxy fed a session's state what other proxies of the fleet appended, from its tail of the log, between the session's requests (Config.Fleet); the next request's catch-up then has less or nothing to feed.",
	})
	m.early = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "prunesched_proxy_fleet_decided_before_read_total",
		Help: "Requests decided while the read of the session's last fact at the stream's leader was out, the read then saying the state was current (Config.Fleet).",
	})
	m.behind = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "prunesched_proxy_fleet_read_behind_total",
		Help: "Requests decided while the read of the session's last fact was out whose read then showed the log past the state (or failed): decided again, unsent, after a rebuild (Config.Fleet).",
	})
	reg.MustRegister(m.catchUps, m.races, m.held, m.stages, m.tailed, m.warm, m.first, m.unrecorded, m.advanced, m.early, m.behind)
	return m
}

// fleetStage observes the time since start spent in a fleet stage.
func (m *Metrics) fleetStage(stage string, start time.Time) {
	if m != nil {
		m.fleet.stages.WithLabelValues(stage).Observe(time.Since(start).Seconds())
	}
}

func (m *Metrics) advanced() {
	if m != nil {
		m.fleet.advanced.Inc()
	}
}

// fleetCount adds one to the fleet counter which picks.
func (m *Metrics) fleetCount(which func(*fleetMetrics) prometheus.Counter) {
	if m != nil {
		which(m.fleet).Inc()
	}
}

func (m *Metrics) caughtUp() {
	if m != nil {
		m.fleet.catchUps.Inc()
	}
}

func (m *Metrics) warmStarted() {
	if m != nil {
		m.fleet.warm.Inc()
	}
}

func (m *Metrics) tailed() {
	if m != nil {
		m.fleet.tailed.Inc()
	}
}

func (m *Metrics) heldTooLong() {
	if m != nil {
		m.fleet.held.Inc()
	}
}

func (m *Metrics) publishedFirst() {
	if m != nil {
		m.fleet.first.Inc()
	}
}

func (m *Metrics) unrecordedRace() {
	if m != nil {
		m.fleet.unrecorded.Inc()
	}
}

func (m *Metrics) raced() {
	if m != nil {
		m.fleet.races.Inc()
	}
}
