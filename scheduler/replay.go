package scheduler

import "github.com/prunesched/prunesched/events"

// Replayer says what a replay does with each kind of event of a session's
// log. A nil function skips that kind.
type Replayer struct {
	// Mark gets every mark, before any fact: the scheduler core considers a
	// mark only at a request past its cause, so marks first is the order
	// the live worker sees them in (it waits for eligibility before it
	// decides).
	Mark func(mark events.Event)
	// Application gets each application the log holds at the fact position
	// it was decided at (Application.AfterIndex): before the fact at that
	// position, or after the last fact replayed.
	Application func(app events.Event)
	// Fact gets each fact in log order.
	Fact func(fact events.Event)
	// From is the position of the first fact of evs: 0 for a whole
	// session, the facts already held for a catch-up.
	From int
}

// Replay is the one replay loop over a session's events in log order: the
// scheduler worker's rebuild, the proxy's load of a session into memory,
// the economics' simulations and package decide all feed a session
// through it, so they cannot drift apart. Facts stored at or past stream
// sequence upto are left out, and so are the applications after the last
// fact replayed stored at or past it (upto 0: nothing is left out). An
// application is fed at its position whatever its sequence: its
// position, not its arrival, is when it was decided. It returns the
// number of facts replayed, and how many applications had a position the
// replay never reached (before From, or past the last fact plus one): a
// caller catching up rebuilds instead.
func Replay(evs []events.Event, upto uint64, r Replayer) (facts, unplaced int) {
	within := func(e events.Event) bool { return upto == 0 || e.Seq < upto }
	var apps map[int][]events.Event
	for _, e := range evs {
		switch {
		case e.Type == events.TypeMark:
			if r.Mark != nil {
				r.Mark(e)
			}
		case r.Application != nil:
			if a, ok := e.Data.(*events.Application); ok {
				if apps == nil {
					apps = map[int][]events.Event{}
				}
				apps[a.AfterIndex] = append(apps[a.AfterIndex], e)
			}
		}
	}
	pos := r.From
	for _, e := range evs {
		if !e.IsFact() || !within(e) {
			continue
		}
		for _, a := range apps[pos] {
			r.Application(a)
		}
		delete(apps, pos)
		if r.Fact != nil {
			r.Fact(e)
		}
		pos++
	}
	for _, a := range apps[pos] {
		if within(a) {
			r.Application(a)
		}
	}
	delete(apps, pos)
	for _, as := range apps {
		unplaced += len(as)
	}
	return pos - r.From, unplaced
}
