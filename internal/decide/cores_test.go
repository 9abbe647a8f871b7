package decide_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/internal/decide"
	"github.com/prunesched/prunesched/internal/eval/lab/fixtures"
	"github.com/prunesched/prunesched/policy"
	"github.com/prunesched/prunesched/scheduler"
)

// Run makes, for every strategy, the applications a replay of its own
// marks makes (scheduler.Simulate sees every mark at once, Run each mark
// after its cause), and the same bytes on every run.
func TestRunMatchesSimulate(t *testing.T) {
	fx, err := fixtures.Generate(fixtures.Config{Seed: 11, Sessions: 3, MinCalls: 30, MaxCalls: 60}, tokens.New())
	if err != nil {
		t.Fatal(err)
	}
	content := func(h string) ([]byte, error) { return fx.Blobs.GetBlob(context.Background(), h) }
	for _, mode := range []string{policy.ModeImmediate, policy.ModeScheduled, policy.ModeNextRequest} {
		p := policy.Default()
		p.Scheduler.Mode = mode
		applied := 0
		for _, s := range fx.Sessions {
			marks, apps := decide.Run(p, s.Events, content)
			marks2, apps2 := decide.Run(p, s.Events, content)
			if encode(t, marks) != encode(t, marks2) || encode(t, apps) != encode(t, apps2) {
				t.Fatalf("%s/%s: two runs differ", mode, s.ID)
			}
			all := append(append([]events.Event{}, s.Events...), marks...)
			want := scheduler.Simulate(p, all, mode).ApplicationEvents
			if got, w := encode(t, apps), encode(t, want); got != w {
				t.Fatalf("%s/%s: applications\n%s\nwant (Simulate)\n%s", mode, s.ID, got, w)
			}
			applied += len(apps)
		}
		if applied == 0 {
			t.Fatalf("%s: no applications: the fixture exercises nothing", mode)
		}
	}
}

func TestRunEmpty(t *testing.T) {
	if marks, apps := decide.Run(policy.Default(), nil, nil); marks != nil || apps != nil {
		t.Fatalf("got %d marks, %d applications for no facts", len(marks), len(apps))
	}
}

func encode(t *testing.T, evs []events.Event) string {
	t.Helper()
	b, err := json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
