package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/events/tokens"
	"github.com/prunesched/prunesched/pipeline"
	"github.com/prunesched/prunesched/projections"
)

// SessionMemory is what a session costs in memory in the running
// pipeline, per holder, while held (hot) and once an idle sweep evicted
// it to its compact form, at one session size. Bytes are live heap after
// a GC (runtime/metrics /gc/heap/live:bytes), per session.
type SessionMemory struct {
	Items    int `json:"items"`
	Sessions int `json:"sessions"`
	// Hot bytes per session, per holder: freed when the idle sweep evicts
	// the session from that holder.
	EligibilityBytes float64 `json:"eligibility_bytes"`
	SchedulerBytes   float64 `json:"scheduler_bytes"`
	ProjectionBytes  float64 `json:"projection_bytes"`
	// HotBytes is the whole growth of the heap with the sessions held
	// (the three holders, the store's fact-id index, the embedded
	// server's per-subject state and caches).
	HotBytes float64 `json:"hot_bytes"`
	// IDIndexBytes is the store's fact-id index of one session (ids,
	// sequences and content digests; the payload index Append checks
	// against, bounded by store.Config.IDCacheEntries, not evicted by the
	// idle sweep), measured by loading it into a fresh store.
	IDIndexBytes float64 `json:"id_index_bytes"`
	// IdleBytes is the compact form: what the pipeline still holds per
	// session after the idle sweep (keys, watermarks, the scheduler's
	// pending summary), measured by dropping the pipeline (its fixed
	// cost, taken before any session with its store's blob cache filled,
	// subtracted; both on a server a warm-up pipeline already left its
	// durable consumers on, and read once the server is quiet). An upper bound: it also counts what the
	// pipeline's consumers grew while catching up (buffers, queues),
	// divided among the sessions measured. With a few sessions this is
	// within the heap readings' noise (a few hundred KiB to a few MiB in
	// all, either sign); IdleRSS.CompactBytes measures it over 10,000.
	IdleBytes float64 `json:"idle_bytes"`
	// ServerIdleBytes is the rest of the heap's growth per idle session:
	// the embedded server's share (subjects, consumer state, the duplicate
	// window's message ids for 2 minutes, its last block's cache, which
	// is per server, not per session: large when few sessions are
	// measured).
	ServerIdleBytes float64 `json:"server_idle_bytes"`
	// RebuildMs is the on-demand rebuild of one evicted session: a view
	// of its projection and a live decision (the scheduler's core rebuilt
	// from the log).
	RebuildMs float64 `json:"rebuild_ms"`
}

// IdleRSS is the process with many idle sessions: resident memory and live
// heap before the sessions, with them held, and after the idle sweep.
type IdleRSS struct {
	Sessions int `json:"sessions"`
	Items    int `json:"items"`
	Facts    int `json:"facts"`
	// RSS (VmRSS, after debug.FreeOSMemory) and live heap, in bytes.
	RSSBefore  int64 `json:"rss_before"`
	RSSHot     int64 `json:"rss_hot"`
	RSSIdle    int64 `json:"rss_idle"`
	HeapBefore int64 `json:"heap_before"`
	HeapHot    int64 `json:"heap_hot"`
	HeapIdle   int64 `json:"heap_idle"`
	// CompactBytes is the compact form per idle session, measured as
	// SessionMemory.IdleBytes is (see measuredPipeline), over all the
	// sessions, so the heap readings' noise (a few MiB) divides by 10,000:
	// measured -262 to 2,893 B per session in five runs, i.e. zero within
	// that noise, and it can come out negative. The compact form holds
	// nothing per item, so it is the same at any session size.
	CompactBytes float64 `json:"compact_bytes"`
}

// sessionMemory measures, on the real pipeline over an embedded server,
// what an idle session costs in each holder at 200 and 2,000 items, hot
// and once the idle sweep (pipeline.EvictIdle) evicted it, then the
// process's resident memory with 10,000 idle sessions.
//
// The three holders are measured by what their idle sweeps free, the
// compact form by what dropping the whole pipeline frees beyond its fixed
// cost (measuredPipeline; with 10,000 sessions in idleRSS, where the
// noise of the heap readings divides out), the fact-id index by what dropping a store that loaded it frees;
// the rest of the heap's growth is the server's. The embedded server shares the process and its caches expire on timers,
// so heaps compared across server activity are read once it is quiet
// (settledHeap).
func (b *runner) sessionMemory(ctx context.Context) error {
	for _, size := range []int{b.size(200), b.size(2000)} {
		k := b.pick(40, 10)
		if size == b.size(2000) {
			k = b.pick(8, 3)
		}
		m, err := b.sessionMemoryAt(ctx, size, k)
		if err != nil {
			return err
		}
		b.res.SessionMemory = append(b.res.SessionMemory, m)
		b.progress("session-memory: %d items (%d sessions): hot %.0f KiB (eligibility %.0f, scheduler %.0f, projection %.0f); idle %.2f KiB measured over %d sessions, within the heap's noise (the compact form is measured over many sessions below) + fact-id index %.0f KiB (server %.0f KiB); rebuild on demand %.1f ms",
			size, k, m.HotBytes/1024, m.EligibilityBytes/1024, m.SchedulerBytes/1024, m.ProjectionBytes/1024, m.IdleBytes/1024, k, m.IDIndexBytes/1024, m.ServerIdleBytes/1024, m.RebuildMs)
	}
	rss, err := b.idleRSS(ctx, b.pick(10000, 1000), b.size(20))
	if err != nil {
		return err
	}
	b.res.IdleRSS = rss
	b.progress("session-memory: %d idle sessions of %d items: RSS %.0f MiB before, %.0f MiB held, %.0f MiB idle; live heap %.0f / %.0f / %.0f MiB; compact form %s per session",
		rss.Sessions, rss.Items, mib(rss.RSSBefore), mib(rss.RSSHot), mib(rss.RSSIdle), mib(rss.HeapBefore), mib(rss.HeapHot), mib(rss.HeapIdle), compactSize(rss.CompactBytes))
	return nil
}

