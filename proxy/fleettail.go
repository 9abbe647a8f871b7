package proxy

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prunesched/prunesched/events"
)

// fleetTailer is what a Backend offers to follow the log
// (service.ProxyBackend over store.TailFactsAndApplications): every fact
// and application stored once started was called, in log order, the
// event decoded for the sessions want names.
type fleetTailer interface {
	TailFactsAndApplications(ctx context.Context, started func(), want func(tenant, session string) bool, fn func(seq uint64, tenant, session string, e *events.Event)) error
}

// tailBuffer bounds the events a tail keeps for one session between two
// of its requests to this proxy (or, warm, before its first); past it the
// session is caught up with reads, as without a tail.
const tailBuffer = 4096

// warmBytes bounds what a tail keeps of the sessions the proxy has not
// met yet (warm copies, about the events' text bytes): past it the copies
// least recently appended to are dropped, and those sessions' first
// requests to this proxy read them from the log, as without a tail.
const warmBytes = 32 << 20

// fleetTail follows the log for a proxy of a fleet (fleet.go, rule 1): it
// keeps the facts and applications appended to the sessions the proxy
// holds in memory, so that a request catches up with what other proxies
// appended from memory instead of one read of the log per event. The log
// stays the authority: the proxy still asks it for the session's last
// fact first, and takes the events from the tail only when the tail
// delivered that fact. A tail delivers in log order without gaps (one
// ordered consumer), so it then holds every event before it.
//
// It also keeps a warm copy of each session that starts while it runs
// (from the session's SessionStarted fact, within warmBytes), which the
// proxy has not met yet: behind a balancer without session affinity a
// session's first request to each proxy comes early in it, and builds
// the state from the copy instead of reading the whole session from the
// log, once the log confirms (its first fact's sequence) that the copy
// holds the session from its start (warmed, adopt).
type fleetTail struct {
	mu sync.Mutex
	// ready says the consumer runs (every event stored since is
	// delivered); seq is the stream sequence of the last event it
	// delivered.
	ready    bool
	seq      uint64
	sessions map[sessionKey]*tailSession
	// warmBytes is what the warm copies hold (tailSession.bytes summed);
	// warmLimit bounds it (0: no warm copies).
	warmBytes, warmLimit int
	cancel               context.CancelFunc
	done                 chan struct{}
	// dirty are the held sessions the tail kept events of since the
	// proxy last took them (takeDirty); wake tells the proxy's advance
	// loop (advanceLoop) that there are some.
	dirty map[sessionKey]struct{}
	wake  chan struct{}
}

// tailSession is what the tail holds of one session: its events since
// it was armed, or broken when one was not kept (too many, one that did
// not decode, a tail started again). fresh says the proxy's state may
// lack events stored before the tail kept the session's (it was armed
// with the state already loaded, or before the tail ran): a catch-up
// reads the log and completes it.
//
// warm says the proxy holds no state of the session: the tail keeps its
// events from its first fact, stream sequence first, for the session's
// first request to this proxy (bytes is about their size; used the
// sequence of the last one, which orders the copies to drop).
type tailSession struct {
	evs    []events.Event
	broken bool
	fresh  bool
	warm   bool
	first  uint64
	bytes  int
	used   uint64
}

