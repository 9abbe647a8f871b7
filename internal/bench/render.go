package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/events/store"
	"github.com/prunesched/prunesched/projections"
)

// render measures the render-at-request path for sessions of 200, 2,000
// and 20,000 items, as the HTTP API's render does it: the scheduler's live
// decision (publishing the application when one applies), the projection
// catching up with it, the bundle and the Anthropic rendering with tool
// outputs fetched by content address. Before each timed request one more
// round of facts is appended and the pipeline caught up (not timed); after
// it the request's model_request fact is appended, as an adapter does.
func (b *runner) render(ctx context.Context) error {
	r, err := b.startLog(ctx, false)
	if err != nil {
		return err
	}
	defer r.close()
	p, stop, err := b.startPipeline(r)
	if err != nil {
		return err
	}
	defer stop()
	requests := b.pick(200, 20)
	b.res.RenderRequests = requests
	for _, size := range []int{b.size(200), b.size(2000), b.size(20000)} {
		session := fmt.Sprintf("render%d", size)
		evs := b.w.session("", session, size)
		for rest := evs; len(rest) > 0; {
			n := min(500, len(rest))
			if err := appendEvents(ctx, r.st, rest[:n]); err != nil {
				return fmt.Errorf("render: append: %w", err)
			}
			rest = rest[n:]
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		err := p.WaitSession(wctx, "", session)
		cancel()
		if err != nil {
			return fmt.Errorf("render: %w", err)
		}
		at := evs[len(evs)-1].Time
		seq := 0
		var ds []time.Duration
		var buf []byte // reused across requests, as the API's pool does
		for i := range requests {
			if err := ctx.Err(); err != nil {
				return err
			}
			round := b.w.round("", session, i, seq, at)
			seq += len(round)
			at = round[len(round)-1].Time.Add(30 * time.Second)
			if err := appendEvents(ctx, r.st, round); err != nil {
				return fmt.Errorf("render: append: %w", err)
			}
			if err := p.WaitSession(ctx, "", session); err != nil {
				return fmt.Errorf("render: %w", err)
			}
			req := "req-" + strconv.Itoa(i)
			t := time.Now()
			out, err := renderAtRequest(ctx, buf[:0], r.st, p.Scheduler, p.Projection, session, at, req)
			d := time.Since(t)
			if err != nil {
				return fmt.Errorf("render %d items: %w", size, err)
			}
			if len(out) == 0 {
				return fmt.Errorf("render %d items: empty body", size)
			}
			buf = out
			ds = append(ds, d)
			seq++
			mr := events.New(fmt.Sprintf("%s-x%06d", session, seq), "", session, at, &events.ModelRequest{Request: req, Provider: "anthropic", Model: "claude-sonnet-4-5"})
			if err := appendEvents(ctx, r.st, []events.Event{mr}); err != nil {
				return fmt.Errorf("render: append request: %w", err)
			}
		}
		p50, p99 := percentiles(ds)
		k := strconv.Itoa(size)
		b.res.RenderP50Ms[k], b.res.RenderP99Ms[k] = ms(p50), ms(p99)
		b.progress("render: %d items: p50 %.2f ms, p99 %.2f ms (%d requests)", size, ms(p50), ms(p99), requests)
	}
	return nil
}

// liveDecider and projector are the pipeline parts the render path uses.
type liveDecider interface {
	DecideLive(ctx context.Context, tenant, session string, at time.Time, req string) (*events.Event, error)
}

type projector interface {
	WaitSeq(ctx context.Context, seq uint64) error
	View(tenant, session string, fn func(*projections.Session)) bool
}

// renderAtRequest is the API's render path without HTTP, rendering into
// buf (reused across requests, as the API does).
func renderAtRequest(ctx context.Context, buf []byte, st *store.Store, sched liveDecider, proj projector, session string, at time.Time, req string) ([]byte, error) {
	app, err := sched.DecideLive(ctx, events.DefaultTenant, session, at, req)
	if err != nil {
		return nil, err
	}
	if app != nil {
		if err := proj.WaitSeq(ctx, app.Seq); err != nil {
			return nil, err
		}
	}
	var snap projections.Snapshot
	if !proj.View(events.DefaultTenant, session, func(s *projections.Session) { snap = s.Snapshot() }) {
		return nil, fmt.Errorf("session %s not projected", session)
	}
	return snap.AppendAnthropic(ctx, buf, st)
}

// durability compares store appends on a server fsyncing every write
// (SyncAlways) with the default (fsync every 2 minutes), for single events
// and batches of 100: the cost of the durability setting.
func (b *runner) durability(ctx context.Context) error {
	rates := map[bool]map[int]float64{}
	for _, syncAlways := range []bool{false, true} {
		r, err := b.startLog(ctx, syncAlways)
		if err != nil {
			return err
		}
		rates[syncAlways] = map[int]float64{}
		evs := b.w.session("", fmt.Sprintf("sync%v", syncAlways), b.pick(4000, 600))
		for _, batch := range []int{1, 100} {
			n := len(evs) / 2
			if batch == 1 {
				n = b.pick(1000, 200)
			}
			part := evs[:n]
			evs = evs[n:]
			t := time.Now()
			for rest := part; len(rest) > 0; {
				k := min(batch, len(rest))
				if err := appendEvents(ctx, r.st, rest[:k]); err != nil {
					r.close()
					return fmt.Errorf("durability append: %w", err)
				}
				rest = rest[k:]
			}
			rates[syncAlways][batch] = float64(n) / time.Since(t).Seconds()
		}
		r.close()
	}
	for _, batch := range []int{1, 100} {
		row := SyncRow{Batch: batch, DefaultPerS: rates[false][batch], SyncAlwaysPerS: rates[true][batch]}
		row.Ratio = row.SyncAlwaysPerS / row.DefaultPerS
		b.res.SyncAlways = append(b.res.SyncAlways, row)
		b.progress("durability: batch %d: default %.0f/s, sync_always %.0f/s (x%.2f)", batch, row.DefaultPerS, row.SyncAlwaysPerS, row.Ratio)
	}
	return nil
}

// proxy measures the latency the proxy adds per request at 200 and 2,000
// items (MeasureOverheadDetail: its own log, pipeline and an instant
// upstream).
func (b *runner) proxy(ctx context.Context) error {
	for _, items := range []int{b.size(200), b.size(2000)} {
		o, err := MeasureOverheadDetail(ctx, items, b.pick(200, 20))
		if err != nil {
			return err
		}
		k := strconv.Itoa(items)
		b.res.ProxyP50Ms[k], b.res.ProxyP99Ms[k] = ms(o.AddedP50), ms(o.AddedP99)
		b.progress("proxy: %d items: added p50 %.2f ms, p99 %.2f ms (%d requests)", items, ms(o.AddedP50), ms(o.AddedP99), o.Requests)
	}
	return nil
}
