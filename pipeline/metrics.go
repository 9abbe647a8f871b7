package pipeline

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prunesched/prunesched/events"
)

// Metric names, exported so the dashboard and alert rules can be checked
// against the registry (see deploy/).
const (
	MetricDecisions            = "prunesched_decisions_total"
	MetricApplications         = "prunesched_applications_total"
	MetricTokensRemoved        = "prunesched_tokens_removed_total"
	MetricPlaceholderTokens    = "prunesched_placeholder_tokens_total"
	MetricMarksDeferred        = "prunesched_marks_deferred"
	MetricOldestDeferred       = "prunesched_marks_deferred_oldest_age_seconds"
	MetricMutationRadius       = "prunesched_mutation_radius_tokens"
	MetricFirstDivergence      = "prunesched_first_divergence_tokens"
	MetricCacheCost            = "prunesched_cache_cost_usd_total"
	MetricEstimatedSavings     = "prunesched_estimated_savings_usd_total"
	MetricProcessingSeconds    = "prunesched_worker_processing_seconds"
	MetricConsumerLag          = "prunesched_consumer_lag_messages"
	MetricDecodeErrors         = "prunesched_decode_errors_total"
	MetricValidationErrors     = "prunesched_validation_errors_total"
	MetricApplicationConflicts = "prunesched_application_conflicts_total"
)

// Metrics are the pipeline's Prometheus metrics, registered on an injected
// registry. Session and tenant ids are never labels: every label has a
// small fixed set of values (decision, rung, reason code, trigger, worker,
// partition, component). A nil *Metrics is valid and records nothing.
//
// In a fleet every process exports the metrics of what it did: sum the
// counters over instances; the lag gauges are reported by every process
// consuming a partition (take max by worker and partition).
type Metrics struct {
	decisions        *prometheus.CounterVec
	applications     *prometheus.CounterVec
	removed          prometheus.Counter
	placeholder      prometheus.Counter
	deferred         prometheus.Gauge
	oldestDeferred   prometheus.Gauge
	radius           prometheus.Histogram
	divergence       prometheus.Histogram
	cacheCost        prometheus.Counter
	savings          prometheus.Counter
	latency          *prometheus.HistogramVec
	lag              *prometheus.GaugeVec
	decodeErrors     *prometheus.CounterVec
	validationErrors *prometheus.CounterVec
	conflicts        prometheus.Counter
}

// Components that report decode and validation errors.
var errorComponents = []string{"eligibility", "scheduler", "projection", "api"}

// tokenBuckets spans a few hundred tokens to a million (context sizes).
var tokenBuckets = prometheus.ExponentialBuckets(256, 2, 13)

