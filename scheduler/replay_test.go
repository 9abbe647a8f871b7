package scheduler

import (
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
)

// TestReplayOrder: marks first, each application before the fact at its
// position (or at the end), facts in log order; upto cuts facts and the
// trailing applications, never an application at its position; From
// shifts the positions; applications the replay never reaches are counted.
func TestReplayOrder(t *testing.T) {
	fact := func(id string, seq uint64) events.Event {
		return events.Event{ID: id, Type: events.TypeMessage, Seq: seq}
	}
	mark := func(id string, seq uint64) events.Event {
		return events.Event{ID: id, Type: events.TypeMark, Seq: seq}
	}
	app := func(id string, seq uint64, at int) events.Event {
		return events.Event{ID: id, Type: events.TypeApplication, Seq: seq, Data: &events.Application{AfterIndex: at}}
	}
	log := []events.Event{
		fact("f0", 1), mark("m0", 2), app("a1", 3, 1), fact("f1", 4), fact("f2", 5),
		mark("m2", 6), app("a3", 7, 3), app("a9", 8, 9),
	}
	for _, tc := range []struct {
		name     string
		upto     uint64
		from     int
		want     string
		facts    int
		unplaced int
	}{
		{name: "whole", want: "m0 m2 f0 a1 f1 f2 a3", facts: 3, unplaced: 1},
		{name: "upto before the trailing application", upto: 7, want: "m0 m2 f0 a1 f1 f2", facts: 3, unplaced: 1},
		{name: "upto inside the facts", upto: 5, want: "m0 m2 f0 a1 f1", facts: 2, unplaced: 2},
		{name: "an application before From is never reached", from: 2, want: "m0 m2 f0 a3 f1 f2", facts: 3, unplaced: 2},
		{name: "catch-up from position 1", from: 1, want: "m0 m2 a1 f0 f1 a3 f2", facts: 3, unplaced: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			see := func(e events.Event) { got = append(got, e.ID) }
			facts, unplaced := Replay(log, tc.upto, Replayer{Mark: see, Application: see, Fact: see, From: tc.from})
			if strings.Join(got, " ") != tc.want || facts != tc.facts || unplaced != tc.unplaced {
				t.Errorf("got %q, %d facts, %d unplaced; want %q, %d, %d", strings.Join(got, " "), facts, unplaced, tc.want, tc.facts, tc.unplaced)
			}
		})
	}
}
