package pipeline

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/policy"
)

// TestSchedulerReadsMarksFromLog: a scheduler without this process's
// eligibility worker to ask (as when another process judges the
// partition) waits on the eligibility consumer's ack floor and reads each
// session's marks from the log (store.MarksSince, batched). It publishes
// exactly the applications of a scheduler fed in process, and the views
// are byte-identical.
func TestSchedulerReadsMarksFromLog(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	input := failoverInput(t)
	sessions := []string{"sample", "sample-b"}
	tc := tokens.New()
	cfg := store.Config{Tokens: tc}

	run := func(fromLog bool) logView {
		st, _, _ := startStore(t, ctx, cfg)
		p := newPipelineT(t, st, Config{Policy: policy.Default()})
		if fromLog {
			p.Scheduler.elig = nil
		}
		runPipeline(t, ctx, p)
		// Several appends, so the scheduler reads marks many times, some
		// reads with several marks.
		for from := 0; from < len(input); from += 7 {
			if _, err := st.Append(ctx, input[from:min(from+7, len(input))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		return viewOf(t, ctx, p, tc, sessions...)
	}
	want, got := run(false), run(true)
	if len(want.ids) == 0 || !slices.Equal(want.ids, got.ids) {
		t.Errorf("marks and applications differ from the in-process run:\nwant %v\ngot  %v", want.ids, got.ids)
	}
	for i := range want.views {
		if !bytes.Equal(want.views[i], got.views[i]) {
			t.Errorf("view %d differs from the in-process run:\n%s\n---\n%s", i, want.views[i], got.views[i])
		}
	}
}
