package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/testutil"
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
	testutil.Equal(t, sch.Provider, "anthropic", "provider")
	testutil.Equal(t, len(imm.Applications), 1, "immediate applications")
	testutil.Equal(t, imm.Applications[0].Trigger, events.TriggerImmediate, "immediate trigger")
	testutil.Equal(t, imm.Applications[0].Request, 1, "immediate at request")
	testutil.Equal(t, len(sch.Applications), 1, "scheduled applications")
	testutil.Equal(t, sch.Applications[0].Trigger, events.TriggerCacheExpired, "scheduled trigger")
	testutil.Equal(t, sch.Applications[0].Request, 5, "scheduled at request")
	testutil.Equal(t, sch.Applications[0].MutationRadius, 0, "scheduled radius")
	testutil.Equal(t, len(none.Applications), 0, "none applications")

	// Per-request ledger of the warm second request under none, by hand:
	// bundle r0 = 30,000 (all written); w1 = 35,500, reads 30,000 and
	// writes 5,500.
	r := none.Requests[1]
	testutil.Equal(t, r.Tokens, 35500, "w1 tokens")
	testutil.Equal(t, r.CacheRead, 30000, "w1 read")
	testutil.Equal(t, r.CacheWrite, 5500, "w1 write")
	testutil.Near(t, r.Cost, 30000*0.30/1e6+5500*3.75/1e6, "w1 cost")
	// After the gap everything is written again.
	testutil.Equal(t, none.Requests[5].CacheRead, 0, "c1 read")
}

func TestEconomicsOpenAIAutomaticCaching(t *testing.T) {
	b := &sb{now: t0}
	b.fact(&events.SessionStarted{Format: "native", Provider: "openai", Model: "gpt-4.1"})
	b.msg("sys", 1500)
	b.req("r1")
	b.msg("u", 100)
	b.at(time.Minute).req("r2")
	l := Simulate(policy.Default(), b.evs, StrategyNone)
	testutil.Equal(t, l.Provider, "openai", "provider")
	testutil.Equal(t, l.Requests[0].CacheWrite, 0, "r1 write")
	testutil.Equal(t, l.Requests[0].Uncached, 1500, "r1 uncached")
	// cached prefix in 128-token steps past 1,024: 1,024 + 3x128 = 1,408.
	testutil.Equal(t, l.Requests[1].CacheRead, 1408, "r2 read")
	testutil.Equal(t, l.Requests[1].Uncached, 1600-1408, "r2 uncached")
	testutil.Near(t, l.Requests[1].Cost, 1408*0.50/1e6+192*2.0/1e6, "r2 cost")
}

func TestUnknownProviderAndModelFallBack(t *testing.T) {
	b := &sb{now: t0}
	b.fact(&events.SessionStarted{Format: "native", Provider: "acme", Model: "x"})
	b.msg("sys", 1500)
	b.req("r1")
	l := Simulate(policy.Default(), b.evs, StrategyNone)
	testutil.Equal(t, l.Provider, "acme", "provider")
	testutil.Equal(t, l.Unpriced, true, "unpriced")
	testutil.Near(t, l.Requests[0].Cost, 0, "r1 cost (unpriced, never anthropic's rates)")
	b = &sb{now: t0}
	b.fact(&events.SessionStarted{Format: "native"})
	b.msg("sys", 1500)
	b.req("r1")
	l = Simulate(policy.Default(), b.evs, StrategyNone)
	testutil.Equal(t, l.Provider, "anthropic", "no provider, no model")
	testutil.Near(t, l.Requests[0].Cost, 1500*3.75/1e6, "r1 cost (the configured default, 5m write)")
	p := policy.Default()
	pr, _ := p.Scheduler.Provider("anthropic")
	testutil.Equal(t, pr.Price("claude-haiku-4-5-20251001").Input, 1.0, "dated model finds prefix entry")
	testutil.Equal(t, pr.Price("claude-haiku-4-5-20251001").MinCacheable, 4096, "haiku 4.5 min cacheable")
}

