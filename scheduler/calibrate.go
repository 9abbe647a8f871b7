package scheduler

import (
	"sort"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/policy"
)

// Calibration compares the cache model with what the provider reported,
// over the requests of one session that carry a usage report, replayed
// unpruned.
type Calibration struct {
	Provider string `json:"provider"`
	Model    string `json:"model,omitempty"`
	// Requests is the number of requests; Reported those with usage.
	Requests int `json:"requests"`
	Reported int `json:"reported"`
	// Predicted* come from the cache model over the rendered bundles;
	// Reported* from ModelRequest.Usage, on the same requests.
	PredictedRead  int `json:"predicted_cache_read"`
	PredictedWrite int `json:"predicted_cache_write"`
	ReportedRead   int `json:"reported_cache_read"`
	ReportedWrite  int `json:"reported_cache_write"`
	ReportedInput  int `json:"reported_input"`
	// Rendered is the sum of the rendered prompt sizes (our tokenizer);
	// ReportedPrompt the sum of input + cache read + cache write.
	Rendered       int `json:"rendered"`
	ReportedPrompt int `json:"reported_prompt"`
	// HiddenPrefix is the median over reported requests of reported prompt
	// minus rendered prompt: context the log does not hold (system prompt,
	// tool definitions) plus tokenizer difference.
	HiddenPrefix int `json:"hidden_prefix"`
	// ReadError and WriteError are (predicted - reported) / reported (0
	// when nothing was reported).
	ReadError float64 `json:"read_error"`
	// Head is the head the model assumed (equal to HiddenPrefix when
	// every request is reported); the NoHead totals are the model without it.
	Head                 int     `json:"head"`
	PredictedReadNoHead  int     `json:"predicted_cache_read_no_head"`
	PredictedWriteNoHead int     `json:"predicted_cache_write_no_head"`
	WriteError           float64 `json:"write_error"`
}

// Calibrate replays a session unpruned through the cache model and
// reports predicted against reported cache-read and cache-write totals.
//
// The model's head (see Core.Economics) is estimated from the same reports,
// so Predicted* include it; PredictedReadNoHead and PredictedWriteNoHead
// show the model over the log alone.
func Calibrate(p policy.Policy, evs []events.Event) Calibration {
	c := replay(p, evs, StrategyNone)
	return calibrate(c, c.Economics(), evs)
}

// calibrate is Calibrate given the unpruned replay c of evs and its ledger
// l (c.Economics()).
func calibrate(c *Core, l Ledger, evs []events.Event) Calibration {
	raw := c.economics(0)
	var cal0 Calibration
	for _, rc := range raw.Requests {
		cal0.PredictedReadNoHead += rc.CacheRead
		cal0.PredictedWriteNoHead += rc.CacheWrite
	}
	usage := map[string]*events.Usage{}
	session := ""
	if len(evs) > 0 {
		session = evs[0].Session
	}
	for _, ev := range evs {
		if r, ok := ev.Data.(*events.ModelRequest); ok && ev.Session == session && r.Usage != nil {
			usage[r.Request] = r.Usage
		}
	}
	cal := Calibration{Provider: l.Provider, Model: l.Model, Requests: len(l.Requests), Head: l.Head,
		PredictedReadNoHead: cal0.PredictedReadNoHead, PredictedWriteNoHead: cal0.PredictedWriteNoHead}
	var hidden []int
	for _, rc := range l.Requests {
		u, ok := usage[rc.Request]
		if !ok {
			continue
		}
		cal.Reported++
		cal.PredictedRead += rc.CacheRead
		cal.PredictedWrite += rc.CacheWrite
		cal.ReportedRead += u.CacheReadTokens
		cal.ReportedWrite += u.CacheWriteTokens
		cal.ReportedInput += u.InputTokens
		prompt := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
		cal.ReportedPrompt += prompt
		cal.Rendered += rc.Tokens - l.Head
		hidden = append(hidden, prompt-(rc.Tokens-l.Head))
	}
	if len(hidden) > 0 {
		sort.Ints(hidden)
		cal.HiddenPrefix = hidden[len(hidden)/2]
	}
	cal.ReadError = relErr(cal.PredictedRead, cal.ReportedRead)
	cal.WriteError = relErr(cal.PredictedWrite, cal.ReportedWrite)
	return cal
}

func relErr(pred, rep int) float64 {
	if rep == 0 {
		return 0
	}
	return float64(pred-rep) / float64(rep)
}
