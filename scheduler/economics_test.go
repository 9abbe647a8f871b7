package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

// dupSession: an early 5,000-token duplicate inside a 30,000-token cached
// prefix is marked while the cache is warm; four warm requests follow,
// then a 10-minute idle gap, then four more.
func dupSession() *sb {
	b := newSession()
	b.msg("sys", 2000)
	b.result("d1", 5000)
	b.msg("work", 23000)
	b.req("r0")
	cd := b.result("d2", 5000)
	b.mark("d1", events.Prune, cd)
	at := time.Duration(0)
	for i := 1; i <= 4; i++ {
		at += 30 * time.Second
		b.msg("m"+string(rune('a'+i)), 500)
		b.at(at).req("w" + string(rune('0'+i)))
	}
	at += 10 * time.Minute
	for i := 1; i <= 4; i++ {
		b.msg("n"+string(rune('a'+i)), 500)
		b.at(at).req("c" + string(rune('0'+i)))
		at += 30 * time.Second
	}
	return b
}

func TestEconomicsImmediateCostsMoreThanScheduled(t *testing.T) {
	evs := dupSession().evs
	p := policy.Default()
	none := Simulate(p, evs, StrategyNone)
	imm := Simulate(p, evs, StrategyImmediate)
	sch := Simulate(p, evs, StrategyScheduled)
	t.Logf("cost none %.4f immediate %.4f scheduled %.4f", none.Total.Cost, imm.Total.Cost, sch.Total.Cost)
	t.Logf("tokens none %d immediate %d scheduled %d", none.Total.Tokens, imm.Total.Tokens, sch.Total.Tokens)
	if !(imm.Total.Cost > sch.Total.Cost) {
		t.Fatalf("immediate %.5f should cost more than scheduled %.5f", imm.Total.Cost, sch.Total.Cost)
	}
	if !(imm.Total.Cost > none.Total.Cost) {
		t.Fatalf("immediate %.5f should cost more than none %.5f here", imm.Total.Cost, none.Total.Cost)
	}
	if !(sch.Total.Cost < none.Total.Cost) {
		t.Fatalf("scheduled %.5f should cost less than none %.5f", sch.Total.Cost, none.Total.Cost)
	}
	if !(sch.Total.Tokens < none.Total.Tokens && imm.Total.Tokens < sch.Total.Tokens) {
		t.Fatalf("tokens: none %d immediate %d scheduled %d", none.Total.Tokens, imm.Total.Tokens, sch.Total.Tokens)
	}
	require_eq(t, "provider", sch.Provider, "anthropic")
	require_eq(t, "immediate applications", len(imm.Applications), 1)
	require_eq(t, "immediate trigger", imm.Applications[0].Trigger, events.TriggerImmediate)
	require_eq(t, "immediate at request", imm.Applications[0].Request, 1)
	require_eq(t, "scheduled applications", len(sch.Applications), 1)
	require_eq(t, "scheduled trigger", sch.Applications[0].Trigger, events.TriggerCacheExpired)
	require_eq(t, "scheduled at request", sch.Applications[0].Request, 5)
	require_eq(t, "scheduled radius", sch.Applications[0].MutationRadius, 0)
	require_eq(t, "none applications", len(none.Applications), 0)

	// Per-request ledger of the warm second request under none, by hand:
	// bundle r0 = 30,000 (all written); w1 = 35,500, reads 30,000 and
	// writes 5,500.
	r := none.Requests[1]
	require_eq(t, "w1 tokens", r.Tokens, 35500)
	require_eq(t, "w1 read", r.CacheRead, 30000)
	require_eq(t, "w1 write", r.CacheWrite, 5500)
	require_near(t, "w1 cost", r.Cost, 30000*0.30/1e6+5500*3.75/1e6)
	// After the gap everything is written again.
	require_eq(t, "c1 read", none.Requests[5].CacheRead, 0)
}

