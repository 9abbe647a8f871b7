package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/prunesched/prunesched/internal/apiclient"
	"github.com/prunesched/prunesched/internal/eval/analyze"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// sessionSavings is one session's listing: its info and what pruning saved.
type sessionSavings struct {
	info    projections.SessionInfo
	ledgers map[string]*scheduler.Ledger
	savings analyze.Savings
}

// fetchSessions reads the tenant's sessions (or the one named) with their
// info (the stats endpoint) and economics ledgers (the economics endpoint:
// the same replay as analyze, so the numbers agree).
func fetchSessions(ctx context.Context, c *client, only string) ([]sessionSavings, error) {
	names := []string{only}
	if only == "" {
		var res struct {
			Sessions []string `json:"sessions"`
		}
		if _, err := c.getJSON(ctx, "/v1/sessions", false, nil, &res); err != nil {
			return nil, err
		}
		names = res.Sessions
	}
	out := make([]sessionSavings, 0, len(names))
	for _, name := range names {
		var st struct {
			Info projections.SessionInfo `json:"info"`
		}
		if _, err := c.getJSON(ctx, apiclient.SessionPath(name, "/stats"), false, nil, &st); err != nil {
			return nil, fmt.Errorf("session %s: %w", name, err)
		}
		var eco struct {
			Ledgers map[string]*scheduler.Ledger `json:"ledgers"`
		}
		if _, err := c.getJSON(ctx, apiclient.SessionPath(name, "/economics"), false, nil, &eco); err != nil {
			return nil, fmt.Errorf("session %s: %w", name, err)
		}
		ss := sessionSavings{info: st.Info, ledgers: eco.Ledgers, savings: analyze.NewSavings()}
		if ss.info.Session == "" {
			ss.info.Session = name
		}
		ss.savings.AddLedgers(eco.Ledgers)
		out = append(out, ss)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].info.Started.Before(out[j].info.Started) })
	return out, nil
}

// savingsJSON is the --json form of a Savings: against no pruning, what the
// scheduler and immediate application saved, and the scheduler against
// immediate application.
type savingsJSON struct {
	Sessions int `json:"sessions"`
	// Unpriced sessions count in the tokens, not in the dollars.
	Unpriced int `json:"unpriced"`
	// CostNone is the prompt cost (USD) without pruning; TokensNone the
	// tokens sent without pruning.
	CostNone   float64 `json:"cost_none"`
	TokensNone int     `json:"tokens_none"`
	// SavedUSD and SavedTokens: the scheduler against no pruning.
	SavedUSD       float64 `json:"saved_usd"`
	SavedPct       float64 `json:"saved_pct"`
	SavedTokens    int     `json:"saved_tokens"`
	SavedTokensPct float64 `json:"saved_tokens_pct"`
	// ImmediateSavedUSD and ImmediateSavedTokens: immediate application
	// against no pruning (negative: it cost more).
	ImmediateSavedUSD    float64 `json:"immediate_saved_usd"`
	ImmediateSavedTokens int     `json:"immediate_saved_tokens"`
	// VsImmediateUSD is what the scheduler saved against immediate
	// application.
	VsImmediateUSD float64 `json:"vs_immediate_usd"`
}

func toSavingsJSON(s analyze.Savings) savingsJSON {
	sc, im := scheduler.StrategyScheduled, scheduler.StrategyImmediate
	return savingsJSON{
		Sessions: s.Sessions, Unpriced: s.Unpriced,
		CostNone: s.Cost[scheduler.StrategyNone], TokensNone: s.Tokens[scheduler.StrategyNone],
		SavedUSD: s.SavedUSD(sc), SavedPct: s.PctUSD(sc), SavedTokens: s.SavedTokens(sc), SavedTokensPct: s.PctTokens(sc),
		ImmediateSavedUSD: s.SavedUSD(im), ImmediateSavedTokens: s.SavedTokens(im),
		VsImmediateUSD: s.Cost[im] - s.Cost[sc],
	}
}

