package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Fail-open stages: where inside prunesched a request gave up and went
// upstream unchanged. They are the values of the stage label of
// prunesched_proxy_fail_open_total.
const (
	StageRead             = "read"              // reading the client's body
	StageDecode           = "decode"            // content-encoding the proxy cannot read (zstd, br)
	StageParse            = "parse"             // the body is not the API's request shape
	StageLoad             = "load"              // loading the session's known items from the log
	StageAppend           = "append"            // appending the new facts
	StageDecide           = "decide"            // the live scheduler decision
	StageRender           = "render"            // splicing placeholders into the request
	StageTimeout          = "timeout"           // the time budget ran out
	StagePanic            = "panic"             // a bug: recovered
	StageUpstreamRejected = "upstream_rejected" // upstream answered 400 to the rewritten body; the original was resent
)

// StageRecord is the stage label of prunesched_proxy_stage_seconds for
// recording a response (its model request and the assistant's content).
// It runs after the response, off the client's path.
const StageRecord = "record"

// StageLog is the stage label of prunesched_proxy_stage_seconds for a
// request's log write after forwarding when the proxy decides in memory:
// its facts appended and its decision checked against the pipeline's
// decision from the log. It runs off the client's path.
const StageLog = "log"

// LatencyStages are the stages prunesched_proxy_stage_seconds observes, in
// the order a request meets them: read (the client's body), parse (text
// check and parse), load (picking the session and taking its lock, which
// waits for a previous record of the session still running, and the first
// time loading its items from the log), append (the request's new facts,
// token-counted), decide (the live decision and the projection catching up
// with it), render (splicing placeholders), and record (after the
// response).
var LatencyStages = []string{StageRead, StageParse, StageLoad, StageAppend, StageDecide, StageRender, StageRecord, StageLog}

// Metrics are the proxy's Prometheus metrics. Session and tenant ids are
// never labels. A nil *Metrics records nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	failOpen *prometheus.CounterVec
	added    *prometheus.HistogramVec
	stages   *prometheus.HistogramVec
	replaced *prometheus.CounterVec
	record   prometheus.Counter
	recordTO prometheus.Counter
	upstream *prometheus.CounterVec
	breakpts prometheus.Counter
	agent    *prometheus.CounterVec
	recovers *prometheus.CounterVec
	sessions prometheus.Counter
	diverge  prometheus.Counter
	loads    prometheus.Counter
	fleet    *fleetMetrics
}

// NewMetrics registers the proxy metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prunesched_proxy_requests_total",
			Help: "Model requests through the proxy, by API and outcome (rendered, passthrough, fail_open).",
		}, []string{"api", "outcome"}),
		failOpen: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prunesched_proxy_fail_open_total",
			Help: "Requests sent upstream unchanged because a prunesched stage failed, by stage.",
		}, []string{"stage"}),
		added: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "prunesched_proxy_added_seconds",
			Help:    "Time the proxy spent on a request before forwarding it (decode, append, decide, render).",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 12),
			// Also a native histogram (buckets within 10% of each
			// other): the classic buckets double, so a p99 read from them
			// is only known within a factor of two (the fleet bench's
			// goal of 10 ms falls inside its 6.4-12.8 ms bucket).
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  160,
			NativeHistogramMinResetDuration: time.Hour,
		}, []string{"api"}),
		stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    StageSecondsMetric,
			Help:    "Time each proxy stage took, by API and stage (read, parse, load, append, decide, render before forwarding; record after the response).",
			Buckets: prometheus.ExponentialBucketsRange(0.00002, 2, 24),
		}, []string{"api", "stage"}),
		replaced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prunesched_proxy_blocks_replaced_total",
			Help: "Request blocks whose payload the proxy replaced with a placeholder, by part (output, input, text).",
		}, []string{"part"}),
		record: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prunesched_proxy_record_failures_total",
			Help: "Responses whose model request or assistant content could not be appended to the log.",
		}),
		recordTO: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prunesched_proxy_record_timeouts_total",
			Help: "Responses whose record did not finish within the record timeout: the response was released to the client and the record failed.",
		}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prunesched_proxy_upstream_errors_total",
			Help: "Upstream failures by kind: 5xx (answered, passed on verbatim), timeout (no response headers within the timeout), unreachable (no answer), stream (the body broke off). A client's own cancel is not counted.",
		}, []string{"kind"}),
		breakpts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prunesched_proxy_cache_breakpoints_added_total",
			Help: "cache_control breakpoints the proxy added before a newly pruned block.",
		}),
	}
	m.agent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "prunesched_proxy_agent_requests_total",
		Help: "Handles the model asked to remove with context_prune, by outcome (accepted, refused, invalid) and reason (AGENT_REQUEST or the rule's reason when accepted, the protection when refused; not_found, garbled, already_removed, not_removable, too_many when invalid).",
	}, []string{"outcome", "reason"})
	m.recovers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "prunesched_proxy_recoveries_total",
		Help: "context_recover calls, by outcome (recovered: the original appended; not_found; invalid). Recoveries per session climbing means pruning is too aggressive.",
	}, []string{"outcome"})
	m.sessions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "prunesched_proxy_sessions_total",
		Help: "Sessions the proxy started (their first request): the denominator of recoveries per session.",
	})
	m.diverge = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "prunesched_proxy_decision_divergences_total",
		Help: "Requests decided in memory whose application differs from the one the pipeline decided from the log (should stay 0; the session's in-memory state is then rebuilt from the log).",
	})
	m.loads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "prunesched_proxy_session_loads_total",
		Help: "Sessions whose in-memory state the proxy built from the log: a session's first request, after an idle eviction, and after its state went stale (a failed write, a decision not sent, a divergence, facts another writer appended).",
	})
	reg.MustRegister(m.requests, m.failOpen, m.added, m.stages, m.replaced, m.record, m.recordTO, m.upstream, m.breakpts, m.agent, m.recovers, m.sessions, m.diverge, m.loads)
	m.fleet = newFleetMetrics(reg)
	return m
}

