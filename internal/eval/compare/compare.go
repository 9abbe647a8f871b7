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
	"github.com/prunesched/prunesched/internal/eval/lab"
	"github.com/prunesched/prunesched/internal/eval/lateruse"
	"github.com/prunesched/prunesched/internal/importers"
	"github.com/prunesched/prunesched/policy"
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
	LaterUsed int `json:"later_used"`
	// Recoveries counts the removed items fetched back by their handle:
	// one per later-used item, at the request whose answer first uses it
	// again. CostWithRecoveries is CostUSD plus what they add
	// (scheduler.PriceRecoveries, answers of RecoveryAnswerTokens): what
	// the row costs when a removal later needed costs a recovery, not the
	// task. Equal to CostUSD without recoveries.
	Recoveries         int     `json:"recoveries"`
	CostWithRecoveries float64 `json:"cost_with_recoveries"`
	Unpriced           bool    `json:"unpriced,omitempty"`
	// Examples names up to three later-used items: "item (term)".
	Examples []string `json:"examples,omitempty"`
}

// Session is one session's comparison.
type Session struct {
	Source  string `json:"source"`
	Session string `json:"session"`
	// Requests is the session's model requests.
	Requests int `json:"requests"`
	// None is the session without pruning: the baseline.
	None       Entry   `json:"none"`
	Comparison []Entry `json:"comparison"`
}

// Report is the comparison over every session, and in total.
type Report struct {
	Note string `json:"note"`
	// RecoveryNote states how recoveries are priced; RecoveryAnswerTokens
	// is the output tokens assumed for one recovery call.
	RecoveryNote         string    `json:"recovery_note"`
	RecoveryAnswerTokens int       `json:"recovery_answer_tokens"`
	Rows                 []RowInfo `json:"rows"`
	// Requests is the model requests of every session.
	Requests int       `json:"requests"`
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

// RecoveryAnswerTokens is the output tokens assumed for one recovery call
// (scheduler.RecoveryAnswerTokens, shared with the lab).
const RecoveryAnswerTokens = scheduler.RecoveryAnswerTokens

// recoveryNote is how the report says recoveries are priced.
func recoveryNote() string {
	return fmt.Sprintf("each later-used item a row removed is fetched back once by its handle (context_recover) at the request whose answer first uses it: "+
		"that answer becomes a recovery call (%d output tokens); one extra request re-sends the context (read from cache where the scheduler's cache model has it warm, the rest written) "+
		"with the item appended as a tool result; the item then stays in context to the end of the session, carried by every later request at the cache model's price; "+
		"cost_with_recoveries is cost_usd plus all of that", RecoveryAnswerTokens)
}

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
func Run(ctx context.Context, rows []lab.Row, sessions []Input, blobs BlobGetter, tc events.TokenCounter, progress func(done, total int)) (*Report, error) {
	rep := &Report{Note: Note, RecoveryNote: recoveryNote(), RecoveryAnswerTokens: RecoveryAnswerTokens}
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
		rep.Requests += s.Requests
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
	t.Recoveries += e.Recoveries
	t.CostWithRecoveries += e.CostWithRecoveries
	t.Unpriced = t.Unpriced || e.Unpriced
	if len(t.Examples) < 3 {
		t.Examples = append(t.Examples, e.Examples[:min(len(e.Examples), 3-len(t.Examples))]...)
	}
}

func runSession(ctx context.Context, rows []lab.Row, in Input, blobs BlobGetter, tc events.TokenCounter) (Session, error) {
	s := Session{Source: in.Source}
	if len(in.Facts) == 0 {
		return s, nil
	}
	s.Session = in.Facts[0].Session
	content := func(h string) ([]byte, error) { return blobs.GetBlob(ctx, h) }
	factOf := make(map[string]int, len(in.Facts))
	for i, f := range in.Facts {
		factOf[f.ID] = i
	}
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
			s.None = Entry{Policy: "none", Timing: scheduler.StrategyNone, TokensSent: l.Total.Tokens, CostUSD: l.Total.Cost,
				CostWithRecoveries: l.Total.Cost, Unpriced: l.Unpriced}
			s.Requests = len(l.Requests)
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
			used := map[string]lateruse.Removal{} // item -> its first later-used removal
			for _, x := range rs {
				if x.LaterUsed && !x.Partial {
					if _, ok := used[x.Item]; !ok {
						used[x.Item] = x
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
				e.Examples = append(e.Examples, fmt.Sprintf("%s (%s)", id, used[id].Term))
			}
			if err := recoveries(r.Policy, in.Facts, marks, l, ids, used, factOf, &e); err != nil {
				return s, fmt.Errorf("%s %s: %w", r.Name, tm, err)
			}
			s.Comparison = append(s.Comparison, e)
		}
	}
	return s, nil
}

// recoveries fills e's recoveries and cost with them: each later-used
// item (ids, sorted; used names its first later-used removal) is fetched
// back at the request whose answer first uses it, priced by the scheduler
// under the row's policy on the schedule of l.
func recoveries(p policy.Policy, facts, marks []events.Event, l scheduler.Ledger, ids []string, used map[string]lateruse.Removal, factOf map[string]int, e *Entry) error {
	e.CostWithRecoveries = e.CostUSD
	if len(ids) == 0 {
		return nil
	}
	recs := make([]scheduler.Recovery, 0, len(ids))
	for _, id := range ids {
		f, ok := factOf[used[id].UsedBy]
		if !ok {
			return fmt.Errorf("recovery of %s: the event that used it, %s, is not a fact of the session", id, used[id].UsedBy)
		}
		recs = append(recs, scheduler.Recovery{Item: id, Fact: f})
	}
	rc, err := scheduler.PriceRecoveries(p, events.MergeLog(facts, marks, l.ApplicationEvents), l.Head, recs, RecoveryAnswerTokens)
	if err != nil {
		return err
	}
	e.Recoveries = rc.Recoveries
	e.CostWithRecoveries += rc.Cost
	return nil
}

// removed fills what the final bundle leaves out, from the production
// projection over the merged log.
func removed(ctx context.Context, facts, marks, apps []events.Event, blobs BlobGetter, tc events.TokenCounter, e *Entry) error {
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
