package compare

import (
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/prunesched/prunesched/lab"
	"github.com/prunesched/prunesched/scheduler"
)

// WriteText writes the comparison as tables a person reads: the totals,
// then each session.
func WriteText(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "Policies on %d session(s): what each row would have done.\nNote: %s.\n\n", len(r.Sessions), r.Note)
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
	fmt.Fprintln(tw, "policy\ttiming\ttokens sent\tvs none\tcost USD\tvs none\titems removed\ttokens removed\tlater-used (proxy)\t")
	fmt.Fprintf(tw, "none\t-\t%d\t\t%s\t\t0\t0\t0\t\n", none.TokensSent, cost(none))
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t\n", e.Policy, e.Timing, e.TokensSent, pct(e.TokensSent, none.TokensSent),
			cost(e), pctF(e.CostUSD, none.CostUSD), e.ItemsRemoved, e.TokensRemoved, e.LaterUsed)
	}
	return tw.Flush()
}

func cost(e Entry) string {
	if e.Unpriced && e.CostUSD == 0 {
		return "unpriced"
	}
	return fmt.Sprintf("%.4f", e.CostUSD)
}

// WriteSVG draws, per row under scheduled timing, the tokens sent saved
// (percent, against no pruning) against the later-used items: the
// real-trace counterpart of the lab's saved-vs-false-prunes chart.
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
		pts = append(pts, lab.Point{Label: e.Policy, Kind: kind[e.Policy], X: max(saved, 0), Y: float64(e.LaterUsed)})
	}
	return lab.WritePointsSVG(w, "Tokens saved against later-used items (real sessions, scheduled)",
		"tokens sent saved against no pruning (%)", "later-used items (a proxy, not ground truth)",
		fmt.Sprintf("%d sessions; later-used = a removed item's distinctive term used again by the agent", len(r.Sessions)), pts)
}
