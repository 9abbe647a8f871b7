// Package compare runs every lab row that needs no labels (the production
// policies and the peers) over a user's own sessions and reports what each
// would have done there: tokens sent, cost, what it removed, and the
// later-use count (package lateruse), a proxy for a false prune, not
// ground truth. It is the real-trace counterpart of the Context Lab, and
// what `prunesched analyze --compare` prints.
//
// The rows' marks go through the production scheduler (scheduler.Simulate)
// and projection, under immediate and scheduled timing, exactly as the lab
// runs them. Sessions run one after another; the result is deterministic.
package compare

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/importers"
	"github.com/prunesched/prunesched/lab"
	"github.com/prunesched/prunesched/lateruse"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// Timings every row runs under.
var Timings = []string{scheduler.StrategyImmediate, scheduler.StrategyScheduled}

// Entry is one row under one timing, for one session or in total.
type Entry struct {
	Policy string `json:"policy"`
	Timing string `json:"timing"`
	// TokensSent is the prompt tokens of every request summed (the
	// session's head included); CostUSD the prompt cost (0 when unpriced).
	TokensSent int     `json:"tokens_sent"`
	CostUSD    float64 `json:"cost_usd"`
	// ItemsRemoved and TokensRemoved are what the final bundle leaves out,
	// net of placeholders (span references count their runs).
	ItemsRemoved  int `json:"items_removed"`
	TokensRemoved int `json:"tokens_removed"`
	// LaterUsed counts removed items whose distinctive terms the agent
	// used again after the removal: a proxy for a false prune, not ground
	// truth (package lateruse).
	LaterUsed int  `json:"later_used"`
	Unpriced  bool `json:"unpriced,omitempty"`
	// Examples names up to three later-used items: "item (term)".
	Examples []string `json:"examples,omitempty"`
}

// Session is one session's comparison.
type Session struct {
	Source  string `json:"source"`
	Session string `json:"session"`
	// None is the session without pruning: the baseline.
	None       Entry   `json:"none"`
	Comparison []Entry `json:"comparison"`
}

// Report is the comparison over every session, and in total.
type Report struct {
	Note     string    `json:"note"`
	Rows     []RowInfo `json:"rows"`
	Sessions []Session `json:"sessions"`
	// None and Comparison are the totals over all sessions.
	None       Entry   `json:"none"`
	Comparison []Entry `json:"comparison"`
}

// RowInfo describes a row.
type RowInfo struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	Timing      string `json:"timing"`
	Description string `json:"description"`
}

// Note is the label the report carries everywhere the count appears.
const Note = "later_used is a proxy for a false prune (a removed item's distinctive term used again by the agent), not ground truth"

// Input is one session to compare: its facts in stored form (events.Prepare)
// and where it came from.
type Input struct {
	Source string
	Facts  []events.Event
}

// Prepare turns imported sessions into Inputs: every event in stored form
// (events.Prepare: outputs into blobs, token counts filled once).
func Prepare(ctx context.Context, sessions []importers.Session, blobs events.BlobPutter, tc events.TokenCounter) ([]Input, error) {
	out := make([]Input, 0, len(sessions))
	for _, s := range sessions {
		in := Input{Source: s.Source, Facts: make([]events.Event, 0, len(s.Events))}
		for _, ev := range s.Events {
			p, err := events.Prepare(ctx, ev, blobs, tc)
			if err != nil {
				return nil, fmt.Errorf("prepare %s: %w", s.Source, err)
			}
			in.Facts = append(in.Facts, p)
		}
		out = append(out, in)
	}
	return out, nil
}

// BlobGetter serves outputs stored by content address.
type BlobGetter interface {
	GetBlob(ctx context.Context, hash string) ([]byte, error)
}

