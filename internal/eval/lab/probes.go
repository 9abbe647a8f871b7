package lab

import (
	"context"
	"fmt"
	"strings"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/eval/lab/fixtures"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/projections"
)

// ProbeContext is one probe as a row leaves the context for it: the
// bundle rendered for the probe's request under the row's own timing (its
// last user message asks the probe's question), and the lab's
// evidence-presence outcome there. A model run (package lab/modelrun)
// sends the bundle to a model and scores its answer.
type ProbeContext struct {
	Condition string
	// OwnPlaceholder is false for the peers, whose real placeholders name
	// no original: recovery is not theirs to offer.
	OwnPlaceholder bool
	Session        string
	Probe          fixtures.Probe
	Bundle         projections.Bundle
	// Blobs serves the bundle's stored outputs (rendering, recovery).
	Blobs projections.BlobGetter
	// EvidencePresent is the lab's pass (the evidence verbatim in the
	// rendered bundle); Recoverable that it is absent and a holder is
	// rendered as our placeholder naming its handle.
	EvidencePresent, Recoverable bool
	// Index is the probe's position among the row's probes (0-based, over
	// every session), Total their number.
	Index, Total int
}

// ConditionNames returns the lab's row names in report order.
func ConditionNames() ([]string, error) {
	conds, err := conditions()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(conds))
	for i, c := range conds {
		out[i] = c.name
	}
	return out, nil
}

// WalkProbes generates cfg's fixture and calls fn for every probe of every
// session under each named row, row by row in report order (every row when
// names is empty), sessions and probes in order. It fails on a name that
// is no row, and stops at fn's first error. Deterministic.
func WalkProbes(ctx context.Context, cfg Config, names []string, fn func(ProbeContext) error) error {
	conds, err := conditions()
	if err != nil {
		return err
	}
	if len(names) > 0 {
		byName := map[string]condition{}
		var all []string
		for _, c := range conds {
			byName[c.name] = c
			all = append(all, c.name)
		}
		var picked []condition
		for _, n := range names {
			c, ok := byName[n]
			if !ok {
				return fmt.Errorf("lab: no row %q (rows: %s)", n, strings.Join(all, ", "))
			}
			picked = append(picked, c)
		}
		conds = picked
	}
	tc := tokens.New()
	if err := tc.Check(); err != nil {
		return err
	}
	fc := fixtures.Config{Seed: cfg.Seed, Sessions: cfg.Sessions, MinCalls: cfg.MinCalls, MaxCalls: cfg.MaxCalls}
	if err := fc.Validate(); err != nil {
		return err
	}
	fx, err := fixtures.Generate(fc, tc)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	total := 0
	for _, s := range fx.Sessions {
		total += len(s.Probes)
	}
	for _, c := range conds {
		n := 0
		for _, s := range fx.Sessions {
			if err := ctx.Err(); err != nil {
				return err
			}
			g, marks, apps, err := ownTiming(c, fx, s)
			if err != nil {
				return fmt.Errorf("lab: condition %s session %s: %w", c.name, s.ID, err)
			}
			visit := func(p fixtures.Probe, b projections.Bundle, present, recoverable bool) error {
				pc := ProbeContext{Condition: c.name, OwnPlaceholder: !c.foreignPlaceholder, Session: s.ID, Probe: p, Bundle: b, Blobs: fx.Blobs,
					EvidencePresent: present, Recoverable: recoverable, Index: n, Total: total}
				n++
				return fn(pc)
			}
			if _, _, err := behaviour(ctx, fx, g, g.Events, marks, apps, tc, !c.foreignPlaceholder, visit); err != nil {
				return fmt.Errorf("lab: condition %s session %s: %w", c.name, s.ID, err)
			}
		}
	}
	return nil
}

// ownTiming runs one row on one session under its own timing, as evaluate
// does: the session after the row's script, the marks, and the
// applications (the production cores' for a production row, the
// production scheduler's replay of the marks otherwise).
func ownTiming(c condition, fx *fixtures.Fixture, s *fixtures.Session) (*fixtures.Session, []events.Event, []events.Event, error) {
	if c.script != nil {
		g, err := c.script(s)
		if err != nil {
			return nil, nil, nil, err
		}
		s = g
	}
	if c.pol != nil {
		marks, apps := runProduction(*c.pol, s.Events, fx.Blobs)
		return s, marks, apps, nil
	}
	var marks []events.Event
	if c.marks != nil {
		marks = c.marks(s)
	}
	p := policy.Default()
	p.Scheduler.DefaultProvider = providers[0]
	apps, _ := replay(p, s.Events, marks, c.primary)
	return s, marks, apps, nil
}
