// Package lateruse computes the later-use signal: a proxy, not ground
// truth, for a false prune on a real session, where no labels exist. An
// item removed from the rendered context at request k counts as
// later-used when a distinctive term (terms.Of) that appears in the item,
// and nowhere else in the context rendered right after the removal,
// appears after k in the agent's own messages or tool inputs: the agent
// went on to use something it could only have had from the removed item
// (or found again another way: hence a proxy).
//
// It reads facts, marks and applications and replays them through the
// production projection; it decides nothing and stores nothing.
package lateruse

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/terms"
	"github.com/prunesched/prunesched/projections"
)

// Removal is one item taken out of the rendered context (whole, or the
// runs of a span reference) and what the signal found about it.
type Removal struct {
	// Item is the removed item's id; Request the request whose bundle
	// first left it out; Fact that request's fact index.
	Item    string `json:"item"`
	Request string `json:"request"`
	Fact    int    `json:"fact"`
	// Until is the fact index of the application that restored it, or -1.
	Until int `json:"until"`
	// Partial is set for a span reference: only runs repeated in another
	// item left, so Unique is usually empty.
	Partial bool `json:"partial,omitempty"`
	// InputOf is the tool of a removed tool input: the agent wrote it, so
	// a later call of the same tool repeating its vocabulary ("status":
	// "in_progress" in the next plan) is not a use of it.
	InputOf string `json:"input_of,omitempty"`
	// Unique are the item's distinctive terms that were nowhere else in
	// the context rendered right after the removal.
	Unique []string `json:"unique,omitempty"`
	// LaterUsed is set when one of them appears after Fact (and before
	// Until) in the agent's own messages or tool inputs: Term is the first
	// such term, UsedBy the event that used it.
	LaterUsed bool   `json:"later_used"`
	Term      string `json:"term,omitempty"`
	UsedBy    string `json:"used_by,omitempty"`
}

// Evaluate replays one session's facts (in session order, as the pipeline
// stores them), marks and applications into a projection and returns every
// removal with its later-use verdict, in the order the removals happened.
// blobs serves outputs stored by content address (nil when every output is
// inline). Deterministic.
func Evaluate(ctx context.Context, facts, marks, apps []events.Event, blobs projections.BlobGetter) ([]Removal, error) {
	if len(facts) == 0 {
		return nil, nil
	}
	sess := projections.NewSession(facts[0].Tenant, facts[0].Session)
	ctxTerms := contextTerms{count: map[string]int{}, items: map[string]*itemTerms{}}
	var out []Removal
	open := map[string]int{} // item -> index in out of its open removal
	fact := 0
	for _, ev := range events.MergeLog(facts, marks, apps) {
		sess.Observe(ev)
		if ev.IsFact() {
			fact++
			continue
		}
		a, ok := ev.Data.(*events.Application)
		if !ok {
			continue
		}
		b := sess.Bundle()
		changed, err := ctxTerms.update(ctx, b.Items, blobs)
		if err != nil {
			return nil, fmt.Errorf("later use at request %s: %w", a.Request, err)
		}
		batch := len(out)
		for _, bi := range changed {
			removed := bi.Pruned && !bi.HostPruned
			i, wasOpen := open[bi.ID]
			switch {
			case removed && !wasOpen:
				orig, err := bi.Original(ctx, blobs)
				if err != nil {
					return nil, fmt.Errorf("later use at request %s: %w", a.Request, err)
				}
				r := Removal{Item: bi.ID, Request: a.Request, Fact: a.AfterIndex, Until: -1, Partial: len(bi.Spans) > 0}
				if bi.Kind == projections.ItemToolUse {
					r.InputOf = bi.Tool
				}
				for _, t := range terms.Of(orig) {
					if ctxTerms.count[t] == 0 {
						r.Unique = append(r.Unique, t)
					}
				}
				open[bi.ID] = len(out)
				out = append(out, r)
			case !removed && wasOpen:
				out[i].Until = a.AfterIndex
				delete(open, bi.ID)
			}
		}
		attributeShared(out[batch:])
	}
	markUses(facts, out)
	return out, nil
}

