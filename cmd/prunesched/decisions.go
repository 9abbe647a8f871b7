package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/apiclient"
	"github.com/prunesched/prunesched/placeholder"
	"github.com/prunesched/prunesched/projections"
	"github.com/prunesched/prunesched/scheduler"
)

// verboseWidth is the width `decisions -v` lines fit in.
const verboseWidth = 100

func runDecisions(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "decisions", "[flags] SESSION", `
List a session's decisions: the latest mark per item with its certificate
(rung, reason code, evidence, recoverability, protection) and whether and
when the scheduler applied it. CONTROL is who decided: "rule" (the
evidence ladder), "agent" (the model asked, through context_prune) or
"person" (a manual prune, pin or restore). APPLIED is the request and trigger that
applied the mark, "pending" when the scheduler holds it back (the same list
'prunesched pending' prints), "-" otherwise (KEEP, ABSTAIN, DEFER, or a
mark that changes nothing in the bundle).`)
	cf := addClientFlags(fs, e)
	asJSON := fs.Bool("json", false, "print the certificates as JSON")
	verbose := fs.BoolP("verbose", "v", false, "show each decision's evidence and recovery under it (lines fit 100 columns)")
	c, err := cf.parseAndConnect(ctx, fs, args, 1, "want SESSION")
	if err != nil {
		return err
	}
	defer c.close()
	var res struct {
		Decisions []projections.Decision `json:"decisions"`
	}
	if done, err := c.getJSON(ctx, apiclient.SessionPath(fs.Arg(0), "/decisions"), *asJSON, e.stdout, &res); done || err != nil {
		return err
	}
	if len(res.Decisions) == 0 {
		fmt.Fprintln(e.stdout, "no decisions yet")
		return nil
	}
	var pend struct {
		Pending []scheduler.PendingMark `json:"pending"`
	}
	if _, err := c.getJSON(ctx, apiclient.SessionPath(fs.Arg(0), "/pending"), false, nil, &pend); err != nil {
		return err
	}
	pending := map[string]bool{}
	for _, p := range pend.Pending {
		pending[p.Mark] = true
	}
	if *verbose {
		writeDecisionsVerbose(e.stdout, res.Decisions, pending)
		return nil
	}
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "ITEM\tTOOL\tDECISION\tCONTROL\tRUNG\tREASON\tAPPLIED\tTOKENS "+strings.ToUpper(projections.UnitContextNow)+"\tPROTECTION\tSOURCE")
	for _, d := range res.Decisions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.Item, orDash(d.Tool), d.Decision, orDash(d.Control), orDash(string(d.Rung)), d.Reason, appliedCell(d, pending), d.TokensEstimated, orDash(protection(d)), orDash(d.Source))
	}
	return tw.Flush()
}

// appliedCell is the APPLIED column: the one rule shared with `pending`
// is the scheduler's pending list (by mark id); a mark neither applied nor
// on it shows "-".
func appliedCell(d projections.Decision, pending map[string]bool) string {
	switch {
	case d.Applied:
		return fmt.Sprintf("%s (%s)", d.AppliedAt, d.Trigger)
	case pending[d.Mark]:
		return "pending"
	}
	return "-"
}

func protection(d projections.Decision) string {
	prot := make([]string, len(d.Protection))
	for i, p := range d.Protection {
		prot[i] = string(p)
	}
	return strings.Join(prot, ",")
}

// writeDecisionsVerbose prints one block per decision, every line at most
// verboseWidth columns: a head line, then evidence, protection and recovery
// lines, long values wrapped with an indent and hashes shortened to 16 hex
// digits (the whole certificate is in --json).
func writeDecisionsVerbose(w io.Writer, ds []projections.Decision, pending map[string]bool) {
	for i, d := range ds {
		if i > 0 {
			fmt.Fprintln(w)
		}
		head := []string{d.Item}
		if d.Tool != "" {
			head = append(head, d.Tool+" "+d.Source)
		}
		head = append(head, string(d.Decision))
		if d.Control != "" {
			head = append(head, "by "+d.Control)
		}
		if d.Rung != "" {
			head = append(head, string(d.Rung))
		}
		head = append(head, string(d.Reason), fmt.Sprintf("%d tokens %s", d.TokensEstimated, projections.UnitContextNow), "applied: "+appliedCell(d, pending))
		wrapLine(w, "", strings.Join(head, "  "))
		for _, ev := range d.Evidence {
			if line, ok := spanLine(ev); ok {
				wrapLine(w, "  evidence    ", line)
				continue
			}
			parts := []string{ev.Kind}
			if ev.Item != "" {
				parts = append(parts, "item "+ev.Item)
			}
			if ev.Hash != "" {
				parts = append(parts, shortHash(ev.Hash))
			}
			if ev.Value != "" {
				parts = append(parts, ev.Value)
			}
			if ev.Detail != "" {
				parts = append(parts, ev.Detail)
			}
			wrapLine(w, "  evidence    ", strings.Join(parts, "  "))
		}
		if p := protection(d); p != "" {
			wrapLine(w, "  protection  ", p)
		}
		if r := d.Recoverability; r != nil && r.Command != "" {
			wrapLine(w, "  recover     ", r.Command)
		}
	}
}

// shortHash keeps an algorithm prefix and the first 16 hex digits.
func shortHash(h string) string {
	algo, hex, ok := strings.Cut(h, ":")
	if !ok {
		algo, hex = "", h
	}
	if len(hex) > 16 {
		hex = hex[:16] + "…"
	}
	if algo == "" {
		return hex
	}
	return algo + ":" + hex
}

// wrapLine writes prefix+text wrapped at verboseWidth columns on spaces;
// continuation lines are indented to the prefix's width plus two. A word
// longer than a line is cut.
func wrapLine(w io.Writer, prefix, text string) {
	indent := strings.Repeat(" ", utf8.RuneCountInString(prefix)+2)
	line, lead := prefix, prefix
	width := func(s string) int { return utf8.RuneCountInString(s) }
	flush := func() {
		fmt.Fprintln(w, strings.TrimRight(line, " "))
		line, lead = indent, indent
	}
	for _, word := range strings.Fields(text) {
		for width(lead)+width(word) > verboseWidth {
			// a word that fits no line: cut it
			room := verboseWidth - width(lead)
			if line != lead {
				flush()
				continue
			}
			r := []rune(word)
			line += string(r[:room])
			word = string(r[room:])
			flush()
		}
		sep := " "
		if line == lead {
			sep = ""
		}
		if width(line)+len(sep)+width(word) > verboseWidth {
			flush()
			sep = ""
		}
		line += sep + word
	}
	if line != lead || line == prefix {
		flush()
	}
}

// spanLine reads a span reference's evidence as line ranges ("span: lines
// 10-57 are lines 3-50 of item t3"); the run's hash is in --json.
func spanLine(ev events.Evidence) (string, bool) {
	var sp placeholder.Span
	if ev.Kind != placeholder.SpanEvidenceKind || placeholder.ParseSpanRanges(ev.Value, &sp) != nil {
		return "", false
	}
	line := fmt.Sprintf("span: lines %d-%d are lines %d-%d of item %s", sp.From, sp.To, sp.SrcFrom, sp.SrcTo, ev.Item)
	if sp.Renumbered > 0 {
		line += fmt.Sprintf(" (renumbered from %d)", sp.Renumbered)
	}
	return line, true
}
