package projections

import (
	"time"

	"github.com/prunesched/prunesched/events"
)

// DecisionSummary is the head of a Decision: what the latest mark decided
// for an item and whether an application put it into effect, without the
// certificate. Reports that list every item's decision (analyze) show it.
type DecisionSummary struct {
	// Item is the item id the source gave it (for a part "input" mark on a
	// tool result: the call's input item).
	Item     string          `json:"item"`
	Decision events.Decision `json:"decision"`
	Rung     events.Rung     `json:"rung,omitempty"`
	Reason   events.Reason   `json:"reason"`
	Part     string          `json:"part,omitempty"`
	// Applied is true when an application applied this mark; AppliedAt is
	// that application's request and Trigger its rule.
	Applied   bool           `json:"applied"`
	AppliedAt string         `json:"applied_at,omitempty"`
	Trigger   events.Trigger `json:"trigger,omitempty"`
}

// Decision is one row of the certificate ledger: the latest mark for an item
// (latest in log order) with its certificate, and the application that put
// it into effect, if any.
type Decision struct {
	DecisionSummary
	// Application holds the applying application's economics.
	Application *ApplicationRef `json:"application,omitempty"`
	// InEffect is true when the item renders pruned because of this mark
	// now (false after a restore, a later KEEP, or when the host removed the
	// item itself).
	InEffect        bool                   `json:"in_effect"`
	TokensEstimated int                    `json:"tokens_estimated"`
	Evidence        []events.Evidence      `json:"evidence,omitempty"`
	Recoverability  *events.Recoverability `json:"recoverability,omitempty"`
	Protection      []events.Reason        `json:"protection,omitempty"`
	Residue         *events.Residue        `json:"residue,omitempty"`
	// Mark is the mark event id; Cause the fact event that led to it.
	Mark          string    `json:"mark"`
	MarkedAt      time.Time `json:"marked_at"`
	Cause         string    `json:"cause"`
	PolicyVersion string    `json:"policy_version"`
	By            string    `json:"by,omitempty"`
	// Control is who decided: "rule", "agent" or "person" (events.Control
	// of the mark).
	Control string `json:"control"`
	// Tool and Source name the item for people: the tool of its call and
	// what the call read or ran (a path, URL or short command, shortened
	// as placeholders name it); "" for a message or an unknown item.
	Tool   string `json:"tool,omitempty"`
	Source string `json:"source,omitempty"`
}

// ApplicationRef is the part of an application a certificate records.
type ApplicationRef struct {
	Event           string         `json:"event"`
	Request         string         `json:"request"`
	Trigger         events.Trigger `json:"trigger"`
	Time            time.Time      `json:"time"`
	FirstDivergence int            `json:"first_divergence"`
	MutationRadius  int            `json:"mutation_radius"`
	// TokensRemoved and PlaceholderTokens are the application's totals (all
	// its marks), as the scheduler estimated them.
	TokensRemoved     int    `json:"tokens_removed"`
	PlaceholderTokens int    `json:"placeholder_tokens"`
	PolicyVersion     string `json:"policy_version"`
}

// Decisions returns the latest mark per item with its certificate, in item
// order; marks naming items the session has not seen come last, in the
// order they first appeared (a part "input" mark on an unknown item is filed
// as "ITEM#input").
func (s *Session) Decisions() []Decision {
	s.mu.RLock()
	defer s.mu.RUnlock()
	latest, order := s.latestMarks()
	out := make([]Decision, 0, len(order))
	for _, it := range s.items {
		if ms := latest[it.ID]; ms != nil {
			out = append(out, s.decision(it.ID, ms))
		}
	}
	for _, k := range order {
		if _, known := s.itemIndex(k); !known {
			out = append(out, s.decision(k, latest[k]))
		}
	}
	return out
}

func (s *Session) decision(key string, ms *markState) Decision {
	m := ms.m
	d := Decision{
		DecisionSummary: DecisionSummary{Item: key, Decision: m.Decision, Rung: m.Rung, Reason: m.Reason, Part: m.Part},
		TokensEstimated: m.TokensEstimated, Evidence: m.Evidence,
		Recoverability: m.Recoverability, Protection: m.Protection, Residue: m.Residue,
		Mark: ms.id, MarkedAt: ms.time, Cause: m.Cause, PolicyVersion: m.PolicyVersion, By: m.By,
		Control: events.Control(m),
	}
	if a := ms.app; a != nil {
		d.Applied = true
		d.AppliedAt = a.a.Request
		d.Trigger = a.a.Trigger
		d.Application = &ApplicationRef{
			Event: a.id, Request: a.a.Request, Trigger: a.a.Trigger, Time: a.time,
			FirstDivergence: a.a.FirstDivergence, MutationRadius: a.a.MutationRadius,
			TokensRemoved: a.a.TokensRemoved, PlaceholderTokens: a.a.PlaceholderTokens,
			PolicyVersion: a.a.PolicyVersion,
		}
	}
	if i, ok := s.itemIndex(key); ok {
		it := s.items[i]
		d.InEffect = it.pruned() && it.applied.mark == ms
		d.Tool, d.Source = it.Tool, s.sourceOf(it)
	}
	return d
}
