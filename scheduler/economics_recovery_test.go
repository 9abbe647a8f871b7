package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
	"github.com/prunesched/prunesched/policy"
)

// TestRecoveryPriced: the result of a context_recover call is counted as a
// recovery in the economics: written when first sent (5m tier, 3.75
// USD/MTok), read while the cache is warm after (0.30), bought again at
// the write price once the cache expired; a result of another tool is
// not.
func TestRecoveryPriced(t *testing.T) {
	b := newSession()
	b.msg("sys", 5000)
	b.req("r1")
	b.result("other", 800) // an ordinary tool output: no recovery
	out := strings.Repeat("abcd", 1000)
	b.fact(&events.ToolResult{Item: "rec", CallID: "rec", Tool: "mcp__prunesched__context_recover", Output: &out})
	b.at(10 * time.Second).req("r2")
	b.msg("a", 10)
	b.at(20 * time.Second).req("r3")
	b.msg("b", 10)
	b.at(20*time.Second + 10*time.Minute).req("r4")
	c, _ := drive(t, pol(policy.ModeScheduled), b.evs)
	l := c.Economics()
	r := l.Requests
	testutil.Equal(t, len(r), 4, "requests")
	testutil.Equal(t, r[0].RecoveryTokens, 0, "r1 recovery tokens")
	testutil.Equal(t, r[1].Recoveries, 1, "r2 recoveries")
	testutil.Equal(t, r[1].RecoveryTokens, 1000, "r2 recovery tokens")
	testutil.Near(t, r[1].RecoveryCost, 1000*3.75/1e6, "r2 recovery cost (written)")
	testutil.Equal(t, r[2].Recoveries, 0, "r3 recoveries")
	testutil.Near(t, r[2].RecoveryCost, 1000*0.30/1e6, "r3 recovery cost (read)")
	testutil.Near(t, r[3].RecoveryCost, 1000*3.75/1e6, "r4 recovery cost (cache expired: written again)")
	testutil.Equal(t, l.Total.Recoveries, 1, "total recoveries")
	testutil.Equal(t, l.Total.RecoveryTokens, 3000, "total recovery tokens")
	if l.Total.RecoveryCost >= l.Total.Cost {
		t.Fatalf("recovery cost %v is part of the cost %v", l.Total.RecoveryCost, l.Total.Cost)
	}
}