// byDay splits sessions' ledgers by the UTC day of each request.
func byDay(ss []sessionSavings) (days []string, per map[string]analyze.Savings) {
	per = map[string]analyze.Savings{}
	for _, s := range ss {
		split := map[string]map[string]*scheduler.Ledger{}
		for st, l := range s.ledgers {
			if l == nil {
				continue
			}
			for _, r := range l.Requests {
				d := r.Time.UTC().Format(time.DateOnly)
				if split[d] == nil {
					split[d] = map[string]*scheduler.Ledger{}
				}
				dl := split[d][st]
				if dl == nil {
					dl = &scheduler.Ledger{Unpriced: l.Unpriced}
					split[d][st] = dl
				}
				dl.Total.Tokens += r.Tokens
				dl.Total.Cost += r.Cost
			}
		}
		for d, ls := range split {
			sv, ok := per[d]
			if !ok {
				sv = analyze.NewSavings()
				days = append(days, d)
			}
			sv.AddLedgers(ls)
			per[d] = sv
		}
	}
	sort.Strings(days)
	return days, per
}

func runStats(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "stats", "[flags] [SESSION]", `
Show what pruning saved: prompt cost (USD) and tokens sent (summed over
requests; the glossary in docs/cli.md), per session and for
the whole tenant by day (the UTC day of each request), for the scheduler and
for immediate application, both against no pruning, and the scheduler
against immediate application. The numbers are the economics ledgers of
GET /v1/sessions/{s}/economics (the replay analyze reports). Sessions whose
model has no price are counted in tokens only. A session with prunes but
no priced request after them (the request failed open, or none followed)
is said to have saved nothing yet, and why.`)
	cf := addClientFlags(fs, e)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usagef("want at most one SESSION")
	}
	c, err := cf.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	ss, err := fetchSessions(ctx, c, fs.Arg(0))
	if err != nil {
		return err
	}
	fleet := analyze.NewSavings()
	for _, s := range ss {
		fleet.Merge(s.savings)
	}
	days, per := byDay(ss)
	if *asJSON {
		type sessJSON struct {
			projections.SessionInfo
			Savings savingsJSON `json:"savings"`
			// NotYetSaved says why a session with prunes saved
			// nothing yet (projections.NotYetSaved).
			NotYetSaved string `json:"not_yet_saved,omitempty"`
		}
		type dayJSON struct {
			Day     string      `json:"day"`
			Savings savingsJSON `json:"savings"`
		}
		out := struct {
			Sessions []sessJSON  `json:"sessions"`
			Days     []dayJSON   `json:"days"`
			Total    savingsJSON `json:"total"`
		}{Sessions: []sessJSON{}, Days: []dayJSON{}, Total: toSavingsJSON(fleet)}
		for _, s := range ss {
			out.Sessions = append(out.Sessions, sessJSON{s.info, toSavingsJSON(s.savings), s.notYetSaved()})
		}
		for _, d := range days {
			out.Days = append(out.Days, dayJSON{d, toSavingsJSON(per[d])})
		}
		return printJSON(e.stdout, out)
	}
	if len(ss) == 0 {
		fmt.Fprintln(e.stdout, "no sessions")
		return nil
	}
	var prunes, applied, requests int
	for _, s := range ss {
		prunes, applied, requests = prunes+s.info.Prunes, applied+s.info.Applied, requests+s.requests()
	}
	note := projections.NotYetSaved(prunes, applied, requests)
	headlineNote := note != ""
	if headlineNote {
		// No prune applied to a priced request anywhere: a headline of
		// $0.00 would read as "pruning did nothing".
		fmt.Fprintf(e.stdout, "Nothing saved yet: %s.\n", note)
	} else {
		fmt.Fprintln(e.stdout, fleet.Headline())
	}
	for _, s := range ss {
		if note := s.notYetSaved(); note != "" && !(headlineNote && len(ss) == 1) {
			fmt.Fprintf(e.stdout, "session %s: nothing saved yet: %s.\n", s.info.Session, note)
		}
	}
	fmt.Fprintln(e.stdout)
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "SESSION\tAGENT\t"+savingsColumns)
	for _, s := range ss {
		if s.notYetSaved() != "" {
			fmt.Fprintf(tw, "%s\t%s\tnot yet\t-\t-\t-\n", s.info.Session, orDash(s.info.Agent))
			continue
		}
		writeSavingsRow(tw, s.info.Session, s.info.Agent, s.savings)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout)
	tw = newTable(e.stdout)
	fmt.Fprintln(tw, "DAY (UTC)\tSESSIONS\t"+savingsColumns)
	for _, d := range days {
		writeSavingsRow(tw, d, fmt.Sprint(per[d].Sessions), per[d])
	}
	writeSavingsRow(tw, "total", fmt.Sprint(fleet.Sessions), fleet)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "\n"+savingsUnits)
	return nil
}