func TestEconomicsOpenAIAutomaticCaching(t *testing.T) {
	b := &sb{now: t0}
	b.fact(&events.SessionStarted{Format: "native", Provider: "openai", Model: "gpt-4.1"})
	b.msg("sys", 1500)
	b.req("r1")
	b.msg("u", 100)
	b.at(time.Minute).req("r2")
	l := Simulate(policy.Default(), b.evs, StrategyNone)
	require_eq(t, "provider", l.Provider, "openai")
	require_eq(t, "r1 write", l.Requests[0].CacheWrite, 0)
	require_eq(t, "r1 uncached", l.Requests[0].Uncached, 1500)
	// cached prefix in 128-token steps past 1,024: 1,024 + 3x128 = 1,408.
	require_eq(t, "r2 read", l.Requests[1].CacheRead, 1408)
	require_eq(t, "r2 uncached", l.Requests[1].Uncached, 1600-1408)
	require_near(t, "r2 cost", l.Requests[1].Cost, 1408*0.50/1e6+192*2.0/1e6)
}

func TestUnknownProviderAndModelFallBack(t *testing.T) {
	b := &sb{now: t0}
	b.fact(&events.SessionStarted{Format: "native", Provider: "acme", Model: "x"})
	b.msg("sys", 1500)
	b.req("r1")
	l := Simulate(policy.Default(), b.evs, StrategyNone)
	require_eq(t, "provider", l.Provider, "acme")
	require_eq(t, "unpriced", l.Unpriced, true)
	require_near(t, "r1 cost (unpriced, never anthropic's rates)", l.Requests[0].Cost, 0)
	b = &sb{now: t0}
	b.fact(&events.SessionStarted{Format: "native"})
	b.msg("sys", 1500)
	b.req("r1")
	l = Simulate(policy.Default(), b.evs, StrategyNone)
	require_eq(t, "no provider, no model", l.Provider, "anthropic")
	require_near(t, "r1 cost (the configured default, 5m write)", l.Requests[0].Cost, 1500*3.75/1e6)
	p := policy.Default()
	pr, _ := p.Scheduler.Provider("anthropic")
	require_eq(t, "dated model finds prefix entry", pr.Price("claude-haiku-4-5-20251001").Input, 1.0)
	require_eq(t, "haiku 4.5 min cacheable", pr.Price("claude-haiku-4-5-20251001").MinCacheable, 4096)
}

func TestCalibrate(t *testing.T) {
	b := newSession()
	b.msg("sys", 2000)
	b.reqWith(&events.ModelRequest{Request: "r1", Usage: &events.Usage{InputTokens: 5, CacheWriteTokens: 12000, OutputTokens: 10}})
	b.msg("u", 1000)
	b.at(time.Minute).reqWith(&events.ModelRequest{Request: "r2", Usage: &events.Usage{InputTokens: 5, CacheReadTokens: 12000, CacheWriteTokens: 1000, OutputTokens: 10}})
	cal := Calibrate(policy.Default(), b.evs)
	require_eq(t, "reported", cal.Reported, 2)
	require_eq(t, "predicted read without head", cal.PredictedReadNoHead, 2000)
	require_eq(t, "predicted write without head", cal.PredictedWriteNoHead, 3000)
	// With the head (10,005, see below) in front of every bundle.
	require_eq(t, "predicted read", cal.PredictedRead, 12005)
	require_eq(t, "predicted write", cal.PredictedWrite, 13005)
	require_eq(t, "reported read", cal.ReportedRead, 12000)
	require_eq(t, "reported write", cal.ReportedWrite, 13000)
	// Hidden prefix (system prompt and tools the log does not hold):
	// reported 12,005 vs rendered 2,000, 13,005 vs 3,000: median 10,005.
	require_eq(t, "hidden prefix", cal.HiddenPrefix, 10005)
	require_eq(t, "head", cal.Head, 10005)
}

// TestSimulateHeadFromUnprunedReplay: pruning must never make a strategy
// send more tokens than no pruning because the head estimate grew.
func TestSimulateHeadFromUnprunedReplay(t *testing.T) {
	b := newSession()
	b.msg("u1", 100)
	b.result("a1", 5000)
	b.reqWith(&events.ModelRequest{Request: "r1", Usage: &events.Usage{InputTokens: 100, CacheWriteTokens: 35100}})
	cb := b.result("a2", 5000)
	b.mark("a1", events.Prune, cb)
	b.at(time.Second)
	b.reqWith(&events.ModelRequest{Request: "r2", Usage: &events.Usage{InputTokens: 5000, CacheReadTokens: 35100}})
	b.at(time.Second)
	b.reqWith(&events.ModelRequest{Request: "r3", Usage: &events.Usage{InputTokens: 100, CacheReadTokens: 40100}})
	none := Simulate(pol(policy.ModeScheduled), b.evs, StrategyNone)
	imm := Simulate(pol(policy.ModeScheduled), b.evs, StrategyImmediate)
	require_eq(t, "head", imm.Head, none.Head)
	if imm.Total.Tokens >= none.Total.Tokens {
		t.Fatalf("immediate sends %d tokens, none %d: pruning must send fewer", imm.Total.Tokens, none.Total.Tokens)
	}
}

