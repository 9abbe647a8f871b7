package proxy

import (
	"context"
	"sync"

	"github.com/prunesched/prunesched/events"
)

// bodyOutputs finds a stored tool output in the request being processed,
// by content address. A proxy feeding its state facts it did not record
// itself (a rebuild; in a fleet, a catch-up on what other proxies
// appended) meets outputs by reference, and span references read them
// (eligibility's l1Span): the client's request almost always holds the
// same output, since it resends the conversation. Reading it there saves
// a read of the blob store per output (several round trips each, on a
// cluster the largest part of a catch-up); what is read is the same bytes
// (the content address is checked), so the decisions are the same.
//
// In a fleet it also stores the request's newest outputs early
// (storeEarly), while the proxy catches up with the log and decides.
type bodyOutputs struct {
	conv *conversation
	// early is closed once the outputs storeEarly started are stored (or
	// failed: publishChain stores what is missing); nil: none started.
	early chan struct{}
	// byHash indexes the request's tool outputs hashed so far: from its
	// end back to block next-1 (a catch-up needs the newest; most
	// requests need none). An advance between requests (fleet.go) gives
	// it the outputs it fetched, and no request (conv nil).
	byHash map[string]string
	next   int
	// later, when not nil, gives the request's conversation once its
	// body is parsed (nil: none will be): a session's state built while
	// the body is still read and parsed (earlyBuild) waits for it at the
	// first output it reads, at most until done ends, then reads the
	// blob store.
	later <-chan *conversation
	done  <-chan struct{}
}

// output returns the request's tool output with content address h.
func (b *bodyOutputs) output(h string) (string, bool) {
	if b == nil {
		return "", false
	}
	if s, ok := b.byHash[h]; ok {
		return s, true
	}
	if b.later != nil {
		select {
		case b.conv = <-b.later:
		case <-b.done:
		}
		b.later = nil
	}
	if b.conv == nil {
		return "", false
	}
	if b.byHash == nil {
		b.byHash, b.next = map[string]string{}, len(b.conv.blocks)
	}
	for b.next > 0 {
		b.next--
		bl := b.conv.blocks[b.next]
		if bl.kind != bToolResult {
			continue
		}
		s := bl.payloadText()
		got := events.HashString(s)
		b.byHash[got] = s
		if got == h {
			return s, true
		}
	}
	return "", false
}

// storeEarly starts storing the request's newest tool outputs, those of
// its last turn (after its last tool call) whose items the session's
// state does not hold: in a conversation whose requests follow one
// another these are the outputs the request appends, whose blobs must be
// stored before its facts are published (publishChain), so that their
// round trips to the blob store overlap the catch-up and the decision
// instead of following them. An output stored here that the request
// turns out not to append (another proxy appended it first) costs a look
// up and nothing else: blobs are content-addressed. Caller holds st.mu,
// the state loaded; the puts have Config.RecordTimeout.
func (p *Proxy) storeEarly(st *sessState, b *bodyOutputs) {
	lb, ok := p.inMemory()
	if !ok || b == nil {
		return
	}
	agentIDs := contextCalls(b.conv)
	var outs []string
	blocks := b.conv.blocks
	for i := len(blocks) - 1; i >= 0; i-- {
		bl := blocks[i]
		if bl.kind == bToolUse || bl.role == events.RoleAssistant {
			break
		}
		if _, known := st.known[bl.item]; bl.kind != bToolResult || known || agentIDs[bl.callID] != nil {
			continue
		}
		outs = append(outs, bl.payloadText())
	}
	if len(outs) == 0 {
		return
	}
	b.early = make(chan struct{})
	// The puts outlive the request's processing: its facts are published
	// after forwarding (publishBehind), which waits for them. A put
	// cancelled half way would leave the object store a partial object
	// for the next put of the same output to replace.
	ctx, cancel := context.WithTimeout(p.bg.ctx, p.cfg.RecordTimeout)
	var wg sync.WaitGroup
	for _, s := range outs[:min(len(outs), putConcurrency)] {
		wg.Go(func() { _ = putBlobString(ctx, lb, events.HashString(s), s) })
	}
	go func() {
		wg.Wait()
		cancel()
		close(b.early)
	}()
}
