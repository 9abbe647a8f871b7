package proxy

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prunesched/prunesched/events"
)

// errRecordTimeout is the cause of a record cancelled by RecordTimeout.
var errRecordTimeout = errors.New("record timeout")

// record appends the model request (when prunesched rendered it) and the
// assistant's content under the session lock. It returns once the record
// holds the lock, before the end of the response can reach the client:
// the client's next request of the session, which may follow the moment
// it sees that end, takes the same lock (lane, process), so it waits for
// the record and is recorded after it. The record has RecordTimeout from
// the end of the response: past it the record is cancelled and fails,
// counted in prunesched_proxy_record_timeouts_total, and a response still
// waiting for the lock goes on. After Close the record finishes before
// record returns.
//
// When the lock was free and the session is decided in memory (the
// record then only parses the answer and feeds the in-memory cores, no
// I/O), record leaves the record pending on the session (sessState.lock)
// and lets go of the lock at once: whoever takes the lock next runs it
// first, the record's own goroutine or the session's next request,
// whichever gets there first. The handler returns without running it
// (on a connection kept alive, Go's HTTP server reads the next request,
// and ends a chunked response, only when the handler returns), and the
// next request never waits for the record's goroutine to be scheduled
// (under load, behind the log writes and the pipeline, for tens of
// milliseconds) while it holds the lock. Otherwise the record runs in the
// background.
//
// later leaves work for after the response is written whole (afterSent):
// the pending record's goroutine starts then.
func (p *Proxy) record(pl *plan, c *capture, later func(func())) {
	c.done = time.Now()
	st := pl.st
	ctx, cancel := context.WithCancelCause(p.bg.ctx)
	expired := p.cfg.RecordTimer(p.cfg.RecordTimeout)
	locked, done := make(chan struct{}), make(chan struct{})
	// Usually the lock is free: take it here, so the response goes on
	// without waiting for the record's goroutine to be scheduled.
	have := st.tryLock()
	if have {
		close(locked)
	}
	tracked := p.bg.add()
	// run is the record; its caller holds st.mu. A panic in it fails the
	// record only, whichever goroutine runs it.
	run := func() {
		defer close(done)
		defer cancel(nil)
		start := time.Now()
		defer func() {
			if v := recover(); v != nil {
				// The cores may be half fed: the next request rebuilds
				// them from the log.
				st.q.markStale()
				p.met.recordFailure()
				p.log.Error("proxy: record response panicked", "api", pl.api, "session", pl.session, "panic", v)
			}
		}()
		c.finish()
		err := p.recordLocked(ctx, pl, c)
		if st.mem != nil {
			// The request's outputs are indexed for span references
			// here, after its response, not before forwarding it.
			st.mem.cores.IndexSpans()
			if cerr := st.contentFailed(); cerr != nil {
				p.log.Warn("proxy: span references could not read a stored output; the session's next request rebuilds its state", "api", pl.api, "session", pl.session, "err", cerr)
			}
		}
		p.met.stage(pl.api, StageRecord, start)
		if err != nil {
			p.met.recordFailure()
			if context.Cause(ctx) == errRecordTimeout {
				p.met.recordTimeout()
			}
			p.log.Warn("proxy: record response", "api", pl.api, "session", pl.session, "err", err)
		}
	}
	go func() {
		select {
		case <-done:
		case <-expired:
			// The record, cancelled here, fails and counts the timeout
			// (unless it ended meanwhile: the first cancel wins).
			cancel(errRecordTimeout)
			if context.Cause(ctx) != errRecordTimeout {
				return
			}
			p.log.Warn("proxy: recording the response took longer than the record timeout; record cancelled, response released", "api", pl.api, "session", pl.session, "timeout", p.cfg.RecordTimeout)
		}
	}()
	_, fleet := p.fleet()
	if have && tracked && !fleet && st.mem != nil {
		var ran atomic.Bool
		st.pending = func() {
			ran.Store(true)
			run()
		}
		st.unlock()
		p.goRecord(later, func() {
			defer p.bg.wg.Done()
			if ran.Load() {
				return // the session's next request ran it
			}
			st.lock()
			st.unlock()
		})
		return
	}
	go func() {
		if tracked {
			defer p.bg.wg.Done()
		}
		if !have {
			st.lock()
			close(locked)
		}
		defer st.unlock()
		run()
	}()
	wait := locked
	if !tracked || fleet {
		wait = done
	}
	select {
	case <-wait:
	case <-ctx.Done():
	}
	if fleet {
		p.holdEnd(pl)
	}
}