func TestCalibrate(t *testing.T) {
	b := newSession()
	b.msg("sys", 2000)
	b.reqWith(&events.ModelRequest{Request: "r1", Usage: &events.Usage{InputTokens: 5, CacheWriteTokens: 12000, OutputTokens: 10}})
	b.msg("u", 1000)
	b.at(time.Minute).reqWith(&events.ModelRequest{Request: "r2", Usage: &events.Usage{InputTokens: 5, CacheReadTokens: 12000, CacheWriteTokens: 1000, OutputTokens: 10}})
	cal := Calibrate(policy.Default(), b.evs)
	testutil.Equal(t, cal.Reported, 2, "reported")
	testutil.Equal(t, cal.PredictedReadNoHead, 2000, "predicted read without head")
	testutil.Equal(t, cal.PredictedWriteNoHead, 3000, "predicted write without head")
	// With the head (10,005, see below) in front of every bundle.
	testutil.Equal(t, cal.PredictedRead, 12005, "predicted read")
	testutil.Equal(t, cal.PredictedWrite, 13005, "predicted write")
	testutil.Equal(t, cal.ReportedRead, 12000, "reported read")
	testutil.Equal(t, cal.ReportedWrite, 13000, "reported write")
	// Hidden prefix (system prompt and tools the log does not hold):
	// reported 12,005 vs rendered 2,000, 13,005 vs 3,000: median 10,005.
	testutil.Equal(t, cal.HiddenPrefix, 10005, "hidden prefix")
	testutil.Equal(t, cal.Head, 10005, "head")
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
	testutil.Equal(t, imm.Head, none.Head, "head")
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
		testutil.Equal(t, l.Provider, tc.wantProv, tc.model+" provider")
		testutil.Equal(t, l.Unpriced, tc.unpriced, tc.model+" unpriced")
		testutil.Equal(t, l.Total.Cost > 0, !tc.unpriced, tc.model+" priced iff cost")
		testutil.Equal(t, l.Total.Tokens, 2*3000+500, tc.model+" tokens counted")
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
	testutil.Equal(t, h.Strategy, StrategyHindsight, "strategy")
	for _, st := range []string{StrategyNone, StrategyImmediate, StrategyScheduled} {
		if h.Total.Cost > ls[st].Total.Cost+1e-12 {
			t.Errorf("hindsight %.6f costs more than %s %.6f", h.Total.Cost, st, ls[st].Total.Cost)
		}
	}
	testutil.Equal(t, len(ls[StrategyScheduled].Applications), 0, "scheduled waits (fixed horizon 5)")
	testutil.Equal(t, len(h.Applications), 1, "hindsight applies")
	testutil.Equal(t, h.Applications[0].Request, 1, "at the first request after the mark")
	if !(h.Total.Cost < ls[StrategyScheduled].Total.Cost) {
		t.Fatalf("hindsight %.6f should beat the fixed-horizon scheduler %.6f", h.Total.Cost, ls[StrategyScheduled].Total.Cost)
	}

	// On dupSession the best is the cache expiry, which the scheduler finds.
	ls = SimulateAll(policy.Default(), dupSession().evs, StrategyScheduled, StrategyHindsight)
	testutil.Near(t, ls[StrategyHindsight].Total.Cost, ls[StrategyScheduled].Total.Cost, "dupSession: scheduled is the best")
}

// TestEconomicsPriceExactCounts: facts decided on estimates that carry
// their exact counts (the live proxy's) are decided as without them, byte
// for byte, and priced at the exact counts: each request of the unpruned
// ledger grows by what the exact counts of the messages before it add.
func TestEconomicsPriceExactCounts(t *testing.T) {
	plain := dupSession().evs
	exact := make([]events.Event, len(plain))
	extra := map[int]int{} // fact index -> exact minus decision count
	facts := 0
	for i, ev := range plain {
		exact[i] = ev
		if m, ok := ev.Data.(*events.Message); ok {
			cp := *m
			cp.TokensExact = m.Tokens + m.Tokens/10 + 1
			exact[i].Data = &cp
			extra[facts] = cp.TokensExact - m.Tokens
		}
		if ev.IsFact() {
			facts++
		}
	}
	for _, mode := range []string{StrategyScheduled, StrategyImmediate} {
		_, a := drive(t, pol(mode), plain)
		_, b := drive(t, pol(mode), exact)
		testutil.Equal(t, encodeAll(t, b), encodeAll(t, a), mode+": applications with exact counts")
	}
	p := policy.Default()
	lp, le := Simulate(p, plain, StrategyNone), Simulate(p, exact, StrategyNone)
	testutil.Equal(t, len(le.Requests), len(lp.Requests), "requests")
	for k, r := range le.Requests {
		want := lp.Requests[k].Tokens
		for f, d := range extra {
			if f < r.Fact {
				want += d
			}
		}
		testutil.Equal(t, r.Tokens, want, fmt.Sprintf("request %d tokens", k))
	}
	if !(le.Total.Cost > lp.Total.Cost) {
		t.Fatalf("exact counts above the estimates cost %.5f, estimates %.5f", le.Total.Cost, lp.Total.Cost)
	}
}
