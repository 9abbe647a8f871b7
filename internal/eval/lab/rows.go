package lab

import (
	"fmt"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/eval/lab/fixtures"
	"github.com/prunesched/prunesched/internal/eval/lab/peers"
	"github.com/prunesched/prunesched/policy"
)

// Row is a lab row that needs no labels, so it can run over anyone's own
// sessions (analyze --compare): the production policies B to D-span and
// the peers. F, the oracle, needs the fixture's labels and is not one.
type Row struct {
	Name, Kind, Description string
	// Timing is the row's own timing, as in the lab: scheduled for the
	// production policies, immediate for E and the peers.
	Timing string
	// Policy is what the scheduler and the projection run with (the row's
	// own policy for production rows, the default for the others).
	Policy policy.Policy
	// Marks returns the row's marks over one session's facts in stored form
	// (events.Prepare); content serves outputs by content address.
	Marks func(facts []events.Event, content func(hash string) ([]byte, error)) []events.Event
}

// PolicyRow is a row whose marks are the production eligibility core's
// under p (a production condition, a recommendation candidate, the user's
// own policy), with the given timing.
func PolicyRow(name, kind, desc, timing string, p policy.Policy) Row {
	return Row{Name: name, Kind: kind, Description: desc, Timing: timing, Policy: p,
		Marks: func(facts []events.Event, content func(string) ([]byte, error)) []events.Event {
			return EligibilityMarks(p, facts, content)
		}}
}

// Rows returns the rows analyze --compare runs, in report order, with
// masking keeping the maskWindow most recent observations (0: the lab's
// default, peers.DefaultMaskWindow). A, F and G are not among them: G's
// scripted agent adds requests to the session, and a real session carries
// its agent's own requests. It fails on a lab policy file that does not
// parse.
func Rows(maskWindow int) ([]Row, error) {
	if maskWindow <= 0 {
		maskWindow = peers.DefaultMaskWindow
	}
	conds, err := conditions()
	if err != nil {
		return nil, err
	}
	var out []Row
	for _, c := range conds {
		if c.name == CondA || c.name == CondF || c.script != nil {
			continue
		}
		r := Row{Name: c.name, Kind: c.kind, Description: c.desc, Timing: c.primary, Policy: policy.Default()}
		switch {
		case c.pol != nil:
			r = PolicyRow(c.name, c.kind, c.desc, c.primary, *c.pol)
		case c.name == PeerMasking:
			r.Name = fmt.Sprintf("masking-%d", maskWindow)
			r.Description = fmt.Sprintf("observation masking: keep the last %d observations", maskWindow)
			r.Marks = func(facts []events.Event, _ func(string) ([]byte, error)) []events.Event {
				return peers.Masking(facts, maskWindow)
			}
		default:
			marks := c.marks
			r.Marks = func(facts []events.Event, _ func(string) ([]byte, error)) []events.Event {
				return marks(&fixtures.Session{Events: facts})
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// EligibilityMarks runs the production eligibility core over one session's
// facts, as the pipeline's eligibility worker does, and returns its marks.
// content, when set, serves outputs stored by content address (span
// references compare their lines).
func EligibilityMarks(p policy.Policy, facts []events.Event, content func(hash string) ([]byte, error)) []events.Event {
	if len(facts) == 0 {
		return nil
	}
	ec := eligibility.New(p, facts[0].Tenant, facts[0].Session)
	if content != nil {
		ec.SetContent(content)
	}
	var marks []events.Event
	for _, ev := range facts {
		marks = append(marks, ec.Observe(ev)...)
	}
	return marks
}
