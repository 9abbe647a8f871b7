package proxy

import (
	"context"
	"sync"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/lru"
)

// Exact counts after forwarding (issue 28, item 2). A payload decided on
// its estimate (counts.text, counts.content) is counted exactly by the
// session's log write, after the request went upstream, and the fact is
// appended with both counts: the estimate the decision used (Tokens,
// InputTokens, OutputRef.Tokens) and the tokenizer's (TokensExact, ...),
// which only the economics read (events.PricedTokens).
//
// The exact counts are remembered here by content address, not in the
// token counter: the counter's remembered counts are what a later copy is
// decided on (counts.content asks it), and a count that lands there when
// a background write happens to finish would make the next request's
// decision depend on timing. A later copy is decided on the estimate, as
// the first was, and its exact count comes from here.
//
// One count runs at a time in the whole proxy, on one goroutine
// (CountSerial): the parallel tokenizer running beside the next requests
// made them slower than counting before forwarding had.
type exactCounter struct {
	// slot admits one count at a time.
	slot chan struct{}
	mu   sync.Mutex
	// counts are exact counts by content address.
	counts *lru.Cache[string, int]
}

// exactKnown bounds the exact counts remembered by content address (about
// 150 bytes each).
const exactKnown = 1 << 14

func newExactCounter() *exactCounter {
	return &exactCounter{slot: make(chan struct{}, 1), counts: lru.New[string, int](exactKnown)}
}

// serialCounter counts on the calling goroutine alone (tokens.Counter).
type serialCounter interface {
	CountSerial(s string) int
}

// known returns the exact count remembered for the payload with content
// address h: here, or by the token counter.
func (x *exactCounter) known(tc events.TokenCounter, h string) (int, bool) {
	x.mu.Lock()
	n, ok := x.counts.Get(h)
	x.mu.Unlock()
	if ok {
		return n, true
	}
	if kc, ok := tc.(knownCounter); ok {
		return kc.Known(h)
	}
	return 0, false
}

// count returns the exact count of s, whose content address is h ("": a
// message's text or a call's input, not remembered), counting it on one
// goroutine once the proxy's one count slot is free. ok is false when ctx
// ended first.
func (x *exactCounter) count(ctx context.Context, tc events.TokenCounter, h, s string) (n int, ok bool) {
	select {
	case x.slot <- struct{}{}:
	case <-ctx.Done():
		return 0, false
	}
	if sc, ok := tc.(serialCounter); ok {
		n = sc.CountSerial(s)
	} else {
		n = tc.Count(s)
	}
	<-x.slot
	if h != "" && n > 0 {
		x.mu.Lock()
		x.counts.Add(h, n, 1)
		x.mu.Unlock()
	}
	return n, true
}

// countExact fills the exact counts of the write's facts whose decision
// count was estimated (logWrite.inexact), before they are appended. A
// count that cannot start within half of what is left of ctx is left out
// (the fact then carries its estimate alone, which the economics price):
// the write itself must still fit in ctx.
func (p *Proxy) countExact(ctx context.Context, q *writeQueue, w *logWrite) {
	if len(w.inexact) == 0 {
		return
	}
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
		defer cancel()
	}
	lb, _ := p.cfg.Backend.(logBackend)
	tc := lb.Tokens()
	for i, ev := range w.evs {
		if !w.inexact[ev.ID] {
			continue
		}
		switch d := ev.Data.(type) {
		case *events.Message:
			if n, ok := p.exact.count(ctx, tc, "", d.Text); ok && n > 0 {
				cp := *d
				cp.TokensExact = n
				w.evs[i].Data = &cp
			}
		case *events.ToolCall:
			if n, ok := p.exact.count(ctx, tc, "", string(d.Input)); ok && n > 0 {
				cp := *d
				cp.InputTokensExact = n
				w.evs[i].Data = &cp
			}
		case *events.ToolResult:
			if d.OutputRef == nil {
				continue
			}
			h := d.OutputRef.Hash
			n, ok := p.exact.known(tc, h)
			if !ok {
				// The output is in the queue until its write is done
				// (an earlier write of the same output counted it).
				if data, held := q.blob(h); held {
					n, ok = p.exact.count(ctx, tc, h, data)
				}
			}
			if ok && n > 0 {
				cp, ref := *d, *d.OutputRef
				ref.TokensExact = n
				cp.OutputRef = &ref
				w.evs[i].Data = &cp
			}
		}
	}
}
