package events_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/prunesched/prunesched/eligibility"
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/scheduler"
)

// TestEncodeValidatedDecisions compares EncodeValidated with json.Marshal on
// the events prunesched writes itself: the marks and applications the
// cores produce for the sample session.
func TestEncodeValidatedDecisions(t *testing.T) {
	f, err := os.Open("../examples/sample-session.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	facts, err := events.DecodeJSONL(f, "sample-session.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	pol := policy.Default()
	el := eligibility.New(pol, "default", "sample")
	sc := scheduler.New(pol, "default", "sample")
	var out []events.Event
	for i, e := range facts {
		for _, m := range el.Observe(e) {
			sc.Observe(m)
			out = append(out, m)
		}
		if mr, ok := e.Data.(*events.ModelRequest); ok {
			if app := sc.Decide(e.Time, mr.Request, i); app != nil {
				out = append(out, *app)
			}
		}
		sc.Observe(e)
	}
	kinds := map[events.Type]int{}
	for _, e := range out {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := events.EncodeValidated(e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want, got) {
			t.Errorf("%s: bytes differ:\njson.Marshal    %s\nEncodeValidated %s", e.ID, want, got)
		}
		kinds[e.Type]++
	}
	if kinds[events.TypeMark] == 0 || kinds[events.TypeApplication] == 0 {
		t.Fatalf("want marks and applications, got %v", kinds)
	}
}