// startTail starts following the log when the proxy is in a fleet and its
// Backend can; nil otherwise. Close stops it.
func (p *Proxy) startTail() *fleetTail {
	if _, fleet := p.fleet(); !fleet {
		return nil
	}
	tb, ok := p.cfg.Backend.(fleetTailer)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &fleetTail{sessions: map[sessionKey]*tailSession{}, warmLimit: warmBytes, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	p.adv.Add(1)
	go func() {
		defer p.adv.Done()
		p.advanceLoop(ctx, t)
	}()
	go func() {
		defer close(t.done)
		for ctx.Err() == nil {
			err := tb.TailFactsAndApplications(ctx, t.started, t.wanted, t.deliver)
			t.stopped()
			if ctx.Err() != nil {
				return
			}
			p.log.Warn("proxy: following the log stopped; catching up with reads until it runs again", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return t
}

// running says the tail follows the log (every event stored since is
// delivered).
func (t *fleetTail) running() bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ready
}

// stop ends the tail and waits for it.
func (t *fleetTail) stop() {
	if t == nil {
		return
	}
	t.cancel()
	<-t.done
}

func tailKey(tenant, session string) sessionKey {
	if tenant == "" {
		tenant = events.DefaultTenant
	}
	return sessionKey{tenant, session}
}

func (t *fleetTail) started() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ready = true
}

// stopped forgets what the tail held: a tail started again misses the
// events stored while none ran.
func (t *fleetTail) stopped() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ready, t.seq = false, 0
	for k, ts := range t.sessions {
		if ts.warm {
			delete(t.sessions, k)
			continue
		}
		t.sessions[k] = &tailSession{broken: true}
	}
	t.warmBytes = 0
}

// wanted says which sessions' events the tail decodes: those the proxy
// holds, and every other when it keeps warm copies (a session's first
// fact decides whether one is kept).
func (t *fleetTail) wanted(tenant, session string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.sessions[sessionKey{tenant, session}]
	return ok || t.warmLimit > 0
}

func (t *fleetTail) deliver(seq uint64, tenant, session string, e *events.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq = max(t.seq, seq)
	if session == "" {
		return
	}
	k := sessionKey{tenant, session}
	ts := t.sessions[k]
	if ts == nil || ts.warm {
		t.keepWarm(k, ts, seq, e)
		return
	}
	switch {
	case ts.broken:
	case e == nil || len(ts.evs) >= tailBuffer:
		ts.broken, ts.evs = true, nil
	default:
		ts.evs = append(ts.evs, *e)
		if !ts.fresh {
			t.markDirty(k)
		}
	}
}

// markDirty has the proxy's advance loop advance the session. Caller
// holds t.mu.
func (t *fleetTail) markDirty(k sessionKey) {
	if t.dirty == nil {
		t.dirty = map[sessionKey]struct{}{}
	}
	t.dirty[k] = struct{}{}
	// (wake is nil for a tail no proxy advances from)
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// redo has the proxy's advance loop advance the session again: an
// advance gave way to the session's holder, which let go (freed).
func (t *fleetTail) redo(k sessionKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.markDirty(k)
}

// takeDirty returns the sessions marked dirty since the last call and
// forgets them.
func (t *fleetTail) takeDirty() []sessionKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]sessionKey, 0, len(t.dirty))
	for k := range t.dirty {
		keys = append(keys, k)
	}
	clear(t.dirty)
	return keys
}

// keepWarm keeps an event of a session the proxy does not hold (ts nil,
// or its warm copy): a copy starts at a session's SessionStarted fact
// while the tail runs, and ends at an event that did not decode, at
// tailBuffer events, or when warmBytes drops it. Caller holds t.mu.
func (t *fleetTail) keepWarm(k sessionKey, ts *tailSession, seq uint64, e *events.Event) {
	if ts == nil {
		if e == nil || !t.ready || t.warmLimit <= 0 || !e.IsFact() {
			return
		}
		if _, ok := e.Data.(*events.SessionStarted); !ok {
			return
		}
		ts = &tailSession{warm: true, first: seq}
		t.sessions[k] = ts
	}
	if e == nil || len(ts.evs) >= tailBuffer {
		t.dropWarm(k, ts)
		return
	}
	n := warmSize(*e)
	ts.evs = append(ts.evs, *e)
	ts.bytes += n
	ts.used = seq
	t.warmBytes += n
	if t.warmBytes > t.warmLimit {
		t.evictWarm()
	}
}

// warmSize is about what a kept event holds: its text, and room for the
// rest.
func warmSize(e events.Event) int {
	n := 256
	switch d := e.Data.(type) {
	case *events.Message:
		n += len(d.Text) + len(d.Signature)
	case *events.ToolCall:
		n += len(d.Input)
	case *events.ToolResult:
		if d.Output != nil {
			n += len(*d.Output)
		}
	}
	return n
}

func (t *fleetTail) dropWarm(k sessionKey, ts *tailSession) {
	t.warmBytes -= ts.bytes
	delete(t.sessions, k)
}

// evictWarm drops the warm copies least recently appended to until they
// hold at most three quarters of warmLimit. Caller holds t.mu.
func (t *fleetTail) evictWarm() {
	var warm []sessionKey
	for k, ts := range t.sessions {
		if ts.warm {
			warm = append(warm, k)
		}
	}
	slices.SortFunc(warm, func(a, b sessionKey) int { return cmp.Compare(t.sessions[a].used, t.sessions[b].used) })
	for _, k := range warm {
		if t.warmBytes <= t.warmLimit/4*3 {
			return
		}
		t.dropWarm(k, t.sessions[k])
	}
}

