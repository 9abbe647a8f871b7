package proxy

import (
	"context"
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
// of its requests to this proxy; past it the session is caught up with
// reads, as without a tail.
const tailBuffer = 4096

// fleetTail follows the log for a proxy of a fleet (fleet.go, rule 1): it
// keeps the facts and applications appended to the sessions the proxy
// holds in memory, so that a request catches up with what other proxies
// appended from memory instead of one read of the log per event. The log
// stays the authority: the proxy still asks it for the session's last
// fact first, and takes the events from the tail only when the tail
// delivered that fact. A tail delivers in log order without gaps (one
// ordered consumer), so it then holds every event before it.
type fleetTail struct {
	mu sync.Mutex
	// ready says the consumer runs (every event stored since is
	// delivered); seq is the stream sequence of the last event it
	// delivered.
	ready    bool
	seq      uint64
	sessions map[sessionKey]*tailSession
	cancel   context.CancelFunc
	done     chan struct{}
}

// tailSession is what the tail holds of one session: its events since
// it was armed, or broken when one was not kept (too many, one that did
// not decode, a tail started again). fresh says the proxy's state may
// lack events stored before the tail kept the session's (it was armed
// with the state already loaded, or before the tail ran): a catch-up
// reads the log and completes it.
type tailSession struct {
	evs    []events.Event
	broken bool
	fresh  bool
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
	t := &fleetTail{sessions: map[sessionKey]*tailSession{}, cancel: cancel, done: make(chan struct{})}
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
	for k := range t.sessions {
		t.sessions[k] = &tailSession{broken: true}
	}
}

func (t *fleetTail) wanted(tenant, session string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.sessions[sessionKey{tenant, session}]
	return ok
}

func (t *fleetTail) deliver(seq uint64, tenant, session string, e *events.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq = max(t.seq, seq)
	if session == "" {
		return
	}
	ts := t.sessions[sessionKey{tenant, session}]
	switch {
	case ts == nil || ts.broken:
	case e == nil || len(ts.evs) >= tailBuffer:
		ts.broken, ts.evs = true, nil
	default:
		ts.evs = append(ts.evs, *e)
	}
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
	t.sessions[tailKey(tenant, session)] = &tailSession{fresh: !t.ready}
}

// arm has the tail keep the session's events from now on when it does
// not yet (a session whose tail broke, or armed before the tail ran): the
// catch-up that follows reads the log, and complete then says the state
// and the tail together hold everything. Caller holds the session's lock.
func (t *fleetTail) arm(tenant, session string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tailKey(tenant, session)
	if ts := t.sessions[k]; ts == nil || ts.broken || ts.fresh {
		t.sessions[k] = &tailSession{fresh: true}
	}
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
	ts := t.sessions[tailKey(tenant, session)]
	if !t.ready || t.seq < last || ts == nil || ts.broken || ts.fresh {
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
	delete(t.sessions, tailKey(tenant, session))
}
