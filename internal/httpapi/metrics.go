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
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
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
	}
	m.reg.MustRegister(
		m.requests, m.latency, m.letters, m.protocol, m.events, m.sseClients,
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
	}
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
