package app

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// wakeMetrics count wakes: no team or member names. They are served by
// the REST door's /metrics beside its own.
type wakeMetrics struct {
	wakes  prometheus.Counter
	delay  prometheus.Histogram
	queued prometheus.Gauge
}

func newWakeMetrics(reg *prometheus.Registry) *wakeMetrics {
	m := &wakeMetrics{
		wakes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mailroom_wakes_total",
			Help: "Turns the server started by itself because mail waited for a wake member.",
		}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mailroom_wake_delay_seconds",
			Help:    "Time from the letter that opened a wake to the woken turn's first model request (wake_delay_ms included).",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mailroom_wakes_queued",
			Help: "Wakes waiting for a free slot (--max-running-turns).",
		}),
	}
	reg.MustRegister(m.wakes, m.delay, m.queued)
	return m
}

// Woken implements runtime.WakeObserver.
func (m *wakeMetrics) Woken() { m.wakes.Inc() }

// WakeDelay implements runtime.WakeObserver.
func (m *wakeMetrics) WakeDelay(d time.Duration) { m.delay.Observe(d.Seconds()) }

// WakesQueued implements runtime.WakeObserver.
func (m *wakeMetrics) WakesQueued(n int) { m.queued.Set(float64(n)) }
