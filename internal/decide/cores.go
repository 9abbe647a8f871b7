// Package decide runs the two production cores, eligibility and scheduler,
// over one session the way the pipeline's workers do, in one process and
// without the log: every fact goes to the eligibility core, whose marks go
// to the scheduler core, and the scheduler core takes every fact through
// scheduler.Core.Feed (a model request is decided before it is observed,
// and its application fed back). The lab and the bench run it, so what
// they measure is what the pipeline ships.
//
// It must not: touch NATS, the file system or the wall clock, or hold any
// rule of its own (the rules are the cores').
package decide

import (
	"io"
	"time"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/scheduler"
)

// Session is both cores of one session, fed together.
type Session struct {
	elig  *eligibility.Core
	sched *scheduler.Core
}

// NewSession returns the cores of one session under policy p. content,
// when set, gives the eligibility core the stored outputs by content
// address, streamed (span references hash their lines as they are read;
// see eligibility.Core.SetContentReader).
func NewSession(p policy.Policy, tenant, session string, content func(hash string) (io.ReadCloser, error)) *Session {
	s := &Session{elig: eligibility.New(p, tenant, session), sched: scheduler.New(p, tenant, session)}
	if content != nil {
		s.elig.SetContentReader(content)
	}
	return s
}

// Feed feeds the session's next fact, in log order, to both cores: the
// scheduler decides at a model request before it observes the fact (see
// scheduler.Core.Feed), then takes the marks the eligibility core emits
// for it. It returns those marks and the application decided (nil when
// none).
func (s *Session) Feed(fact events.Event) (marks []events.Event, app *events.Event) {
	app = s.sched.Feed(fact)
	marks = s.elig.Observe(fact)
	for _, m := range marks {
		s.sched.Observe(m)
	}
	return marks, app
}

// Decide decides a request at time at on the facts fed so far, as the
// pipeline's live decision does (scheduler.Core.Decide at the current
// position), and returns the application (nil when none). Feeding the
// request's model request fact later decides nothing again.
func (s *Session) Decide(at time.Time, req string) *events.Event {
	return s.sched.Decide(at, req, s.sched.Facts())
}

// ObserveApplication feeds an application decided at the current position
// (read back from the log when the session is rebuilt), as a rebuilding
// scheduler worker does (scheduler.Core.ObserveDecided).
func (s *Session) ObserveApplication(app events.Event) { s.sched.ObserveDecided(app) }

// IndexSpans does now the indexing the eligibility core would do when it
// next reads its span-reference index (eligibility.Core.IndexSpans), off
// the path of the request that fed the outputs. It changes no decision.
func (s *Session) IndexSpans() { s.elig.IndexSpans() }

// ContentErr returns the first failure to read a stored output since the
// previous call, and forgets it (eligibility.Core.ContentErr). After one,
// the eligibility core judged that output as if it were not stored, which
// the log does not say: the session's marks may differ from the workers',
// so a caller that must decide as the log does drops the session.
func (s *Session) ContentErr() error { return s.elig.ContentErr() }

// Facts is the number of facts fed.
func (s *Session) Facts() int { return s.sched.Facts() }

// Scheduler returns the session's scheduler core (to measure or query it;
// feeding it directly bypasses the eligibility core).
func (s *Session) Scheduler() *scheduler.Core { return s.sched }

// Run runs both cores over one session's facts, in log order, and returns
// the marks and the applications they publish, in log order. It is a pure
// function of its arguments (content, when set, must be too).
func Run(p policy.Policy, facts []events.Event, content func(hash string) ([]byte, error)) (marks, apps []events.Event) {
	if len(facts) == 0 {
		return nil, nil
	}
	s := NewSession(p, facts[0].Tenant, facts[0].Session, nil)
	if content != nil {
		s.elig.SetContent(content)
	}
	scheduler.Replay(facts, 0, scheduler.Replayer{Fact: func(ev events.Event) {
		out, app := s.Feed(ev)
		marks = append(marks, out...)
		if app != nil {
			apps = append(apps, *app)
		}
	}})
	return marks, apps
}
