package bench

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/prunesched/prunesched/proxy"
)

// WriteTable prints the result as a Markdown table (measure, value,
// baseline or goal), then the machine. The same table goes into
// docs/performance.md.
func WriteTable(w io.Writer, r *Result) {
	var main bytes.Buffer
	tw := tabwriter.NewWriter(&main, 0, 0, 1, ' ', 0)
	rows := 0
	row := func(cols ...string) {
		rows++
		fmt.Fprintln(tw, "| "+strings.Join(cols, "\t| ")+"\t|")
	}
	row("measure", "value", "baseline / goal")
	row("---", "---", "---")
	if r.RawPublishPerS > 0 {
		row("raw JetStream async publish", rate(r.RawPublishPerS)+" msg/s", "baseline")
		row(fmt.Sprintf("pipeline, publish to projected bundle (%d facts, %d sessions)", r.PipelineFacts, r.PipelineSessions),
			rate(r.PipelinePerS)+" facts/s", fmt.Sprintf("%s facts/s per core; ratio to raw publish %.2f (its goal is retired)", rate(r.PipelinePerSPerCore), r.PipelineRatio))
		row(fmt.Sprintf("raw JetStream ordered replay (%d msgs, median of the pairs)", r.StreamMessages), rate(r.RawReplayPerS)+" msg/s", "baseline")
		row(fmt.Sprintf("projection rebuild (median of %d pairs with the replay)", len(r.RebuildPairs)), rate(r.RebuildPerS)+" msg/s",
			fmt.Sprintf("ratio %.2f, pairs %.2f-%.2f (goal >= 0.8)%s", r.RebuildRatio, r.RebuildRatioMin, r.RebuildRatioMax, mark(r.RebuildRatio >= 0.8)))
	}
	for _, k := range sizeKeys(r.RenderP99Ms) {
		if p99, ok := r.RenderP99Ms[k]; ok {
			goal := ""
			if k == "2000" {
				goal = "goal p99 <= 2 ms" + mark(p99 <= 2)
			}
			row(fmt.Sprintf("render at request, %s items (p50 / p99)", k), fmt.Sprintf("%.2f / %.2f ms", r.RenderP50Ms[k], p99), goal)
		}
	}
	if r.CoreEventsPerS > 0 {
		row(fmt.Sprintf("eligibility core, one goroutine, no NATS (median of %d rounds)", len(r.CoreRoundsPerS)), rate(r.CoreEventsPerS)+" events/s",
			fmt.Sprintf("rounds %s-%s, %.0f ns of CPU per event; goal >= 1M%s", rate(r.CoreEventsPerSMin), rate(r.CoreEventsPerSMax), r.CoreCPUNsPerEvent, mark(r.CoreEventsPerS >= 1e6)))
		row("scheduler core Decide, 2,000 items (p50)", fmt.Sprintf("%.0f µs", r.SchedulerDecideUs), "")
	}
	for _, k := range sizeKeys(r.MemoryPerSessionBytes) {
		if v, ok := r.MemoryPerSessionBytes[k]; ok {
			row(fmt.Sprintf("memory per session, %s items (projection + cores)", k), fmt.Sprintf("%.0f KiB", v/1024), "")
		}
	}
	for _, m := range r.SessionMemory {
		row(fmt.Sprintf("session memory, %d items, hot: eligibility / scheduler / projection", m.Items),
			fmt.Sprintf("%.0f / %.0f / %.0f KiB", m.EligibilityBytes/1024, m.SchedulerBytes/1024, m.ProjectionBytes/1024),
			fmt.Sprintf("all held: %.0f KiB", m.HotBytes/1024))
		// The compact form holds nothing per item: the measurement over
		// many idle sessions (IdleRSS) stands for every size; the one over
		// a few sessions is within the heap's noise.
		compact := "below the heap noise"
		if m.IdleBytes >= 0 {
			compact = fmt.Sprintf("%.1f KiB", m.IdleBytes/1024)
		}
		goal := ""
		if r.IdleRSS != nil {
			compact = compactSize(r.IdleRSS.CompactBytes)
			if m.Items == 2000 {
				goal = "goal idle <= 64 KiB + index" + mark(r.IdleRSS.CompactBytes <= 64<<10)
			}
		}
		row(fmt.Sprintf("session memory, %d items, idle: compact form + fact-id index", m.Items),
			fmt.Sprintf("%s + %.0f KiB", compact, m.IDIndexBytes/1024), goal)
		row(fmt.Sprintf("session rebuilt on demand, %d items (view + live decision)", m.Items), fmt.Sprintf("%.1f ms", m.RebuildMs), "")
	}
	if m := r.IdleRSS; m != nil {
		row(fmt.Sprintf("RSS, %d sessions of %d items (%d facts): before / held / idle", m.Sessions, m.Items, m.Facts),
			fmt.Sprintf("%.0f / %.0f / %.0f MiB", mib(m.RSSBefore), mib(m.RSSHot), mib(m.RSSIdle)),
			fmt.Sprintf("live heap %.0f / %.0f / %.0f MiB; compact form %s per session", mib(m.HeapBefore), mib(m.HeapHot), mib(m.HeapIdle), compactSize(m.CompactBytes)))
	}
	for _, k := range sizeKeys(r.ProxyP99Ms) {
		if p99, ok := r.ProxyP99Ms[k]; ok {
			goal := ""
			if k == "2000" {
				goal = "goal p99 <= 5 ms" + mark(p99 <= 5)
			}
			row(fmt.Sprintf("proxy added latency, %s items (p50 / p99)", k), fmt.Sprintf("%.2f / %.2f ms", r.ProxyP50Ms[k], p99), goal)
		}
	}
	for _, s := range r.SyncAlways {
		what := "single appends"
		if s.Batch > 1 {
			what = fmt.Sprintf("batches of %d", s.Batch)
		}
		row("store append, "+what+", default fsync (2 min)", rate(s.DefaultPerS)+" events/s", "baseline")
		row("store append, "+what+", SyncAlways", rate(s.SyncAlwaysPerS)+" events/s", fmt.Sprintf("x%.2f of default", s.Ratio))
	}
	tw.Flush()
	if rows > 2 {
		_, _ = w.Write(main.Bytes())
	}
	writeReplay(w, r.ProxyReplay, r.ProxyReplayPooled)
	writeLoad(w, r.ProxyLoad)
	writeFleet(w, r.Fleet, r.FleetSpeedup)
	m := r.Machine
	fmt.Fprintf(w, "\nmachine: %s, %d CPUs (GOMAXPROCS %d), %s RAM, %s %s", orDash(m.CPU), m.CPUs, m.GOMAXPROCS, orDash(m.MemTotal), m.GoVersion, m.OS)
	switch {
	case r.Smoke:
		fmt.Fprint(w, "; smoke run (sizes / 10, numbers not comparable)")
	case r.Quick:
		fmt.Fprint(w, "; --quick")
	}
	fmt.Fprintf(w, "; %.0fs\n", r.Seconds)
}

