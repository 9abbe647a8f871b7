package bench

import (
	"fmt"
	"net/http"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prunesched/prunesched/proxy"
)

// replayProbeEnv, when set, makes proxy-replay record where each request's
// time goes (ReplayProbe): both proxies' handlers are timed, with this
// process's garbage collections and scheduling delays during each, the
// replay peer's collections during each send, and the prunesched proxy's
// stages per request. Off by default: the timing wraps both proxies'
// handlers and adds a few microseconds to each request.
const replayProbeEnv = "PRUNESCHED_REPLAY_PROBE"

// replayAAEnv, when set, makes proxy-replay's third way a second bare
// reverse proxy instead of prunesched: an A/A comparison, whose ratios
// say how far apart two identical proxies measure in this rig (the
// sampling noise of a row's p99 over its 17-40 requests). Its rows'
// outcome counters and stages are empty.
const replayAAEnv = "PRUNESCHED_REPLAY_AA"

// replayHoldEnv, when set, makes proxy-replay's third way a reverse proxy
// that reads each request body whole (as prunesched must, to decide on
// it) before forwarding it unchanged: its ratios to the bare proxy are
// what holding the body costs in this rig, before any of prunesched's
// work. Its rows' outcome counters and stages are empty.
const replayHoldEnv = "PRUNESCHED_REPLAY_HOLD"

// probeMetrics are the runtime metrics a probe reads around each
// request.
var probeMetrics = []string{"/gc/cycles/total:gc-cycles", "/sched/pauses/total/gc:seconds", "/sched/latencies:seconds"}

// slowSched is the scheduling delay (a goroutine runnable but not
// running) counted as slow.
const slowSched = time.Millisecond

// gcSample is the runtime metrics read at one moment.
type gcSample struct {
	cycles uint64
	// pauses is the number of stop-the-world pauses for GC, pauseSecs
	// their total (from the histogram's lower bounds: at most that).
	pauses    uint64
	pauseSecs float64
	// slow is the number of scheduling delays of slowSched or more.
	slow uint64
	// inGC says a collection was under way when read: each cycle stops
	// the world twice, at its start and at its end, so between the two
	// the pauses are not twice the cycles finished.
	inGC bool
}

// readGC reads the probe's runtime metrics.
func readGC() gcSample {
	s := make([]metrics.Sample, len(probeMetrics))
	for i, n := range probeMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	var out gcSample
	if s[0].Value.Kind() == metrics.KindUint64 {
		out.cycles = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindFloat64Histogram {
		h := s[1].Value.Float64Histogram()
		for i, c := range h.Counts {
			out.pauses += c
			out.pauseSecs += float64(c) * max(0, h.Buckets[i])
		}
	}
	if s[2].Value.Kind() == metrics.KindFloat64Histogram {
		h := s[2].Value.Float64Histogram()
		for i, c := range h.Counts {
			if h.Buckets[i] >= slowSched.Seconds() {
				out.slow += c
			}
		}
	}
	out.inGC = out.pauses != 2*out.cycles
	return out
}

// sub is s - before.
func (s gcSample) sub(before gcSample) gcSample {
	return gcSample{cycles: s.cycles - before.cycles, pauses: s.pauses - before.pauses, pauseSecs: s.pauseSecs - before.pauseSecs, slow: s.slow - before.slow}
}

// handlerRec is one request as a proxy's handler saw it.
type handlerRec struct {
	// handler is the handler's wall time minus the upstream's think.
	handler time.Duration
	gc      gcSample
	// gcAtStart says a collection was under way when the handler began.
	gcAtStart bool
}

// probe records each request's handler time and runtime metrics, by way
// (1 bare, 2 prunesched) and turn key.
type probe struct {
	// inflight counts the handlers still running: a client has its whole
	// answer before the handler records it.
	inflight sync.WaitGroup
	mu       sync.Mutex
	recs     map[string]handlerRec
	// stages is, per turn index, the prunesched proxy's stage times (ms,
	// exact: the histograms' sums over the turn), taken when the rig
	// settles after the turn.
	stages []map[string]float64
}

func newProbe() *probe { return &probe{recs: map[string]handlerRec{}} }

func probeKey(way int, turn string) string { return strconv.Itoa(way) + " " + turn }

// wrap times h's requests as way.
func (p *probe) wrap(way int, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.inflight.Add(1)
		defer p.inflight.Done()
		g0, t0 := readGC(), time.Now()
		h.ServeHTTP(&probeWriter{ResponseWriter: w}, r)
		el, g := time.Since(t0), readGC().sub(g0)
		// The upstream's think, from its answer's timing header.
		if recv, answer, ok := parseAt(w.Header().Get(atHeader)); ok {
			el -= answer - recv
		}
		p.mu.Lock()
		p.recs[probeKey(way, r.Header.Get(turnHeader))] = handlerRec{handler: el, gc: g, gcAtStart: g0.inGC}
		p.mu.Unlock()
	})
}

