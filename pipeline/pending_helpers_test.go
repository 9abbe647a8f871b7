package pipeline

import (
	"context"
	"testing"

	"github.com/prunesched/prunesched/scheduler"
)

func pendingOf(t *testing.T, ctx context.Context, p *Pipeline, tenant, session string) []scheduler.PendingMark {
	t.Helper()
	got, err := p.Scheduler.Pending(ctx, tenant, session)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// waitSurveyed waits for the scheduler's start-up survey of pending marks.
func waitSurveyed(t *testing.T, ctx context.Context, p *Pipeline) {
	t.Helper()
	select {
	case <-p.Scheduler.Surveyed():
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
}
