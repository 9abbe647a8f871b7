package inspector

import (
	"fmt"
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// MaxBlocks is the most item blocks a strip draws one per item; a longer
// session's strip aggregates consecutive items into about MaxBlocks/2
// blocks (each split by class), and a click on one draws its items.
const MaxBlocks = 1500

// stripWidth is the strip's width in CSS pixels (blocks wrap in rows).
const stripWidth = 1160

// block is one item on the strip.
type block struct {
	Index         int
	ID, Class     string
	Label         string
	Tokens, Width int
	// R is the index of the first request whose bundle held the item, P
	// the request from which it rendered pruned (-1: not pruned now), H
	// the request from which the host had removed it (-1: never).
	R, P, H int
}

// aggregate is a run of consecutive items drawn as one block.
type aggregate struct {
	From, To      int // item indices, inclusive
	R             int
	Tokens, Width int
	Segs          []segment
}

// segment is a class's share of an aggregate.
type segment struct {
	Class  string
	Tokens int
}

// strip is the context strip: blocks, or aggregates when too many.
type strip struct {
	Blocks     []block
	Aggregates []aggregate
	Items      int
	Tokens     int
}

// timing says, per item id, when it entered the bundle and when it was
// pruned or removed by the host, in request indices (see block). It reads
// only the order of the log: requests, item facts, applications and host
// compactions.
type timing struct {
	first map[string]int
	appAt map[string]int // application event id -> request index
	hc    int            // request index of the last host compaction (-1)
}

// timingOf walks the log. reqIndex maps request ids to indices (the
// ledger's); an application counts at the request it was decided for, or
// at the next request when that is unknown.
func timingOf(evs []events.Event, reqIndex map[string]int) timing {
	t := timing{first: map[string]int{}, appAt: map[string]int{}, hc: -1}
	k := 0
	seen := func(id string) {
		if _, ok := t.first[id]; !ok {
			t.first[id] = k
		}
	}
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *events.ModelRequest:
			k++
		case *events.Message:
			seen(p.Item)
		case *events.ToolCall:
			seen(p.Item)
		case *events.ToolResult:
			seen(p.Item)
		case *events.HostCompaction:
			t.hc = k
		case *events.Application:
			if i, ok := reqIndex[p.Request]; ok {
				t.appAt[ev.ID] = i
			} else {
				t.appAt[ev.ID] = k
			}
		}
	}
	return t
}

// blockOf places one item on the timeline.
func (t timing) blockOf(it projections.Item, d *projections.Decision) block {
	b := block{Index: it.Index, ID: it.ID, Class: classOf(it, d), Tokens: it.PricedTokens(), R: t.first[it.ID], P: -1, H: -1}
	if it.Pruned && it.Applied != nil {
		if k, ok := t.appAt[it.Applied.Application]; ok {
			b.P = k
		} else {
			b.P = b.R
		}
	}
	switch {
	case it.HostCompacted:
		b.H = max(t.hc, b.R)
	case it.HostPruned:
		b.H = b.R
	}
	b.Label = itemLabel(it, d, b.Class)
	return b
}

// itemLabel is a block's tooltip.
func itemLabel(it projections.Item, d *projections.Decision, class string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "#%d %s %s", it.Index, it.Role, it.Kind)
	if it.Tool != "" {
		fmt.Fprintf(&sb, " %s", it.Tool)
	}
	if d != nil && d.Source != "" {
		fmt.Fprintf(&sb, " %s", d.Source)
	}
	fmt.Fprintf(&sb, " · %d tokens · %s", it.PricedTokens(), class)
	if d != nil {
		fmt.Fprintf(&sb, " · %s", d.Decision)
		if d.Rung != "" {
			fmt.Fprintf(&sb, " %s", d.Rung)
		}
		fmt.Fprintf(&sb, " %s", d.Reason)
		if d.Control != "" {
			fmt.Fprintf(&sb, " · by %s", d.Control)
		}
	}
	return sb.String()
}

// decisionIndex maps item ids to their certificates.
func decisionIndex(ds []projections.Decision) map[string]*projections.Decision {
	m := make(map[string]*projections.Decision, len(ds))
	for i := range ds {
		m[ds[i].Item] = &ds[i]
	}
	return m
}

// requestIndex maps a ledger's request ids to their indices.
func requestIndex(l scheduler.Ledger) map[string]int {
	m := make(map[string]int, len(l.Requests))
	for _, r := range l.Requests {
		if r.Request != "" {
			m[r.Request] = r.Index
		}
	}
	return m
}