// TestEconomicsPricesEachSessionWithItsOwnModel: a session is priced with
// its own provider and model, found from the model when the session names
// no provider; a model in no price table leaves the ledger unpriced (no
// cost at all) instead of priced at the default provider's rates.
func TestEconomicsPricesEachSessionWithItsOwnModel(t *testing.T) {
	for _, tc := range []struct {
		provider, model string
		wantProv        string
		unpriced        bool
	}{
		{"", "claude-sonnet-4-5-20250929", "anthropic", false},
		{"", "deepseek-chat", "deepseek", false},
		{"openai", "gpt-5.3-codex", "openai", false},
		{"", "mimo-v2-flash", "", true},
		{"ollama", "qwen3-coder:30b", "ollama", true},
	} {
		b := &sb{now: t0}
		b.fact(&events.SessionStarted{Format: "native", Provider: tc.provider, Model: tc.model})
		b.msg("sys", 3000)
		b.req("r0")
		b.msg("more", 500)
		b.at(time.Minute).req("r1")
		l := Simulate(policy.Default(), b.evs, StrategyNone)
		require_eq(t, tc.model+" provider", l.Provider, tc.wantProv)
		require_eq(t, tc.model+" unpriced", l.Unpriced, tc.unpriced)
		require_eq(t, tc.model+" priced iff cost", l.Total.Cost > 0, !tc.unpriced)
		require_eq(t, tc.model+" tokens counted", l.Total.Tokens, 2*3000+500)
	}
}

// TestHindsight: the hindsight row applies the same marks at the best
// requests known afterwards. It is never worse than none, immediate or
// scheduled; where a fixed 5-request horizon keeps a mark waiting through
// 30 warm requests that follow, hindsight applies it at once and is
// cheaper than the scheduler.
func TestHindsight(t *testing.T) {
	b := newSession()
	b.msg("sys", 10000)
	b.result("a", 3000)
	b.msg("tail", 2000)
	b.req("r0")
	cb := b.msg("u", 10)
	b.mark("a", events.Prune, cb)
	for i := range 30 {
		b.at(time.Duration(i+1) * 10 * time.Second).req(fmt.Sprintf("w%d", i))
	}
	p := policy.Default()
	p.Scheduler.HorizonRequests = 5
	ls := SimulateAll(p, b.evs, StrategyNone, StrategyImmediate, StrategyScheduled, StrategyHindsight)
	h := ls[StrategyHindsight]
	require_eq(t, "strategy", h.Strategy, StrategyHindsight)
	for _, st := range []string{StrategyNone, StrategyImmediate, StrategyScheduled} {
		if h.Total.Cost > ls[st].Total.Cost+1e-12 {
			t.Errorf("hindsight %.6f costs more than %s %.6f", h.Total.Cost, st, ls[st].Total.Cost)
		}
	}
	require_eq(t, "scheduled waits (fixed horizon 5)", len(ls[StrategyScheduled].Applications), 0)
	require_eq(t, "hindsight applies", len(h.Applications), 1)
	require_eq(t, "at the first request after the mark", h.Applications[0].Request, 1)
	if !(h.Total.Cost < ls[StrategyScheduled].Total.Cost) {
		t.Fatalf("hindsight %.6f should beat the fixed-horizon scheduler %.6f", h.Total.Cost, ls[StrategyScheduled].Total.Cost)
	}

	// On dupSession the best is the cache expiry, which the scheduler finds.
	ls = SimulateAll(policy.Default(), dupSession().evs, StrategyScheduled, StrategyHindsight)
	require_near(t, "dupSession: scheduled is the best", ls[StrategyHindsight].Total.Cost, ls[StrategyScheduled].Total.Cost)
}