// warmed returns the tail's warm copy of a session the proxy does not
// hold: its facts and applications in log order from its first fact,
// stream sequence first. The caller checks with the log that first is
// the session's first fact before building on them, then calls adopt.
func (t *fleetTail) warmed(tenant, session string) (evs []events.Event, first uint64, ok bool) {
	if t == nil {
		return nil, 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ts := t.sessions[tailKey(tenant, session)]
	if !t.ready || ts == nil || !ts.warm {
		return nil, 0, false
	}
	return append([]events.Event(nil), ts.evs...), ts.first, true
}

// adopt says the proxy's state of the session was built from the warm
// copy warmed returned: the tail keeps the session's events from then on
// for its catch-ups (after), as for a session read from the log while it
// ran (watch). When the copy was dropped meanwhile the session is armed:
// the catch-up that follows reads the log. Caller holds the session's
// lock.
func (t *fleetTail) adopt(tenant, session string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tailKey(tenant, session)
	ts := t.sessions[k]
	if ts == nil || !ts.warm || !t.ready {
		t.sessions[k] = &tailSession{fresh: true}
		return
	}
	t.warmBytes -= ts.bytes
	ts.warm, ts.bytes = false, 0
}

// watch has the tail keep the session's events from now on, the proxy
// about to read the whole session from the log: what was stored before
// the read starts, the read holds, and what is stored after this, the
// tail (when it runs). Caller holds the session's lock.
func (t *fleetTail) watch(tenant, session string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tailKey(tenant, session)
	if ts := t.sessions[k]; ts != nil && ts.warm {
		t.warmBytes -= ts.bytes
	}
	t.sessions[k] = &tailSession{fresh: !t.ready}
}

// arm has the tail keep the session's events from now on when it does
// not yet (a session whose tail broke, or armed before the tail ran): the
// catch-up that follows reads the log, and complete then says the state
// and the tail together hold everything. It reports whether it armed the
// session anew: the tail then holds nothing stored before this call, so
// the catch-up's read of the log's last fact must come after it (without
// a tail every catch-up reads the log). Caller holds the session's lock.
func (t *fleetTail) arm(tenant, session string) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tailKey(tenant, session)
	if ts := t.sessions[k]; ts == nil || ts.broken || ts.fresh || ts.warm {
		if ts != nil && ts.warm {
			t.warmBytes -= ts.bytes
		}
		t.sessions[k] = &tailSession{fresh: true}
		return true
	}
	return false
}

// complete says the proxy's state holds the session's events through a
// read of the log made after arm (or watch) while the tail ran.
func (t *fleetTail) complete(tenant, session string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if ts := t.sessions[tailKey(tenant, session)]; ts != nil && t.ready && !ts.broken {
		ts.fresh = false
	}
}

// after returns the session's facts and applications after stream
// sequence have (the state's last fact), in log order, when the tail
// delivered all of them through the session's last fact last (which the
// caller just read from the log), and drops what it held through have;
// false when it cannot vouch for them (not running or not there yet, the
// session broken or fresh): the caller reads the log.
func (t *fleetTail) after(tenant, session string, have, last uint64) ([]events.Event, bool) {
	if t == nil {
		return nil, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seq < last {
		return nil, false
	}
	return t.kept(tenant, session, have)
}

// since returns the session's facts and applications after stream
// sequence have (the state's last fact) that the tail delivered so far,
// in log order, when it can vouch that the state and they hold every
// event of the session through the last one (running, the session
// neither broken nor fresh nor warm), and drops what it held through
// have: an advance between requests (advance). Unlike after it needs no
// last fact from the log: it takes what the tail has, which a request's
// catch-up completes.
func (t *fleetTail) since(tenant, session string, have uint64) ([]events.Event, bool) {
	if t == nil {
		return nil, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.kept(tenant, session, have)
}

// kept is since; caller holds t.mu.
func (t *fleetTail) kept(tenant, session string, have uint64) ([]events.Event, bool) {
	ts := t.sessions[tailKey(tenant, session)]
	if !t.ready || ts == nil || ts.broken || ts.fresh || ts.warm {
		return nil, false
	}
	i := 0
	for i < len(ts.evs) && ts.evs[i].Seq <= have {
		i++
	}
	ts.evs = ts.evs[i:]
	return append([]events.Event(nil), ts.evs...), true
}

// forget stops keeping the session's events (its state was dropped).
func (t *fleetTail) forget(tenant, session string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tailKey(tenant, session)
	if ts := t.sessions[k]; ts != nil && ts.warm {
		t.warmBytes -= ts.bytes
	}
	delete(t.sessions, k)
}