// sessionMemoryAt measures k sessions of size items on a fresh server.
func (b *runner) sessionMemoryAt(ctx context.Context, size, k int) (SessionMemory, error) {
	m := SessionMemory{Items: size, Sessions: k}
	r, err := b.startLog(ctx, false)
	if err != nil {
		return m, err
	}
	defer r.close()
	p, stop, hNone, hEmpty, err := b.measuredPipeline(ctx, r)
	if err != nil {
		return m, err
	}
	defer stop()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	names := make([]string, k)
	for i := range names {
		names[i] = fmt.Sprintf("smem%d-%d", size, i)
	}
	if err := b.appendSessions(ctx, r.st, names, size, 8); err != nil {
		return m, err
	}
	if err := p.WaitIdle(wctx); err != nil {
		return m, fmt.Errorf("session-memory: %w", err)
	}
	for _, n := range names {
		p.Projection.View("", n, func(*projections.Session) {}) // in memory, viewed
	}
	per := func(d int64) float64 { return float64(d) / float64(k) }
	// Each holder's sweep twice: the first marks, the second evicts
	// everything not used since (all of them).
	h := b.settledHeap(ctx)
	for _, holder := range []struct {
		evict func() int
		into  *float64
	}{
		{p.Eligibility.EvictIdle, &m.EligibilityBytes},
		{p.Scheduler.EvictIdle, &m.SchedulerBytes},
		{p.Projection.EvictIdle, &m.ProjectionBytes},
	} {
		holder.evict()
		holder.evict()
		after := liveHeap()
		*holder.into = per(h - after)
		h = after
	}
	m.HotBytes = m.EligibilityBytes + m.SchedulerBytes + m.ProjectionBytes
	// Rebuilt on demand: a view and a live decision of one session, then
	// evicted again.
	t := time.Now()
	if !p.Projection.View(events.DefaultTenant, names[0], func(*projections.Session) {}) {
		return m, fmt.Errorf("session-memory: %s not rebuilt", names[0])
	}
	if _, err := p.Scheduler.DecideLive(ctx, events.DefaultTenant, names[0], t0.Add(24*time.Hour), "smem-req"); err != nil {
		return m, fmt.Errorf("session-memory: rebuild: %w", err)
	}
	m.RebuildMs = ms(time.Since(t))
	for range 2 {
		p.EvictIdle()
	}
	// The compact form: what the sessions still hold, the server's share
	// included, the fact-id index excluded (below).
	hIdle := b.settledHeap(ctx)
	stop()
	p = nil
	hGone := b.settledHeap(ctx)
	m.IdleBytes = per((hIdle - hGone) - (hEmpty - hNone))
	withServer := per(hIdle - hEmpty)
	// The fact-id index: a store that loaded every session's ids (to
	// check a repeated fact), then dropped.
	idx, err := store.Open(ctx, r.nc, store.Config{Tokens: tokens.New(), SoleWriter: true}, nil)
	if err != nil {
		return m, err
	}
	first := b.w.session("", names[0], size)[0]
	for _, n := range names {
		ev := first
		ev.Session, ev.ID = n, n+"-e000001"
		if _, err := idx.Append(ctx, []events.Event{ev}); err != nil {
			return m, fmt.Errorf("session-memory: load fact ids: %w", err)
		}
	}
	hIdx := b.settledHeap(ctx)
	runtime.KeepAlive(idx)
	idx = nil
	m.IDIndexBytes = per(hIdx - liveHeap())
	m.ServerIdleBytes = withServer - m.IDIndexBytes - m.IdleBytes
	return m, nil
}