// buildBlocks places items[from:to] on the timeline.
func buildBlocks(items []projections.Item, dec map[string]*projections.Decision, t timing) []block {
	out := make([]block, len(items))
	for i, it := range items {
		out[i] = t.blockOf(it, dec[it.ID])
	}
	return out
}

// widths sizes blocks by tokens: the strip wraps into rows of stripWidth
// pixels, about one row per 40 blocks (3 to 24 rows), each block at least
// minW wide.
func widths(tokens []int, minW int) []int {
	total := 0
	for _, n := range tokens {
		total += n
	}
	rows := min(24, max(3, len(tokens)/40))
	area := stripWidth * rows
	out := make([]int, len(tokens))
	for i, n := range tokens {
		w := minW
		if total > 0 {
			w = max(minW, n*area/total)
		}
		out[i] = min(w, stripWidth-4)
	}
	return out
}

// buildStrip lays out the strip: one block per item up to MaxBlocks,
// aggregates beyond.
func buildStrip(items []projections.Item, dec map[string]*projections.Decision, t timing) strip {
	s := strip{Items: len(items)}
	blocks := buildBlocks(items, dec, t)
	for _, b := range blocks {
		s.Tokens += b.Tokens
	}
	if len(blocks) <= MaxBlocks {
		tok := make([]int, len(blocks))
		for i, b := range blocks {
			tok[i] = b.Tokens
		}
		for i, w := range widths(tok, 4) {
			blocks[i].Width = w
		}
		s.Blocks = blocks
		return s
	}
	size := (len(blocks) + MaxBlocks/2 - 1) / (MaxBlocks / 2)
	for lo := 0; lo < len(blocks); lo += size {
		hi := min(lo+size, len(blocks))
		a := aggregate{From: blocks[lo].Index, To: blocks[hi-1].Index, R: blocks[lo].R}
		by := map[string]int{}
		for _, b := range blocks[lo:hi] {
			a.Tokens += b.Tokens
			by[b.Class] += max(b.Tokens, 1)
			a.R = min(a.R, b.R)
		}
		for _, c := range classes {
			if n := by[c]; n > 0 {
				a.Segs = append(a.Segs, segment{Class: c, Tokens: n})
			}
		}
		s.Aggregates = append(s.Aggregates, a)
	}
	tok := make([]int, len(s.Aggregates))
	for i, a := range s.Aggregates {
		tok[i] = a.Tokens
	}
	for i, w := range widths(tok, 8) {
		s.Aggregates[i].Width = w
	}
	return s
}

// step is one model request on the timeline, as the slider's script reads
// it (JSON).
type step struct {
	Index   int    `json:"i"`
	Request string `json:"id"`
	Time    string `json:"t"`
	// Bundle is the rendered bundle's tokens (the ledger's prompt minus the
	// head the log does not hold); Cached its prefix read from cache.
	Bundle int       `json:"b"`
	Cached int       `json:"c"`
	Apps   []appStep `json:"a"`
}

// appStep is one application at a request.
type appStep struct {
	Trigger         string `json:"trigger"`
	Marks           int    `json:"marks"`
	FirstDivergence int    `json:"fd"`
	MutationRadius  int    `json:"mr"`
	TokensRemoved   int    `json:"removed"`
}

// buildSteps lists the requests with their cached prefix (from the
// scheduled ledger) and the applications the log holds for each.
func buildSteps(evs []events.Event, l scheduler.Ledger, reqIndex map[string]int) []step {
	out := make([]step, len(l.Requests))
	for i, r := range l.Requests {
		out[i] = step{
			Index: r.Index, Request: r.Request, Time: r.Time.UTC().Format("2006-01-02 15:04:05"),
			Bundle: max(0, r.Tokens-l.Head), Cached: max(0, r.CacheRead-l.Head), Apps: []appStep{},
		}
	}
	k := 0
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *events.ModelRequest:
			k++
		case *events.Application:
			i, ok := reqIndex[p.Request]
			if !ok {
				i = k
			}
			if i < 0 || i >= len(out) {
				continue
			}
			out[i].Apps = append(out[i].Apps, appStep{
				Trigger: string(p.Trigger), Marks: len(p.Marks), FirstDivergence: p.FirstDivergence,
				MutationRadius: p.MutationRadius, TokensRemoved: p.TokensRemoved,
			})
		}
	}
	return out
}
