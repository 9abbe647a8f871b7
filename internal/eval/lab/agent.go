package lab

import (
	"fmt"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/eval/lab/fixtures"
)

// AgentRequestReason is the reason the scripted agent of condition G gives
// with each removal request.
const AgentRequestReason = "subtask closed: its outputs are no longer needed"

// withAgentRequests returns s as the scripted agent of condition G runs it:
// once a subtask closes, the agent asks for the removal of every tool
// output it saw while the subtask was open (an events.PruneRequest by
// events.ByAgent per output, in the order the outputs arrived), right after
// the SubtaskClosed fact and at its time, as the context_prune tool would
// record them. Eligibility judges each request with every protection and
// the scheduler applies the accepted ones, exactly as in production.
//
// The requests are facts, so the probes' and labels' fact indices move
// with them; s itself is not changed. Without a closed subtask s is
// returned as it is.
func withAgentRequests(s *fixtures.Session) (*fixtures.Session, error) {
	type open struct {
		id      string
		outputs []string
	}
	var stack []*open
	var out []events.Event
	shift := make([]int, len(s.Events)+1) // old fact index -> new
	added := 0
	for i, ev := range s.Events {
		shift[i] = i + added
		out = append(out, ev)
		switch p := ev.Data.(type) {
		case *events.SubtaskOpened:
			stack = append(stack, &open{id: p.Subtask})
		case *events.ToolResult:
			for _, o := range stack {
				o.outputs = append(o.outputs, p.Item)
			}
		case *events.SubtaskClosed:
			for k, o := range stack {
				if o.id != p.Subtask {
					continue
				}
				stack = append(stack[:k:k], stack[k+1:]...)
				for n, item := range o.outputs {
					req := events.New(fmt.Sprintf("%s-agent%02d", ev.ID, n+1), ev.Tenant, ev.Session, ev.Time,
						&events.PruneRequest{Item: item, By: events.ByAgent, Reason: AgentRequestReason})
					if err := req.Validate(); err != nil {
						return nil, fmt.Errorf("agent request after %s: %w", ev.ID, err)
					}
					out = append(out, req)
					added++
				}
				break
			}
		}
	}
	shift[len(s.Events)] = len(s.Events) + added
	if added == 0 {
		return s, nil
	}
	g := *s
	g.Events = out
	g.Probes = make([]fixtures.Probe, len(s.Probes))
	for i, p := range s.Probes {
		p.Fact = shift[p.Fact]
		g.Probes[i] = p
	}
	g.Labels = make(map[string]fixtures.Label, len(s.Labels))
	for id, l := range s.Labels {
		if l.SafeFrom > 0 {
			l.SafeFrom = shift[l.SafeFrom]
		}
		g.Labels[id] = l
	}
	return &g, nil
}
