package pipeline

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prunesched/prunesched/events"
)

// Metrics are the pipeline's Prometheus metrics, registered on an injected
// registry. Session and tenant ids are never labels. A nil *Metrics is valid
// and records nothing.
type Metrics struct {
	decisions    *prometheus.CounterVec
	applications *prometheus.CounterVec
	removed      prometheus.Counter
	placeholder  prometheus.Counter
	latency      *prometheus.HistogramVec
	decodeErrors *prometheus.CounterVec
	conflicts    prometheus.Counter
}

// NewMetrics registers the pipeline metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prunesched_decisions_total",
			Help: "Eligibility marks published, by decision, rung and reason code.",
		}, []string{"decision", "rung", "reason"}),
		applications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prunesched_applications_total",
			Help: "Applications published by the timing scheduler, by trigger.",
		}, []string{"trigger"}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prunesched_tokens_removed_total",
			Help: "Tokens removed from rendered bundles by applications.",
		}),
		placeholder: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prunesched_placeholder_tokens_total",
			Help: "Placeholder tokens added to rendered bundles by applications.",
		}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "prunesched_worker_processing_seconds",
			Help:    "Time a worker spends on one event.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9),
		}, []string{"worker"}),
		decodeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prunesched_decode_errors_total",
			Help: "Events that could not be decoded, by component.",
		}, []string{"component"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "prunesched_application_conflicts_total",
			Help: "Guarded applications rejected because a fact landed concurrently (retried).",
		}),
	}
	reg.MustRegister(m.decisions, m.applications, m.removed, m.placeholder, m.latency, m.decodeErrors, m.conflicts)
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

func (m *Metrics) application(ev events.Event) {
	if m == nil {
		return
	}
	if a, ok := ev.Data.(*events.Application); ok {
		m.applications.WithLabelValues(string(a.Trigger)).Inc()
		m.removed.Add(float64(a.TokensRemoved))
		m.placeholder.Add(float64(a.PlaceholderTokens))
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

func (m *Metrics) conflict() {
	if m != nil {
		m.conflicts.Inc()
	}
}
