package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/prunesched/prunesched/projections"
)

func runDecisions(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "decisions", "[flags] SESSION", `
List a session's decisions: the latest mark per item with its certificate
(rung, reason code, evidence, recoverability, protection) and whether and
when the scheduler applied it.`)
	cf := addClientFlags(fs, e)
	asJSON := fs.Bool("json", false, "print the certificates as JSON")
	verbose := fs.Bool("v", false, "show evidence and recoverability under each row")
	c, err := cf.parseAndConnect(ctx, fs, args, 1, "want SESSION")
	if err != nil {
		return err
	}
	defer c.close()
	var res struct {
		Decisions []projections.Decision `json:"decisions"`
	}
	if done, err := c.getJSON(ctx, sessionPath(fs.Arg(0), "/decisions"), *asJSON, e.stdout, &res); done || err != nil {
		return err
	}
	if len(res.Decisions) == 0 {
		fmt.Fprintln(e.stdout, "no decisions yet")
		return nil
	}
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "ITEM\tDECISION\tRUNG\tREASON\tAPPLIED\tTOKENS\tPROTECTION")
	for _, d := range res.Decisions {
		applied := "pending"
		if d.Applied {
			applied = fmt.Sprintf("%s (%s)", d.AppliedAt, d.Trigger)
		}
		prot := make([]string, len(d.Protection))
		for i, p := range d.Protection {
			prot[i] = string(p)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", d.Item, d.Decision, orDash(string(d.Rung)), d.Reason, applied, d.TokensEstimated, orDash(strings.Join(prot, ",")))
		if *verbose {
			for _, ev := range d.Evidence {
				fmt.Fprintf(tw, "  evidence\t%s\t%s\t%s\t%s\t\t\n", ev.Kind, ev.Item, ev.Hash, ev.Detail)
			}
			if r := d.Recoverability; r != nil {
				fmt.Fprintf(tw, "  recover\t%s\t\t\t\t\t\n", r.Command)
			}
		}
	}
	return tw.Flush()
}