// attributeShared leaves a term that several removals of one application
// share (copies, or an observation and the one that superseded it, removed
// together) with the latest of them only: the one whose label, like a
// surviving copy's, carries what they hold. rs are in render order.
func attributeShared(rs []Removal) {
	if len(rs) < 2 {
		return
	}
	last := map[string]int{}
	for i, r := range rs {
		for _, t := range r.Unique {
			last[t] = i
		}
	}
	for i := range rs {
		kept := rs[i].Unique[:0]
		for _, t := range rs[i].Unique {
			if last[t] == i {
				kept = append(kept, t)
			}
		}
		rs[i].Unique = kept
	}
}

// markUses sets LaterUsed from the agent's own messages and tool inputs.
func markUses(facts []events.Event, rs []Removal) {
	uses := map[string][]int{} // term -> fact indices using it, ascending
	tool := map[int]string{}   // fact index -> tool of a tool call
	for i, ev := range facts {
		var text string
		switch p := ev.Data.(type) {
		case *events.Message:
			if p.Role != events.RoleAssistant {
				continue
			}
			text = p.Text
		case *events.ToolCall:
			text = string(p.Input)
			tool[i] = p.Tool
		default:
			continue
		}
		for _, t := range terms.Of(text) {
			uses[t] = append(uses[t], i)
		}
	}
	for k := range rs {
		r := &rs[k]
		best := -1
		for _, t := range r.Unique {
			l := uses[t]
			for j := sort.SearchInts(l, r.Fact+1); j < len(l); j++ {
				if r.Until >= 0 && l[j] >= r.Until || best >= 0 && l[j] >= best {
					break
				}
				if r.InputOf != "" && tool[l[j]] == r.InputOf {
					continue // the same tool repeating what the agent wrote
				}
				best, r.Term = l[j], t
				break
			}
		}
		if best >= 0 {
			r.LaterUsed = true
			r.UsedBy = facts[best].ID
		}
	}
}

// contextTerms counts the distinctive terms of the rendered context, item
// by item, recomputing an item's terms only when its rendering changes.
type contextTerms struct {
	count map[string]int
	items map[string]*itemTerms
	gen   int
}

type itemTerms struct {
	state string
	terms []string
	gen   int
}

// update brings the counts to bundle items and returns the items whose
// rendering changed since the last update (new items included).
func (c *contextTerms) update(ctx context.Context, items []projections.BundleItem, blobs projections.BlobGetter) ([]*projections.BundleItem, error) {
	c.gen++
	var changed []*projections.BundleItem
	for i := range items {
		bi := &items[i]
		st := renderState(bi)
		it := c.items[bi.ID]
		if it != nil && it.state == st {
			it.gen = c.gen
			continue
		}
		text, err := bi.RenderedText(ctx, blobs)
		if err != nil {
			return nil, err
		}
		if it == nil {
			it = &itemTerms{}
			c.items[bi.ID] = it
		} else {
			c.add(it.terms, -1)
		}
		it.state, it.terms, it.gen = st, terms.Of(text), c.gen
		c.add(it.terms, 1)
		changed = append(changed, bi)
	}
	for id, it := range c.items {
		if it.gen != c.gen { // left the bundle (host compaction)
			c.add(it.terms, -1)
			delete(c.items, id)
		}
	}
	return changed, nil
}

func (c *contextTerms) add(ts []string, d int) {
	for _, t := range ts {
		if c.count[t] += d; c.count[t] == 0 {
			delete(c.count, t)
		}
	}
}

// renderState identifies how an item renders: what it shows in place of
// its content and which span references apply.
func renderState(bi *projections.BundleItem) string {
	s := strconv.FormatBool(bi.Pruned) + strconv.FormatBool(bi.HostPruned) + bi.Placeholder
	for _, sp := range bi.Spans {
		s += "|" + sp.Hash
	}
	return s
}