// measuredPipeline starts on r's stream a pipeline (no idle timer) whose
// memory the caller measures by stopping and dropping it, and returns the
// live heap before it started (hNone) and once it is idle with no session
// yet (hEmpty), both read once the server is quiet. It reads through a
// store of its own, so dropping it drops everything it holds. Two things
// make its fixed cost (hEmpty - hNone) count what its stop frees, so that
// the compact form measured as (heap before its stop - heap after) -
// (hEmpty - hNone) is neither negative nor inflated by shared state:
//   - a warm-up pipeline run to idle and stopped first leaves on the
//     server what any pipeline creates there and keeps past its stop (the
//     durable consumers and their state); without it those were counted
//     in the fixed cost but never freed by the stop, and the compact form
//     came out negative (-56 and -695 KiB per session);
//   - its store's blob cache (bounded, shared by all sessions) is filled
//     with the workload's outputs before hEmpty, as full as it is at the
//     end, rather than counted as the sessions'.
func (b *runner) measuredPipeline(ctx context.Context, r *logRig) (p *pipeline.Pipeline, stop func(), hNone, hEmpty int64, err error) {
	open := func() (*pipeline.Pipeline, *store.Store, func(), error) {
		st, err := store.Open(ctx, r.nc, store.Config{Tokens: tokens.New(), SoleWriter: true}, nil)
		if err != nil {
			return nil, nil, nil, err
		}
		p, stop, err := b.startPipelineConfig(st, pipeline.Config{IdleAfter: -1})
		if err != nil {
			return nil, nil, nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		if err := p.WaitIdle(wctx); err != nil {
			stop()
			return nil, nil, nil, fmt.Errorf("session-memory: %w", err)
		}
		return p, st, stop, nil
	}
	_, _, warmStop, err := open()
	if err != nil {
		return nil, nil, 0, 0, err
	}
	warmStop()
	hNone = b.settledHeap(ctx)
	p, st, stop, err := open()
	if err != nil {
		return nil, nil, 0, 0, err
	}
	for _, h := range b.w.hashes {
		if _, err := st.GetBlob(ctx, h); err != nil {
			stop()
			return nil, nil, 0, 0, fmt.Errorf("session-memory: read blob %s: %w", h, err)
		}
	}
	return p, stop, hNone, b.settledHeap(ctx), nil
}

// appendSessions appends the sessions named, of size items each, with
// writers concurrent writers in batches of 100.
func (b *runner) appendSessions(ctx context.Context, st *store.Store, names []string, size, writers int) error {
	work := make(chan string)
	errc := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for n := range work {
				evs := b.w.session("", n, size)
				for len(evs) > 0 {
					c := min(100, len(evs))
					if err := appendEvents(ctx, st, evs[:c]); err != nil {
						errc <- err
						return
					}
					evs = evs[c:]
				}
			}
		})
	}
	var err error
feed:
	for _, n := range names {
		select {
		case work <- n:
		case err = <-errc:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(errc)
	if err == nil {
		err = <-errc
	}
	if err != nil {
		return fmt.Errorf("append sessions: %w", err)
	}
	return nil
}

// idleRSS runs n sessions of items items through a fresh pipeline and
// reports the resident memory and live heap before, with them held, and
// after the idle sweep.
func (b *runner) idleRSS(ctx context.Context, n, items int) (*IdleRSS, error) {
	r, err := b.startLog(ctx, false)
	if err != nil {
		return nil, err
	}
	defer r.close()
	p, stop, hNone, hEmpty, err := b.measuredPipeline(ctx, r)
	if err != nil {
		return nil, err
	}
	defer stop()
	out := &IdleRSS{Sessions: n, Items: items, Facts: n * len(b.w.session("", "x", items))}
	out.HeapBefore, out.RSSBefore = hEmpty, rss()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("idle%05d", i)
	}
	if err := b.appendSessions(ctx, r.st, names, items, 16); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	if err := p.WaitIdle(wctx); err != nil {
		return nil, fmt.Errorf("session-memory: %w", err)
	}
	out.HeapHot, out.RSSHot = b.settledHeap(ctx), rss()
	p.EvictIdle()
	p.EvictIdle()
	out.HeapIdle, out.RSSIdle = b.settledHeap(ctx), rss()
	stop()
	p = nil
	out.CompactBytes = float64((out.HeapIdle-b.settledHeap(ctx))-(hEmpty-hNone)) / float64(n)
	return out, nil
}

// settledHeap returns the live heap once the embedded server has gone
// quiet: its message caches expire about 10 s after their last use and
// would otherwise be counted as freed by whatever is measured then. It
// reads the heap every second until two readings are within 0.5% (smoke
// runs: at once), for at most settleMax.
func (b *runner) settledHeap(ctx context.Context) int64 {
	h := liveHeap()
	if b.cfg.Smoke {
		return h
	}
	deadline := time.Now().Add(settleMax)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		next := liveHeap()
		if d := next - h; d < 0 && -d > h/200 || d > h/200 {
			h = next
			continue
		}
		return next
	}
	return h
}

// settleMax bounds settledHeap: past the server's 10 s cache expiry.
const settleMax = 15 * time.Second

// liveHeap returns the live heap after a full GC.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// rss returns the process's resident memory (VmRSS) after returning freed
// memory to the OS; 0 where /proc is not available.
func rss() int64 {
	debug.FreeOSMemory()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