// goRecord starts a pending record's goroutine (Proxy.recordGo, a test
// hook, when set) once the response is written whole (later; nil: now).
// Until then the record waits on the session, where the session's next
// request would run it first.
func (p *Proxy) goRecord(later func(func()), f func()) {
	start := func() {
		if p.recordGo != nil {
			p.recordGo(f)
			return
		}
		go f()
	}
	if later == nil {
		start()
		return
	}
	later(start)
}

// lock takes the session lock and runs first the record left pending on
// the session, if any (record): every holder of the lock finds the
// session's earlier responses recorded, in order.
func (st *sessState) lock() {
	st.mu.Lock()
	st.runPending()
}

// tryLock is lock when the lock is free; false otherwise.
func (st *sessState) tryLock() bool {
	if !st.mu.TryLock() {
		return false
	}
	st.runPending()
	return true
}

// runPending runs the pending record once. Caller holds st.mu.
func (st *sessState) runPending() {
	if f := st.pending; f != nil {
		st.pending = nil
		f()
	}
}

func (p *Proxy) recordLocked(ctx context.Context, pl *plan, c *capture) error {
	st := pl.st
	tenant := tenantField(pl.tenant)
	var evs []events.Event
	if pl.rendered {
		model := c.model
		if model == "" {
			model = pl.conv.model
		}
		mr := &events.ModelRequest{Request: pl.req, Provider: pl.api.provider(), Model: model, Usage: c.usage, CacheTTL: pl.conv.cacheTTL, SourceID: sanitizeSource(c.id)}
		if !validItemID(mr.SourceID) {
			mr.SourceID = ""
		}
		evs = append(evs, events.New(events.DerivedID("proxy-request", pl.tenant, pl.session, pl.req), tenant, pl.session, pl.at, mr))
	}
	blocks := c.blocks
	if !c.whole() {
		// The stream broke off, stalled or ended without its terminal
		// event (or the client left): what arrived is not the model's
		// answer. None of it becomes an item, so nothing can take it as
		// evidence (a partial tool call, a truncated text); the model
		// request and its usage, which the provider counted, are kept.
		p.log.Info("proxy: incomplete answer: its assistant content is not recorded", "api", pl.api, "session", pl.session, "request", pl.req, "blocks", len(blocks))
		blocks = nil
	}
	var items []string
	counts := map[string]int{}
	for _, b := range blocks {
		var payload events.Payload
		var item string
		switch b.kind {
		case bText, bThinking:
			text := b.text.String()
			key := text
			if b.kind == bThinking && b.signature != "" {
				key = b.signature
			}
			if b.kind == bText && text == "" {
				continue
			}
			prefix := strings.TrimSuffix(textItemID(events.RoleAssistant, b.kind, key, 0), ".0")
			n := st.counts[prefix] + counts[prefix]
			counts[prefix]++
			item = prefix + "." + itoa(n)
			kind := events.KindText
			if b.kind == bThinking {
				kind = events.KindThinking
			}
			payload = &events.Message{Item: item, Role: events.RoleAssistant, Kind: kind, Text: text, Signature: b.signature}
		case bToolUse:
			if b.callID == "" {
				continue
			}
			item, _ = callItemIDs(b.callID)
			payload = &events.ToolCall{Item: item, CallID: b.callID, Tool: orUnknown(b.tool), Input: toolInput(b.input.String())}
		default:
			continue
		}
		if _, ok := st.known[item]; ok {
			continue
		}
		ev := events.New(events.DerivedID("proxy-fact", pl.tenant, pl.session, item), tenant, pl.session, c.done, payload)
		if ev.Validate() != nil {
			continue
		}
		evs = append(evs, ev)
		items = append(items, item)
	}
	if len(evs) == 0 {
		return nil
	}
	if st.mem != nil {
		// In memory now, in the log after the request's own write.
		w := &logWrite{tenant: pl.tenant, session: pl.session, api: pl.api, of: pl.write}
		err := p.feedMem(st, w, evs)
		if err != nil {
			st.q.markStale()
		}
		if len(w.evs) > 0 {
			p.enqueue(st, w)
		}
		if err != nil {
			return err
		}
	} else {
		stored, err := p.cfg.Backend.Append(ctx, evs)
		if err != nil {
			return err
		}
		for _, e := range stored {
			st.lastSeq = max(st.lastSeq, e.Seq)
		}
	}
	for _, id := range items {
		st.remember(id)
	}
	return nil
}
