package proxy

import (
	"fmt"
	"testing"

	"github.com/prunesched/prunesched/events"
)

// TestFleetTail walks the tail's rules: it vouches for a session's events
// only while it runs, delivered the log's last fact, and holds every one
// since the proxy's state read the
// log (watch before a full read, or arm then a read of the log and
// complete), and never after it dropped one (overflow, an event that did
// not decode, a tail that stopped).
//
// The log's last fact is given as what the tail delivered (the tail has
// reached it) unless a step says otherwise.
func TestFleetTail(t *testing.T) {
	ev := func(seq uint64) *events.Event { return &events.Event{ID: fmt.Sprintf("e%d", seq), Seq: seq} }
	ids := func(evs []events.Event) string {
		s := ""
		for _, e := range evs {
			s += e.ID + " "
		}
		return s
	}
	type step struct {
		name string
		do   func(tl *fleetTail)
		have uint64
		last uint64 // the log's last fact; 0: what the tail delivered
		want string // after's events, or "-" for false
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"watched while running", []step{
			{"started, watched", func(tl *fleetTail) { tl.started(); tl.watch("", "s") }, 0, 0, ""},
			{"events of it and of another session", func(tl *fleetTail) {
				tl.deliver(5, events.DefaultTenant, "s", ev(5))
				tl.deliver(6, "", "", nil)
				tl.deliver(7, events.DefaultTenant, "s", ev(7))
			}, 4, 0, "e5 e7 "},
			{"the log's last fact not delivered yet", func(*fleetTail) {}, 4, 9, "-"},
			{"what the state holds is dropped", func(*fleetTail) {}, 5, 0, "e7 "},
		}},
		{"watched before the tail ran", []step{
			{"watched", func(tl *fleetTail) { tl.watch("", "s") }, 0, 0, "-"},
			{"running: still not vouched for", func(tl *fleetTail) { tl.started(); tl.deliver(3, events.DefaultTenant, "s", ev(3)) }, 0, 0, "-"},
			{"armed, read, completed", func(tl *fleetTail) { tl.arm("", "s"); tl.complete("", "s") }, 3, 0, ""},
			{"then kept", func(tl *fleetTail) { tl.deliver(4, events.DefaultTenant, "s", ev(4)) }, 3, 0, "e4 "},
		}},
		{"an event that did not decode", []step{
			{"watched", func(tl *fleetTail) { tl.started(); tl.watch("", "s") }, 0, 0, ""},
			{"broken", func(tl *fleetTail) { tl.deliver(2, events.DefaultTenant, "s", nil) }, 0, 0, "-"},
			{"armed: fresh until completed", func(tl *fleetTail) { tl.arm("", "s") }, 0, 0, "-"},
			{"completed", func(tl *fleetTail) { tl.complete("", "s") }, 2, 0, ""},
		}},
		{"overflow", []step{
			{"too many", func(tl *fleetTail) {
				tl.started()
				tl.watch("", "s")
				for i := range tailBuffer + 1 {
					tl.deliver(uint64(i+1), events.DefaultTenant, "s", ev(uint64(i+1)))
				}
			}, 0, 0, "-"},
		}},
		{"the tail stopped", []step{
			{"watched", func(tl *fleetTail) { tl.started(); tl.watch("", "s"); tl.deliver(1, events.DefaultTenant, "s", ev(1)) }, 0, 0, "e1 "},
			{"stopped", func(tl *fleetTail) { tl.stopped() }, 0, 0, "-"},
			{"completed while stopped: still not", func(tl *fleetTail) { tl.arm("", "s"); tl.complete("", "s") }, 1, 0, "-"},
		}},
		{"forgotten", []step{
			{"watched, forgotten", func(tl *fleetTail) { tl.started(); tl.watch("", "s"); tl.forget("", "s") }, 0, 0, "-"},
			{"not kept", func(tl *fleetTail) { tl.deliver(1, events.DefaultTenant, "s", ev(1)) }, 0, 0, "-"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := &fleetTail{sessions: map[sessionKey]*tailSession{}}
			for _, st := range tt.steps {
				st.do(tl)
				last := st.last
				if last == 0 {
					last = tl.seq
				}
				evs, ok := tl.after("", "s", st.have, last)
				got := "-"
				if ok {
					got = ids(evs)
				}
				if got != st.want {
					t.Fatalf("%s: pending after %d = %q, want %q", st.name, st.have, got, st.want)
				}
			}
		})
	}
	var nilTail *fleetTail
	nilTail.watch("", "s")
	if _, ok := nilTail.after("", "s", 0, 0); ok {
		t.Error("a proxy without a tail vouched for events")
	}
}
