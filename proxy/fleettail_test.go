package proxy

import (
	"fmt"
	"strings"
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
				if st.last != 0 {
					continue
				}
				// What an advance takes (since) is what a catch-up takes
				// once the tail delivered the log's last fact.
				evs, ok = tl.since("", "s", st.have)
				if got := map[bool]string{true: ids(evs), false: "-"}[ok]; got != st.want {
					t.Fatalf("%s: since %d = %q, want %q", st.name, st.have, got, st.want)
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

// TestFleetTailDirty: the tail names the sessions it kept events of for
// the proxy's advance (takeDirty) once each, and only those it vouches
// for (not fresh, not warm).
func TestFleetTailDirty(t *testing.T) {
	ev := func(seq uint64) *events.Event { return &events.Event{ID: fmt.Sprintf("e%d", seq), Seq: seq} }
	tl := &fleetTail{sessions: map[sessionKey]*tailSession{}, wake: make(chan struct{}, 1)}
	tl.watch("", "fresh") // before the tail ran: fresh
	tl.started()
	tl.watch("", "s")
	tl.deliver(1, events.DefaultTenant, "s", ev(1))
	tl.deliver(2, events.DefaultTenant, "fresh", ev(2))
	tl.deliver(3, events.DefaultTenant, "s", ev(3))
	select {
	case <-tl.wake:
	default:
		t.Fatal("the tail kept events of a held session and did not wake the advance")
	}
	if got := tl.takeDirty(); len(got) != 1 || got[0] != (sessionKey{events.DefaultTenant, "s"}) {
		t.Fatalf("dirty = %v, want the held session once", got)
	}
	if got := tl.takeDirty(); len(got) != 0 {
		t.Fatalf("dirty again = %v, want none", got)
	}
}

// TestFleetTailWarm walks the warm copies: kept from a session's
// SessionStarted fact while the tail runs, for sessions the proxy does
// not hold; given out until adopted, then kept as a watched session's
// events; dropped whole when one event cannot be kept, when the tail
// stops, or, least recently appended first, past the byte bound.
func TestFleetTailWarm(t *testing.T) {
	start := func(seq uint64) *events.Event {
		return &events.Event{ID: fmt.Sprintf("e%d", seq), Seq: seq, Type: events.TypeSessionStarted, Data: &events.SessionStarted{Format: "proxy"}}
	}
	msg := func(seq uint64, text string) *events.Event {
		return &events.Event{ID: fmt.Sprintf("e%d", seq), Seq: seq, Type: events.TypeMessage, Data: &events.Message{Item: fmt.Sprintf("i%d", seq), Role: events.RoleUser, Text: text}}
	}
	ids := func(evs []events.Event) string {
		s := ""
		for _, e := range evs {
			s += e.ID + " "
		}
		return s
	}
	warm := func(tl *fleetTail, session string) string {
		evs, first, ok := tl.warmed("", session)
		if !ok {
			return "-"
		}
		return fmt.Sprintf("%d: %s", first, ids(evs))
	}
	d := events.DefaultTenant
	tl := &fleetTail{sessions: map[sessionKey]*tailSession{}, warmLimit: 1400}
	if !tl.wanted(d, "any") {
		t.Fatal("a tail keeping warm copies does not decode every session")
	}
	tl.deliver(1, d, "a", start(1))
	if got := warm(tl, "a"); got != "-" {
		t.Fatalf("kept before the tail ran: %s", got)
	}
	tl.started()
	tl.deliver(2, d, "b", msg(2, "x"))
	tl.deliver(3, d, "c", start(3))
	tl.deliver(4, d, "c", msg(4, "x"))
	tl.deliver(5, d, "a", msg(5, "x"))
	for _, c := range []struct{ session, want string }{{"a", "-"}, {"b", "-"}, {"c", "3: e3 e4 "}} {
		if got := warm(tl, c.session); got != c.want {
			t.Fatalf("warm %s = %q, want %q", c.session, got, c.want)
		}
	}
	// Adopted: the tail's events of c are a watched session's.
	tl.adopt("", "c")
	if got := warm(tl, "c"); got != "-" {
		t.Fatalf("adopted copy still warm: %s", got)
	}
	tl.deliver(6, d, "c", msg(6, "x"))
	if evs, ok := tl.after("", "c", 4, 6); !ok || ids(evs) != "e6 " {
		t.Fatalf("after adopting: %q %v, want e6", ids(evs), ok)
	}
	if tl.warmBytes != 0 {
		t.Fatalf("adopted copy still counted: %d bytes", tl.warmBytes)
	}
	// An event that does not decode drops the copy.
	tl.deliver(7, d, "e", start(7))
	tl.deliver(8, d, "e", nil)
	if got := warm(tl, "e"); got != "-" {
		t.Fatalf("copy kept past an event that did not decode: %s", got)
	}
	// Past the bound, the copy least recently appended to goes.
	// (About 256 bytes an event and its text: f 513, g 812, then h's
	// start passes 1,400, and dropping g is enough.)
	tl.deliver(9, d, "f", start(9))
	tl.deliver(10, d, "g", start(10))
	tl.deliver(11, d, "g", msg(11, strings.Repeat("x", 300)))
	tl.deliver(12, d, "f", msg(12, "x"))
	tl.deliver(13, d, "h", start(13))
	if warm(tl, "g") != "-" || warm(tl, "f") == "-" || warm(tl, "h") == "-" {
		t.Fatalf("eviction: f %q, g %q, h %q; want g dropped", warm(tl, "f"), warm(tl, "g"), warm(tl, "h"))
	}
	// A tail that stops drops every warm copy.
	tl.stopped()
	tl.started()
	if warm(tl, "f") != "-" || tl.warmBytes != 0 {
		t.Fatalf("warm copy kept over a stopped tail: %q, %d bytes", warm(tl, "f"), tl.warmBytes)
	}
	// Adopting a copy that went arms the session: a catch-up reads.
	tl.adopt("", "f")
	if _, ok := tl.after("", "f", 0, tl.seq); ok {
		t.Fatal("a session adopted without its copy was vouched for")
	}
}

// TestBodyOutputs: the request's tool outputs are found by content
// address, the newest first, and nothing else is.
func TestBodyOutputs(t *testing.T) {
	conv := &conversation{blocks: []*block{
		{kind: bToolResult, text: "old output"},
		{kind: bText, text: "not an output"},
		{kind: bToolResult, text: "new output"},
	}}
	b := &bodyOutputs{conv: conv}
	if s, ok := b.output(events.HashString("new output")); !ok || s != "new output" {
		t.Fatalf("newest output: %q %v", s, ok)
	}
	if len(b.byHash) != 1 {
		t.Fatalf("hashed %d outputs to find the newest, want 1", len(b.byHash))
	}
	if s, ok := b.output(events.HashString("old output")); !ok || s != "old output" {
		t.Fatalf("oldest output: %q %v", s, ok)
	}
	if _, ok := b.output(events.HashString("not an output")); ok {
		t.Fatal("a text block was taken for an output")
	}
	var none *bodyOutputs
	if _, ok := none.output(events.HashString("x")); ok {
		t.Fatal("no request, yet an output")
	}
}

// TestBodyOutputsLater: outputs asked for before the request's body is
// parsed (an early build) wait for the parsed conversation and are found
// there; a body that will not be parsed, or a build whose time ran out,
// finds none (the blob store then answers).
func TestBodyOutputsLater(t *testing.T) {
	conv := &conversation{blocks: []*block{{kind: bToolResult, text: "an output"}}}
	h := events.HashString("an output")
	later := make(chan *conversation, 1)
	b := &bodyOutputs{later: later, done: make(chan struct{})}
	found := make(chan bool)
	go func() {
		_, ok := b.output(h)
		found <- ok
	}()
	later <- conv
	if !<-found {
		t.Fatal("the output given later was not found")
	}
	none := make(chan *conversation, 1)
	none <- nil
	if _, ok := (&bodyOutputs{later: none, done: make(chan struct{})}).output(h); ok {
		t.Fatal("no body, yet an output")
	}
	done := make(chan struct{})
	close(done)
	if _, ok := (&bodyOutputs{later: make(chan *conversation), done: done}).output(h); ok {
		t.Fatal("the build's time ran out, yet an output")
	}
}