// probeWriter passes everything to the ResponseWriter it wraps; Unwrap
// lets http.ResponseController reach it (full duplex).
type probeWriter struct{ http.ResponseWriter }

func (w *probeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *probeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// settled records the stages of the turn just settled: the observations
// since before, which are the one prunesched request's of the turn.
func (p *probe) settled(now, before stageHist) {
	st := map[string]float64{}
	for stage, h := range now {
		if n := h.count - before[stage].count; n > 0 {
			st[stage] = (h.sum - before[stage].sum) * 1e3
		}
	}
	p.mu.Lock()
	p.stages = append(p.stages, st)
	p.mu.Unlock()
}

// ProbedRequest is one request of a row through one proxy, timed by the
// probe (Config: PRUNESCHED_REPLAY_PROBE). Times in ms.
type ProbedRequest struct {
	Turn int `json:"turn"`
	// Added is the request's added time (through the proxy minus direct);
	// Direct the same turn's direct time.
	Added  float64 `json:"added_ms"`
	Direct float64 `json:"direct_ms"`
	// Handler is the proxy's handler's wall time minus the upstream's
	// think; Outside the client's time outside it (the request's headers
	// reaching the handler, the answer's last bytes leaving it).
	Handler float64 `json:"handler_ms"`
	Outside float64 `json:"outside_ms"`
	// BeforeForward is prunesched's "added" stage (the body read to the
	// decision made); AfterResponse its record and log stages (off the
	// client's path). Zero for the bare proxy.
	BeforeForward float64 `json:"before_forward_ms,omitempty"`
	AfterResponse float64 `json:"after_response_ms,omitempty"`
	// GCCycles, GCPauses and SlowSched are the bench process's collections
	// finished, stop-the-world pauses, and scheduling delays of 1 ms or
	// more during the handler; PeerGC the replay peer's collections during
	// the send.
	// GCAtStart says a collection was under way when the handler began.
	GCAtStart bool   `json:"gc_at_start,omitempty"`
	GCCycles  uint64 `json:"gc_cycles,omitempty"`
	GCPauses  uint64 `json:"gc_pauses,omitempty"`
	SlowSched uint64 `json:"slow_sched,omitempty"`
	PeerGC    uint64 `json:"peer_gc,omitempty"`
	// Way is b (the bare proxy) or p (prunesched, or in an A/A run the
	// second bare proxy); Order the turn's order of ways, d being direct.
	Way   string `json:"way"`
	Order string `json:"order"`
}

// ReplayProbe is one row's probed requests: each proxy's slowest (the one
// that sets the row's p99 over up to 50 requests) and all of them.
type ReplayProbe struct {
	Bare []ProbedRequest `json:"bare"`
	Via  []ProbedRequest `json:"via"`
}

// probed joins a row's client timings with the probe's records. sent is
// each turn's legs by way; peerGC the peer's collections per turn and
// way (nil when it did not count them).
func (p *probe) probed(turnKey func(int) string, sent [][3]legs, peerGC [][3]uint64) *ReplayProbe {
	p.inflight.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := &ReplayProbe{}
	for i, d := range sent {
		for _, way := range []int{1, 2} {
			rec := p.recs[probeKey(way, turnKey(i))]
			q := ProbedRequest{
				Turn: i, Added: ms(d[way].total() - d[0].total()), Direct: ms(d[0].total()),
				Handler: ms(rec.handler), Outside: ms(d[way].total() - rec.handler),
				GCAtStart: rec.gcAtStart, GCCycles: rec.gc.cycles, GCPauses: rec.gc.pauses, SlowSched: rec.gc.slow,
				Way: string("dbp"[way]), Order: turnOrder(i),
			}
			if i < len(peerGC) {
				q.PeerGC = peerGC[i][way]
			}
			if way == 2 && i < len(p.stages) {
				st := p.stages[i]
				q.BeforeForward = st["added"]
				q.AfterResponse = st[proxy.StageRecord] + st[proxy.StageLog]
			}
			if way == 1 {
				out.Bare = append(out.Bare, q)
			} else {
				out.Via = append(out.Via, q)
			}
		}
	}
	return out
}

// turnOrder is turn i's order of ways (peer.run rotates it): d direct,
// b bare, p prunesched.
func turnOrder(i int) string {
	var b strings.Builder
	for k := range 3 {
		b.WriteByte("dbp"[(i+k)%3])
	}
	return b.String()
}

// ProbeClass is the mean of a class of probed requests (times in ms) and
// the share of them with a collection or a slow scheduling delay in the
// bench process, or a collection in the peer.
type ProbeClass struct {
	Requests      int     `json:"requests"`
	Added         float64 `json:"added_ms"`
	Direct        float64 `json:"direct_ms"`
	Handler       float64 `json:"handler_ms"`
	Outside       float64 `json:"outside_ms"`
	BeforeForward float64 `json:"before_forward_ms"`
	AfterResponse float64 `json:"after_response_ms"`
	// WithGC is the share with a collection under way at the handler's
	// start, or starting or ending during it (one that starts before
	// and ends after without either is not seen); WithGCAtStart those
	// with one under way at its start.
	WithGC        float64 `json:"with_gc"`
	WithGCAtStart float64 `json:"with_gc_at_start"`
	WithSlowSched float64 `json:"with_slow_sched"`
	WithPeerGC    float64 `json:"with_peer_gc"`
	// AfterVia is the share sent after the turn's prunesched request
	// (for prunesched itself: none); DirectAfterVia the share whose turn's
	// direct request came after the prunesched one.
	AfterVia       float64 `json:"after_via"`
	DirectAfterVia float64 `json:"direct_after_via"`
}

// ProbeSummary is the probed requests of the real sequences by class:
// every request, and each row's slowest, through each proxy.
type ProbeSummary struct {
	BareAll     ProbeClass `json:"bare_all"`
	BareSlowest ProbeClass `json:"bare_slowest"`
	ViaAll      ProbeClass `json:"via_all"`
	ViaSlowest  ProbeClass `json:"via_slowest"`
	// ViaSlowestOver is the slowest requests of the rows whose p99 ratio passed
	// GoalReplayRatioP99.
	ViaSlowestOver ProbeClass `json:"via_slowest_over_goal"`
}

func classOf(qs []ProbedRequest) ProbeClass {
	c := ProbeClass{Requests: len(qs)}
	if len(qs) == 0 {
		return c
	}
	n := float64(len(qs))
	share := func(b bool) float64 {
		if b {
			return 1 / n
		}
		return 0
	}
	for _, q := range qs {
		c.Added += q.Added / n
		c.Direct += q.Direct / n
		c.Handler += q.Handler / n
		c.Outside += q.Outside / n
		c.BeforeForward += q.BeforeForward / n
		c.AfterResponse += q.AfterResponse / n
		c.WithGC += share(q.GCCycles > 0 || q.GCPauses > 0 || q.GCAtStart)
		c.WithGCAtStart += share(q.GCAtStart)
		c.WithSlowSched += share(q.SlowSched > 0)
		c.WithPeerGC += share(q.PeerGC > 0)
		way := strings.IndexByte(q.Order, q.Way[0])
		via := strings.IndexByte(q.Order, 'p')
		c.AfterVia += share(way > via)
		c.DirectAfterVia += share(strings.IndexByte(q.Order, 'd') > via)
	}
	return c
}

// slowest is the request of qs with the largest added time.
func slowest(qs []ProbedRequest) []ProbedRequest {
	if len(qs) == 0 {
		return nil
	}
	return []ProbedRequest{slices.MaxFunc(qs, func(a, b ProbedRequest) int {
		switch {
		case a.Added < b.Added:
			return -1
		case a.Added > b.Added:
			return 1
		}
		return 0
	})}
}

// summarizeProbe classes the real rows' probed requests.
func summarizeProbe(rows []ReplayRow) *ProbeSummary {
	var bareAll, bareSlow, viaAll, viaSlow, viaOver []ProbedRequest
	for _, r := range rows {
		if r.Probe == nil || r.NewOutputKiB > 0 {
			continue
		}
		bareAll, viaAll = append(bareAll, r.Probe.Bare...), append(viaAll, r.Probe.Via...)
		bareSlow, viaSlow = append(bareSlow, slowest(r.Probe.Bare)...), append(viaSlow, slowest(r.Probe.Via)...)
		if r.RatioP99 > GoalReplayRatioP99 {
			viaOver = append(viaOver, slowest(r.Probe.Via)...)
		}
	}
	if len(viaAll) == 0 {
		return nil
	}
	return &ProbeSummary{BareAll: classOf(bareAll), BareSlowest: classOf(bareSlow), ViaAll: classOf(viaAll), ViaSlowest: classOf(viaSlow), ViaSlowestOver: classOf(viaOver)}
}

// String is the summary's progress line.
func (c ProbeClass) String() string {
	return fmt.Sprintf("%d requests: added %.2f ms (direct %.2f), handler %.2f, outside %.2f, before forwarding %.2f, after response %.2f; with a GC %.0f%% (under way at its start %.0f%%), a scheduling delay >= 1 ms %.0f%%, a peer GC %.0f%%; after the prunesched request %.0f%%, direct after it %.0f%%",
		c.Requests, c.Added, c.Direct, c.Handler, c.Outside, c.BeforeForward, c.AfterResponse, 100*c.WithGC, 100*c.WithGCAtStart, 100*c.WithSlowSched, 100*c.WithPeerGC, 100*c.AfterVia, 100*c.DirectAfterVia)
}

// envSet says whether the environment variable k is set and not empty.
func envSet(k string) bool { return os.Getenv(k) != "" }