// Run compares rows over sessions. progress, when set, is called after each
// session with the number done.
func Run(ctx context.Context, rows []lab.Row, sessions []Input, blobs BlobGetter, tc projections.TokenCounter, progress func(done, total int)) (*Report, error) {
	rep := &Report{Note: Note}
	for _, r := range rows {
		rep.Rows = append(rep.Rows, RowInfo{Name: r.Name, Kind: r.Kind, Timing: r.Timing, Description: r.Description})
	}
	out := make([]Session, len(sessions))
	errs := make([]error, len(sessions))
	var mu sync.Mutex
	done := 0
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = runSession(ctx, rows, sessions[i], blobs, tc)
			mu.Lock()
			done++
			if progress != nil {
				progress(done, len(sessions))
			}
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("compare %s: %w", sessions[i].Source, err)
		}
	}
	rep.Sessions = out
	rep.None = Entry{Policy: "none", Timing: scheduler.StrategyNone}
	totals := map[[2]string]*Entry{}
	for _, s := range out {
		addEntry(&rep.None, s.None)
		for _, e := range s.Comparison {
			k := [2]string{e.Policy, e.Timing}
			t := totals[k]
			if t == nil {
				t = &Entry{Policy: e.Policy, Timing: e.Timing}
				totals[k] = t
				rep.Comparison = append(rep.Comparison, Entry{})
			}
			addEntry(t, e)
		}
	}
	i := 0
	for _, r := range rows {
		for _, tm := range Timings {
			if t := totals[[2]string{r.Name, tm}]; t != nil {
				rep.Comparison[i] = *t
				i++
			}
		}
	}
	rep.Comparison = rep.Comparison[:i]
	return rep, nil
}

func addEntry(t *Entry, e Entry) {
	t.TokensSent += e.TokensSent
	t.CostUSD += e.CostUSD
	t.ItemsRemoved += e.ItemsRemoved
	t.TokensRemoved += e.TokensRemoved
	t.LaterUsed += e.LaterUsed
	t.Unpriced = t.Unpriced || e.Unpriced
	if len(t.Examples) < 3 {
		t.Examples = append(t.Examples, e.Examples[:min(len(e.Examples), 3-len(t.Examples))]...)
	}
}

func runSession(ctx context.Context, rows []lab.Row, in Input, blobs BlobGetter, tc projections.TokenCounter) (Session, error) {
	s := Session{Source: in.Source}
	if len(in.Facts) == 0 {
		return s, nil
	}
	s.Session = in.Facts[0].Session
	content := func(h string) ([]byte, error) { return blobs.GetBlob(ctx, h) }
	for ri, r := range rows {
		marks := r.Marks(in.Facts, content)
		all := make([]events.Event, 0, len(in.Facts)+len(marks))
		all = append(append(all, in.Facts...), marks...)
		strategies := Timings
		if ri == 0 {
			strategies = append([]string{scheduler.StrategyNone}, Timings...)
		}
		ledgers := scheduler.SimulateAll(r.Policy, all, strategies...)
		if ri == 0 {
			l := ledgers[scheduler.StrategyNone]
			s.None = Entry{Policy: "none", Timing: scheduler.StrategyNone, TokensSent: l.Total.Tokens, CostUSD: l.Total.Cost, Unpriced: l.Unpriced}
		}
		for _, tm := range Timings {
			l := ledgers[tm]
			e := Entry{Policy: r.Name, Timing: tm, TokensSent: l.Total.Tokens, CostUSD: l.Total.Cost, Unpriced: l.Unpriced}
			if err := removed(ctx, in.Facts, marks, l.ApplicationEvents, blobs, tc, &e); err != nil {
				return s, fmt.Errorf("%s %s: %w", r.Name, tm, err)
			}
			rs, err := lateruse.Evaluate(ctx, in.Facts, marks, l.ApplicationEvents, blobs)
			if err != nil {
				return s, fmt.Errorf("%s %s: %w", r.Name, tm, err)
			}
			used := map[string]string{}
			for _, x := range rs {
				if x.LaterUsed && !x.Partial {
					if _, ok := used[x.Item]; !ok {
						used[x.Item] = x.Term
					}
				}
			}
			e.LaterUsed = len(used)
			ids := make([]string, 0, len(used))
			for id := range used {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids[:min(3, len(ids))] {
				e.Examples = append(e.Examples, fmt.Sprintf("%s (%s)", id, used[id]))
			}
			s.Comparison = append(s.Comparison, e)
		}
	}
	return s, nil
}

// removed fills what the final bundle leaves out, from the production
// projection over the merged log.
func removed(ctx context.Context, facts, marks, apps []events.Event, blobs BlobGetter, tc projections.TokenCounter, e *Entry) error {
	sess := projections.NewSession(facts[0].Tenant, facts[0].Session)
	for _, ev := range events.MergeLog(facts, marks, apps) {
		sess.Observe(ev)
	}
	st, err := sess.Stats(ctx, blobs, tc)
	if err != nil {
		return err
	}
	e.TokensRemoved = st.Tokens.Removed - st.Tokens.Placeholder
	for _, it := range sess.Items() {
		if it.Pruned && (it.Applied == nil || it.Applied.Reason != events.ReasonSpanReference) {
			e.ItemsRemoved++
		}
	}
	return nil
}
