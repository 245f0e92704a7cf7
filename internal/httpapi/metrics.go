package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"mailroom/internal/core"
)

// metrics live on their own registry, so two handlers in one process (tests)
// never collide. Labels carry route patterns, methods, codes and status
// words only: never a team or member name.
type metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	letters    prometheus.Counter
	protocol   *prometheus.CounterVec
	events     *prometheus.CounterVec
	sseClients prometheus.Gauge
	// Model requests of turns, by provider only: never a team, a member
	// or a model name a team chose.
	modelRequests *prometheus.CounterVec
	modelTokens   *prometheus.CounterVec
	modelLatency  *prometheus.HistogramVec
}

// newMetrics registers the door's metrics on reg, or on a registry of its
// own when reg is nil.
func newMetrics(reg *prometheus.Registry) *metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailroom_http_requests_total",
			Help: "HTTP requests by method, route pattern and status code.",
		}, []string{"method", "route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mailroom_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by method and route pattern (an event stream counts until it ends).",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
		letters: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mailroom_letters_stored_total",
			Help: "Letters stored in inboxes (ordinary and protocol letters).",
		}),
		protocol: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailroom_protocol_requests_total",
			Help: "Protocol request state changes by the status they reached (pending when opened, approved or rejected when matched).",
		}, []string{"status"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailroom_events_total",
			Help: "State-change events published by type.",
		}, []string{"type"}),
		sseClients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mailroom_event_stream_clients",
			Help: "Event-stream clients connected now.",
		}),
		modelRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailroom_model_requests_total",
			Help: "Model requests of turns by provider and outcome (ok, error, canceled, timeout), after the provider SDK's retries.",
		}, []string{"provider", "outcome"}),
		modelTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailroom_model_tokens_total",
			Help: "Model tokens spent by provider and kind (input or output).",
		}, []string{"provider", "kind"}),
		modelLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mailroom_model_request_duration_seconds",
			Help:    "Time a model request took, retries included, by provider.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320},
		}, []string{"provider"}),
	}
	m.reg.MustRegister(
		m.requests, m.latency, m.letters, m.protocol, m.events, m.sseClients,
		m.modelRequests, m.modelTokens, m.modelLatency,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// observe counts a core event. It runs under a team lock: counters only.
func (m *metrics) observe(ev core.Event) {
	m.events.WithLabelValues(ev.Type).Inc()
	switch ev.Type {
	case "message":
		m.letters.Inc()
	case "request", "match":
		// request: a request was opened (pending); match: a reply was
		// matched and the request reached approved or rejected.
		if r, ok := asRequest(ev.Data); ok {
			m.protocol.WithLabelValues(r.Status).Inc()
		}
	case "turn":
		if te, ok := ev.Data.(core.TurnEvent); ok && te.Step != nil && te.Step.Kind == core.StepModelRequest {
			m.observeModelRequest(te.Provider, *te.Step)
		}
	}
}

// observeModelRequest counts one model request of a turn. The outcome is
// one of a few fixed words, so that a provider's error types (which it
// may add to at will) never grow the label set.
func (m *metrics) observeModelRequest(provider string, step core.TurnStep) {
	switch provider {
	case "anthropic", "openai", "scripted":
	default:
		provider = "other"
	}
	outcome := "ok"
	switch step.Error {
	case "":
	case "canceled", "timeout":
		outcome = step.Error
	default:
		outcome = "error"
	}
	m.modelRequests.WithLabelValues(provider, outcome).Inc()
	// A counter panics on a negative add. The adapters refuse such an
	// answer before it is recorded; a count out of range is still never
	// added, whoever recorded it.
	if step.Usage.Valid() {
		m.modelTokens.WithLabelValues(provider, "input").Add(float64(step.Usage.InputTokens))
		m.modelTokens.WithLabelValues(provider, "output").Add(float64(step.Usage.OutputTokens))
	}
	m.modelLatency.WithLabelValues(provider).Observe(float64(step.DurationMS) / 1000)
}

func asRequest(v any) (core.Request, bool) {
	switch r := v.(type) {
	case core.Request:
		return r, true
	case *core.Request:
		if r != nil {
			return *r, true
		}
	}
	return core.Request{}, false
}

// instrument records every request by its chi route pattern, which names
// the route without the team or member in it.
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := routePattern(r)
		m.requests.WithLabelValues(r.Method, route, strconv.Itoa(rec.status)).Inc()
		m.latency.WithLabelValues(r.Method, route).Observe(time.Since(start).Seconds())
	})
}

// routePattern is the matched chi pattern, or "unmatched".
func routePattern(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		if p := rc.RoutePattern(); p != "" {
			return p
		}
	}
	return "unmatched"
}

// statusRecorder remembers the status code. Unwrap lets
// http.ResponseController reach the real writer's Flush, which the event
// stream needs.
type statusRecorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wroteHeader {
		s.status, s.wroteHeader = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wroteHeader = true
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