// sizeKeys returns a by-size map's keys (session sizes in items) in
// increasing size.
func sizeKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return cmp.Compare(x, y)
	})
	return keys
}

// compactSize prints the compact form per idle session. It holds a key and
// a watermark, tens of bytes: even over 10,000 sessions the heap's noise
// (a few MiB) can make the measured value negative, which is printed as
// what it is, not as a size.
func compactSize(b float64) string {
	if b < 0 {
		return fmt.Sprintf("below the heap noise (%.0f B measured)", b)
	}
	return fmt.Sprintf("%.0f B", b)
}

func mark(ok bool) string {
	if ok {
		return " ✓"
	}
	return " ✗"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// rate formats a per-second rate with thousands separators.
func rate(v float64) string {
	n := int64(v + 0.5)
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// writeLoad prints the proxy-load rows as their own table.
func writeLoad(w io.Writer, rows []LoadRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\none proxy under many agents at once (real Claude Code sequences; added latency vs the same request sent straight)")
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	row := func(cols ...string) { fmt.Fprintln(tw, "| "+strings.Join(cols, "\t| ")+"\t|") }
	row("sessions at once", "requests", "through the proxy / s", "added p50 / p99 (ms)", "failed open", "facts / s per core")
	row("---", "---", "---", "---", "---", "---")
	for _, x := range rows {
		fo := fmt.Sprintf("%d (%.1f%%)", x.FailedOpen, x.FailedOpenPct)
		if x.Sessions == GoalLoadSessions {
			fo += mark(x.FailedOpenPct < GoalLoadFailOpenPct)
		}
		row(strconv.Itoa(x.Sessions), strconv.Itoa(x.Requests), fmt.Sprintf("%.0f", x.RatePerS),
			fmt.Sprintf("%.2f / %.2f", x.AddedP50, x.AddedP99), fo, fmt.Sprintf("%.0f (%d facts, %.2f s CPU)", x.FactsPerCPUSecond, x.Facts, x.CPUSeconds))
	}
	tw.Flush()
	if rate, n := loadBest(rows); rate > 0 {
		fmt.Fprintf(w, "highest rate at added p99 <= %g ms and < %g%% failing open: %.0f requests/s (%d sessions)\n", GoalLoadP99Ms, GoalLoadFailOpenPct, rate, n)
	} else {
		fmt.Fprintf(w, "no level had an added p99 <= %g ms with < %g%% failing open\n", GoalLoadP99Ms, GoalLoadFailOpenPct)
	}
}

// writeReplay prints the proxy-replay rows as their own table.
func writeReplay(w io.Writer, rows []ReplayRow, pooled *ReplayPooled) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nproxy on replayed real request sequences: added latency per request vs direct (ms), prunesched / bare reverse proxy")
	if t := rows[0].ThinkMs; t > 0 {
		fmt.Fprintf(w, "(the fake upstream waits %g ms before answering, as a model does; the wait is taken out of every time)\n", t)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	row := func(cols ...string) { fmt.Fprintln(tw, "| "+strings.Join(cols, "\t| ")+"\t|") }
	row("trace", "api", "stream", "requests", "max body", "direct p50 / p99", "bare p50 / p99", "prunesched p50 / p99", fmt.Sprintf("ratio p50 (<= %g)", GoalReplayRatioP50), fmt.Sprintf("ratio p99 (<= %g)", GoalReplayRatioP99), "failed open")
	row("---", "---", "---", "---", "---", "---", "---", "---", "---", "---", "---")
	for _, x := range rows {
		row(x.Trace, x.API, strconv.FormatBool(x.Stream), strconv.Itoa(x.Requests), fmt.Sprintf("%.0f KiB", x.MaxBodyKiB),
			fmt.Sprintf("%.2f / %.2f", x.DirectP50, x.DirectP99), fmt.Sprintf("%.2f / %.2f", x.BareP50, x.BareP99),
			fmt.Sprintf("%.2f / %.2f", x.ProxyP50, x.ProxyP99),
			fmt.Sprintf("%.2f%s", x.RatioP50, mark(x.RatioP50 <= GoalReplayRatioP50)), fmt.Sprintf("%.2f%s", x.RatioP99, mark(x.RatioP99 <= GoalReplayRatioP99)),
			strconv.Itoa(x.FailedOpen))
	}
	if p := pooled; p != nil {
		row(fmt.Sprintf("all %d real sequences", p.Sequences), "", "", strconv.Itoa(p.Requests), "", "",
			fmt.Sprintf("%.2f / %.2f", p.BareP50, p.BareP99), fmt.Sprintf("%.2f / %.2f", p.ProxyP50, p.ProxyP99),
			fmt.Sprintf("%.2f%s", p.RatioP50, mark(p.RatioP50 <= GoalReplayRatioP50)), fmt.Sprintf("%.2f%s", p.RatioP99, mark(p.RatioP99 <= GoalReplayRatioP99)), "")
	}
	tw.Flush()
	fmt.Fprintln(w, "\nprunesched proxy stages, p50 per request (ms; record runs after the response)")
	tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	head := []string{"trace", "api", "stream"}
	head = append(head, proxy.LatencyStages...)
	row(head...)
	row(slices.Repeat([]string{"---"}, len(head))...)
	for _, x := range rows {
		cols := []string{x.Trace, x.API, strconv.FormatBool(x.Stream)}
		for _, st := range proxy.LatencyStages {
			cols = append(cols, fmt.Sprintf("%.2f", x.StageP50[st]))
		}
		row(cols...)
	}
	tw.Flush()
	writeSynthetic(w, rows)
}

// writeSynthetic prints the synthetic rows side by side: each request adds
// one new tool output of the row's size, so a reader sees whether the
// added p99, and the append stage's, grow with it.
func writeSynthetic(w io.Writer, rows []ReplayRow) {
	var syn []ReplayRow
	for _, x := range rows {
		if x.NewOutputKiB > 0 {
			syn = append(syn, x)
		}
	}
	if len(syn) == 0 {
		return
	}
	fmt.Fprintln(w, "\nsynthetic rows: each request adds one new tool output (ms; the window rows compact as a client does near its window)")
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	row := func(cols ...string) { fmt.Fprintln(tw, "| "+strings.Join(cols, "\t| ")+"\t|") }
	row("new output", "window", "body mean / max", "compactions", "bare p50 / p99", "prunesched p50 / p99", "ratio p50 / p99", "read p50 / p99", "append p50 / p99", "failed open")
	row(slices.Repeat([]string{"---"}, 10)...)
	for _, x := range syn {
		window := "none (beyond any)"
		if x.WindowTokens > 0 {
			window = fmt.Sprintf("%dk tokens", x.WindowTokens/1000)
		}
		row(fmt.Sprintf("%.0f KiB", x.NewOutputKiB), window, fmt.Sprintf("%.0f / %.0f KiB", x.MeanBodyKiB, x.MaxBodyKiB), strconv.Itoa(x.Compactions),
			fmt.Sprintf("%.2f / %.2f", x.BareP50, x.BareP99), fmt.Sprintf("%.2f / %.2f", x.ProxyP50, x.ProxyP99),
			fmt.Sprintf("%.2f / %.2f", x.RatioP50, x.RatioP99),
			fmt.Sprintf("%.2f / %.2f", x.StageP50[proxy.StageRead], x.StageP99[proxy.StageRead]), fmt.Sprintf("%.2f / %.2f", x.StageP50[proxy.StageAppend], x.StageP99[proxy.StageAppend]),
			strconv.Itoa(x.FailedOpen))
	}
	tw.Flush()
}