// savingsColumns are the savings columns of stats' tables, and
// savingsUnits the line under them that names their units.
const savingsColumns = "SAVED (USD)\tTOKENS SAVED\tIMMEDIATE SAVED (USD / TOKENS)\tVS IMMEDIATE (USD)"

const savingsUnits = "Saved against no pruning: USD is " + projections.UnitPromptCost + ", TOKENS are " + projections.UnitTokensSent +
	"; immediate applies every prune at once; VS IMMEDIATE is what the scheduler saved against that."

// requests is the number of model requests the session's economics
// priced (the scheduled ledger's).
func (s sessionSavings) requests() int {
	if l := s.ledgers[scheduler.StrategyScheduled]; l != nil {
		return len(l.Requests)
	}
	return 0
}

// notYetSaved says why a session with prunes shows no saving, "" when it
// can show one (projections.NotYetSaved).
func (s sessionSavings) notYetSaved() string {
	return projections.NotYetSaved(s.info.Prunes, s.info.Applied, s.requests())
}

// writeSavingsRow writes name, a second column and the savings columns.
func writeSavingsRow(w io.Writer, name, second string, s analyze.Savings) {
	j := toSavingsJSON(s)
	saved, imm, vs := "unpriced", "unpriced", "-"
	if s.Unpriced < s.Sessions {
		saved = fmt.Sprintf("%s (%.1f%%)", analyze.USD(j.SavedUSD), j.SavedPct)
		imm = analyze.USD(j.ImmediateSavedUSD)
		vs = analyze.USD(j.VsImmediateUSD)
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s (%.1f%%)\t%s / %s\t%s\n", name, orDash(second), saved,
		analyze.Thousands(j.SavedTokens), j.SavedTokensPct, imm, analyze.Thousands(j.ImmediateSavedTokens), vs)
}

func runSessions(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "sessions", "[flags]", `
List the tenant's sessions, oldest first: agent, title (else the first line
of the first user message), start, items, prunes (applied/decided) and the
prompt cost (USD) the scheduler saved against no pruning.
--ids prints the session ids alone, one per line.`)
	cf := addClientFlags(fs, e)
	asJSON := fs.Bool("json", false, "print JSON")
	ids := fs.Bool("ids", false, "print only the session ids")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	c, err := cf.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	if *ids {
		var res struct {
			Sessions []string `json:"sessions"`
		}
		if _, err := c.getJSON(ctx, "/v1/sessions", false, nil, &res); err != nil {
			return err
		}
		for _, s := range res.Sessions {
			fmt.Fprintln(e.stdout, s)
		}
		return nil
	}
	ss, err := fetchSessions(ctx, c, "")
	if err != nil {
		return err
	}
	if *asJSON {
		type row struct {
			projections.SessionInfo
			Savings savingsJSON `json:"savings"`
			// NotYetSaved says why a session with prunes saved
			// nothing yet (projections.NotYetSaved).
			NotYetSaved string `json:"not_yet_saved,omitempty"`
		}
		out := struct {
			Sessions []row `json:"sessions"`
		}{Sessions: []row{}}
		for _, s := range ss {
			out.Sessions = append(out.Sessions, row{s.info, toSavingsJSON(s.savings), s.notYetSaved()})
		}
		return printJSON(e.stdout, out)
	}
	if len(ss) == 0 {
		fmt.Fprintln(e.stdout, "no sessions")
		return nil
	}
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "SESSION\tAGENT\tTITLE\tSTARTED (UTC)\tITEMS\tPRUNES APPLIED/DECIDED\tSAVED (USD)")
	var notes []string
	for _, s := range ss {
		in := s.info
		started := "-"
		if !in.Started.IsZero() {
			started = in.Started.UTC().Format("2006-01-02 15:04")
		}
		saved := "unpriced"
		if s.savings.Unpriced == 0 {
			saved = analyze.USD(s.savings.SavedUSD(scheduler.StrategyScheduled))
		}
		if note := s.notYetSaved(); note != "" {
			saved = "not yet (see below)"
			notes = append(notes, fmt.Sprintf("session %s: nothing saved yet: %s.", in.Session, note))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d/%d\t%s\n", in.Session, orDash(in.Agent), orDash(abbreviate(in.Title, 40)), started, in.Items, in.Applied, in.Prunes, saved)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "\nSAVED (USD) is "+projections.UnitPromptCost+" the scheduler saved against no pruning ('prunesched stats' has tokens and days).")
	for _, n := range notes {
		fmt.Fprintln(e.stdout, n)
	}
	return nil
}

// abbreviate cuts s to n runes with an ellipsis.
func abbreviate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