// NewMetrics registers the pipeline metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricDecisions,
			Help: "Eligibility marks published, by decision, rung and reason code.",
		}, []string{"decision", "rung", "reason"}),
		applications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricApplications,
			Help: "Applications published by the timing scheduler, by trigger.",
		}, []string{"trigger"}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricTokensRemoved,
			Help: "Tokens removed from rendered bundles by applications (net of placeholders), at exact counts where the facts record them.",
		}),
		placeholder: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricPlaceholderTokens,
			Help: "Placeholder tokens added to rendered bundles by applications.",
		}),
		deferred: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricMarksDeferred,
			Help: "Marks the scheduler cores of this process hold back (pending application), across sessions.",
		}),
		oldestDeferred: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricOldestDeferred,
			Help: "Age of the oldest pending mark in event time: the latest event time seen minus the mark's time.",
		}),
		radius: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricMutationRadius,
			Help:    "Mutation radius of applications: cached tokens after the first divergence.",
			Buckets: append([]float64{0}, tokenBuckets...),
		}),
		divergence: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricFirstDivergence,
			Help:    "First divergence of applications: token offset of the first change.",
			Buckets: append([]float64{0}, tokenBuckets...),
		}),
		cacheCost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricCacheCost,
			Help: "Priced prompt-cache cost of applications (cache break), USD.",
		}),
		savings: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricEstimatedSavings,
			Help: "Estimated savings of applications over the policy horizon, USD.",
		}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricProcessingSeconds,
			Help:    "Time a worker spends on one event.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9),
		}, []string{"worker"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricConsumerLag,
			Help: "Events a worker's consumer has not finished: NumPending + NumAckPending (projection: stream last sequence minus applied), polled.",
		}, []string{"worker", "partition"}),
		decodeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricDecodeErrors,
			Help: "Events that could not be decoded, by component.",
		}, []string{"component"}),
		validationErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricValidationErrors,
			Help: "Events rejected by validation, by component.",
		}, []string{"component"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricApplicationConflicts,
			Help: "Guarded applications rejected because a fact landed concurrently (retried).",
		}),
	}
	reg.MustRegister(m.decisions, m.applications, m.removed, m.placeholder, m.deferred, m.oldestDeferred,
		m.radius, m.divergence, m.cacheCost, m.savings, m.latency, m.lag, m.decodeErrors, m.validationErrors, m.conflicts)
	// Initialise the error series at zero so increase() sees the first one
	// and dashboards show 0 rather than no data.
	for _, c := range errorComponents {
		m.decodeErrors.WithLabelValues(c)
		m.validationErrors.WithLabelValues(c)
	}
	for _, w := range []string{"eligibility", "scheduler", "projection"} {
		m.latency.WithLabelValues(w)
	}
	for _, t := range events.Triggers {
		m.applications.WithLabelValues(string(t))
	}
	return m
}

func (m *Metrics) mark(ev events.Event) {
	if m == nil {
		return
	}
	if mk, ok := ev.Data.(*events.Mark); ok {
		m.decisions.WithLabelValues(string(mk.Decision), string(mk.Rung), string(mk.Reason)).Inc()
	}
}

// application counts an application; removed is its tokens removed as
// the economics price them (scheduler.Core.PricedRemoved).
func (m *Metrics) application(ev events.Event, removed int) {
	if m == nil {
		return
	}
	if a, ok := ev.Data.(*events.Application); ok {
		m.applications.WithLabelValues(string(a.Trigger)).Inc()
		m.removed.Add(float64(max(0, removed)))
		m.placeholder.Add(float64(max(0, a.PlaceholderTokens)))
		m.radius.Observe(float64(a.MutationRadius))
		m.divergence.Observe(float64(a.FirstDivergence))
		m.cacheCost.Add(max(0, a.CacheCost))
		m.savings.Add(max(0, a.ExpectedSaving))
	}
}

func (m *Metrics) observeLatency(worker string) func() {
	if m == nil {
		return func() {}
	}
	start := time.Now()
	return func() { m.latency.WithLabelValues(worker).Observe(time.Since(start).Seconds()) }
}

func (m *Metrics) decodeError(component string) {
	if m != nil {
		m.decodeErrors.WithLabelValues(component).Inc()
	}
}

// DecodeError counts an event that could not be decoded by component.
func (m *Metrics) DecodeError(component string) { m.decodeError(component) }

// ValidationError counts an event rejected by validation in component
// (e.g. "api" for a bad event sent by an adapter).
func (m *Metrics) ValidationError(component string) {
	if m != nil {
		m.validationErrors.WithLabelValues(component).Inc()
	}
}

// validationErrorOf counts err as a validation error of component when it
// is one (an event field failed validation).
func (m *Metrics) validationErrorOf(component string, err error) {
	var fe *events.FieldError
	if m != nil && errors.As(err, &fe) {
		m.validationErrors.WithLabelValues(component).Inc()
	}
}

func (m *Metrics) setDeferred(n int, oldestAge float64) {
	if m != nil {
		m.deferred.Set(float64(n))
		m.oldestDeferred.Set(oldestAge)
	}
}

func (m *Metrics) setLag(worker, partition string, lag float64) {
	if m != nil {
		m.lag.WithLabelValues(worker, partition).Set(lag)
	}
}

func (m *Metrics) conflict() {
	if m != nil {
		m.conflicts.Inc()
	}
}
