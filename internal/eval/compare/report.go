package compare

import (
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/prunesched/prunesched/internal/eval/lab"
	"github.com/prunesched/prunesched/scheduler"
)

// WriteText writes the comparison as tables a person reads: the totals,
// then each session.
func WriteText(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "Policies on %d session(s), %d model request(s): what each row would have done.\nNote: %s.\nRecoveries: %s.\n\n",
		len(r.Sessions), r.Requests, r.Note, r.RecoveryNote)
	if err := writeTable(w, r.None, r.Comparison); err != nil {
		return err
	}
	for _, s := range r.Sessions {
		fmt.Fprintf(w, "\n%s (%s)\n", filepath.Base(s.Source), s.Session)
		if err := writeTable(w, s.None, s.Comparison); err != nil {
			return err
		}
	}
	return nil
}

func writeTable(w io.Writer, none Entry, es []Entry) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\ttiming\ttokens sent\tvs none\tcost USD\tvs none\titems removed\ttokens removed\tlater-used (proxy)\trecoveries\tcost w/ recoveries\tvs none\t")
	fmt.Fprintf(tw, "none\t-\t%d\t\t%s\t\t0\t0\t0\t0\t%s\t\t\n", none.TokensSent, money(none, none.CostUSD), money(none, none.CostWithRecoveries))
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t\n", e.Policy, e.Timing, e.TokensSent, pct(e.TokensSent, none.TokensSent),
			money(e, e.CostUSD), pctF(e.CostUSD, none.CostUSD), e.ItemsRemoved, e.TokensRemoved, e.LaterUsed,
			e.Recoveries, money(e, e.CostWithRecoveries), pctF(e.CostWithRecoveries, none.CostUSD))
	}
	return tw.Flush()
}

// money prints a cost of e: "unpriced" when nothing of it was priced.
func money(e Entry, usd float64) string {
	if e.Unpriced && usd == 0 {
		return "unpriced"
	}
	return fmt.Sprintf("%.4f", usd)
}

// WriteSVG draws, per row under scheduled timing, the tokens sent saved
// (a dot) and the cost with recoveries saved (a ring, on the same line),
// both in percent against no pruning, against the later-used items: the
// real-trace counterpart of the lab's saved-vs-false-prunes chart. A
// saving below zero (costing more than no pruning) is drawn at zero.
func WriteSVG(w io.Writer, r *Report) error {
	kind := map[string]string{}
	for _, x := range r.Rows {
		kind[x.Name] = x.Kind
	}
	var pts []lab.Point
	for _, e := range r.Comparison {
		if e.Timing != scheduler.StrategyScheduled || r.None.TokensSent == 0 {
			continue
		}
		saved := 100 * float64(r.None.TokensSent-e.TokensSent) / float64(r.None.TokensSent)
		p := lab.Point{Label: e.Policy, Kind: kind[e.Policy], X: max(saved, 0), Y: float64(e.LaterUsed)}
		if r.None.CostUSD > 0 {
			p.Alt, p.HasAlt = max(100*(r.None.CostUSD-e.CostWithRecoveries)/r.None.CostUSD, 0), true
		}
		pts = append(pts, p)
	}
	return lab.WritePointsSVG(w, "Savings against later-used items (real sessions, scheduled)",
		"saved against no pruning (%): dot = tokens sent, ring = cost with recoveries", "later-used items (a proxy, not ground truth)",
		fmt.Sprintf("%d sessions; later-used = a removed item's term used again by the agent, priced as one recovery; a ring at 0 costs more than none", len(r.Sessions)),
		"cost with\nrecoveries", pts)
}
