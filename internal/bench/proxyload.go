package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/prunesched/prunesched/internal/bench/replay"
	"github.com/prunesched/prunesched/internal/importers"
)

// LoadRow is one level of proxy-load: Sessions agents at once through one
// proxy, each replaying a real Claude Code request sequence (Anthropic
// Messages, not streamed), each request sent straight to the fake
// upstream and through the proxy, the upstream thinking Config.Think
// before each answer.
type LoadRow struct {
	Sessions int `json:"sessions"`
	// Requests is the number of requests sent through the proxy.
	Requests int `json:"requests"`
	// RatePerS is Requests per second of the level's wall time.
	RatePerS float64 `json:"requests_per_s"`
	// AddedP50 and AddedP99 are the added latency through the proxy
	// against the same request sent straight (ms), think time left out.
	AddedP50 float64 `json:"added_p50_ms"`
	AddedP99 float64 `json:"added_p99_ms"`
	// FailedOpen counts the requests the proxy sent on unchanged after a
	// failure or its budget (prunesched_proxy_requests_total).
	FailedOpen    int     `json:"failed_open"`
	FailedOpenPct float64 `json:"failed_open_pct"`
}

// Goals for proxy-load (issue 28): fewer than GoalLoadFailOpenPct percent
// of requests fail open at GoalLoadSessions sessions at once, and the
// rate reported is the highest at an added p99 of at most
// GoalLoadP99Ms.
const (
	GoalLoadSessions    = 50
	GoalLoadFailOpenPct = 1.0
	GoalLoadP99Ms       = 5.0
)

// loadLevels are proxy-load's numbers of sessions at once.
var loadLevels = []int{1, 2, 4, 8, 16, 32, 50}

// proxyLoad runs proxy-load: one proxy (fresh log), one level after the
// other, the rig settled between levels.
func (b *runner) proxyLoad(ctx context.Context) error {
	if len(b.cfg.Traces) == 0 {
		return fmt.Errorf("no traces to replay (see --traces)")
	}
	limit := b.pick(60, 20)
	var seqs [][]peerTurn
	var names []string
	for _, path := range b.cfg.Traces {
		sessions, err := importers.Import(path, importers.FormatAuto)
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		for _, s := range sessions {
			if s.Format != importers.FormatClaudeCode {
				continue
			}
			turns := replay.FromEvents(s.Events).Build(replay.Anthropic, false)
			if len(turns) > limit {
				turns = turns[:limit]
			}
			if len(turns) == 0 {
				continue
			}
			var seq []peerTurn
			for _, t := range turns {
				seq = append(seq, peerTurn{Body: t.Body, Answer: t.Answer, ContentType: t.ContentType})
			}
			seqs = append(seqs, seq)
			names = append(names, strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)))
		}
	}
	if len(seqs) == 0 {
		return fmt.Errorf("load: no Claude Code trace among %d traces", len(b.cfg.Traces))
	}
	rig, err := b.startReplayRig(ctx)
	if err != nil {
		return err
	}
	defer rig.close()
	levels := loadLevels
	if b.cfg.Smoke {
		levels = []int{1, 2}
	}
	b.progress("proxy-load: %d Claude Code sequences (%s), up to %d requests each, think %s", len(seqs), strings.Join(names, ", "), limit, b.cfg.Think)
	for _, n := range levels {
		_, fail0 := rig.outcomes()
		job := &peerJob{Session: fmt.Sprintf("load-%d", n), API: replay.Anthropic, URLs: rig.urls, Think: int64(b.cfg.Think),
			Load: &peerLoad{Sessions: n, Seqs: seqs}}
		sent, wall, err := rig.peer.runLoad(job)
		if err != nil {
			return err
		}
		_, fail1 := rig.outcomes()
		var added []time.Duration
		for _, d := range sent {
			added = append(added, d[2].total()-d[0].total())
		}
		row := LoadRow{Sessions: n, Requests: len(sent), FailedOpen: fail1 - fail0}
		row.AddedP50, row.AddedP99 = pctMs(added)
		if wall > 0 {
			row.RatePerS = float64(len(sent)) / wall.Seconds()
		}
		if row.Requests > 0 {
			row.FailedOpenPct = 100 * float64(row.FailedOpen) / float64(row.Requests)
		}
		b.res.ProxyLoad = append(b.res.ProxyLoad, row)
		b.progress("proxy-load: %d sessions: %d requests, %.0f/s through the proxy, added p50 %.2f ms p99 %.2f ms, %d failed open (%.1f%%)",
			n, row.Requests, row.RatePerS, row.AddedP50, row.AddedP99, row.FailedOpen, row.FailedOpenPct)
		if err := rig.settle(ctx); err != nil {
			return err
		}
	}
	return nil
}

// loadBest is the highest rate of the levels with an added p99 within
// GoalLoadP99Ms and fewer than GoalLoadFailOpenPct failing open (0 when
// none), and its number of sessions.
func loadBest(rows []LoadRow) (rate float64, sessions int) {
	for _, r := range rows {
		if r.AddedP99 <= GoalLoadP99Ms && r.FailedOpenPct < GoalLoadFailOpenPct && r.RatePerS > rate {
			rate, sessions = r.RatePerS, r.Sessions
		}
	}
	return rate, sessions
}