func (m *Metrics) request(api API, outcome string) {
	if m != nil {
		m.requests.WithLabelValues(string(api), outcome).Inc()
	}
}

func (m *Metrics) failedOpen(stage string) {
	if m != nil {
		m.failOpen.WithLabelValues(stage).Inc()
	}
}

func (m *Metrics) addedLatency(api API, s float64) {
	if m != nil {
		m.added.WithLabelValues(string(api)).Observe(s)
	}
}

// StageSecondsMetric is the name of the per-stage latency histogram.
const StageSecondsMetric = "prunesched_proxy_stage_seconds"

// stage observes the time since start spent in stage and returns the time
// the observation was taken, where the next stage starts.
func (m *Metrics) stage(api API, stage string, start time.Time) time.Time {
	now := time.Now()
	m.observeStage(api, stage, now.Sub(start))
	return now
}

// observeStage observes d spent in stage (a stage timed in parts).
func (m *Metrics) observeStage(api API, stage string, d time.Duration) {
	if m != nil {
		m.stages.WithLabelValues(string(api), stage).Observe(d.Seconds())
	}
}

func (m *Metrics) replacedBlock(part string) {
	if m != nil {
		m.replaced.WithLabelValues(part).Inc()
	}
}

func (m *Metrics) recordFailure() {
	if m != nil {
		m.record.Inc()
	}
}

func (m *Metrics) sessionLoaded() {
	if m != nil {
		m.loads.Inc()
	}
}

func (m *Metrics) diverged() {
	if m != nil {
		m.diverge.Inc()
	}
}

func (m *Metrics) recordTimeout() {
	if m != nil {
		m.recordTO.Inc()
	}
}

// Kinds of upstream errors: the kind label of
// prunesched_proxy_upstream_errors_total.
const (
	UpstreamKind5xx         = "5xx"         // the upstream answered 5xx (passed on verbatim)
	UpstreamKindTimeout     = "timeout"     // no response headers within the response-header timeout
	UpstreamKindUnreachable = "unreachable" // no answer (connection refused, reset, DNS)
	UpstreamKindStream      = "stream"      // the response body broke off before its end
	UpstreamKindIdle        = "idle"        // the response body sent nothing for the stream idle timeout
)

func (m *Metrics) upstreamError(kind string) {
	if m != nil {
		m.upstream.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) breakpointAdded() {
	if m != nil {
		m.breakpts.Inc()
	}
}

func (m *Metrics) agentRequest(outcome, reason string) {
	if m != nil {
		m.agent.WithLabelValues(outcome, reason).Inc()
	}
}

func (m *Metrics) recovery(outcome string) {
	if m != nil {
		m.recovers.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) sessionStarted() {
	if m != nil {
		m.sessions.Inc()
	}
}
