package httpapi

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"mailroom/internal/agent"
	"mailroom/internal/core"
)

// Members woken on mail: the member PATCH, the members' own models, the
// builder of a woken turn that core's waker runs (core/wake.go), and the
// wake metrics.

// UpdateMember changes a member's wake and model (admin only).
func (s *Server) UpdateMember(ctx context.Context, req UpdateMemberRequestObject) (UpdateMemberResponseObject, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	var upd core.MemberUpdate
	if req.Body != nil {
		upd.Wake = req.Body.Wake
		upd.Skills = (*[]string)(req.Body.Skills)
		if req.Body.Model != nil {
			cfg := modelConfigFrom(req.Body.Model)
			if err := cfg.Validate(); err != nil {
				return nil, err
			}
			upd.Model = coreModelOf(cfg)
		}
	}
	m, err := s.svc.UpdateMember(ctx, req.Team, req.Member, upd)
	if err != nil {
		return nil, err
	}
	return UpdateMember200JSONResponse(memberOf(m)), nil
}

// checkMemberModels validates the members' own models of a team being
// created, as the team's is.
func checkMemberModels(spec core.TeamSpec) error {
	for _, m := range spec.Members {
		if m.Model == nil {
			continue
		}
		if err := agentModelOf(*m.Model).Validate(); err != nil {
			return err
		}
	}
	return nil
}

func coreModelOf(cfg agent.ModelConfig) *core.ModelSettings {
	return &core.ModelSettings{Provider: cfg.Provider, Name: cfg.Name, MaxTokens: cfg.MaxTokens}
}

// agentModelOf is the inverse of coreModelOf.
func agentModelOf(m core.ModelSettings) agent.ModelConfig {
	return agent.ModelConfig{Provider: m.Provider, Name: m.Name, MaxTokens: m.MaxTokens}
}

// memberModel is the model member's turns use: its own, else the team's.
func memberModel(view core.TeamView, member string) agent.ModelConfig {
	model := view.Model
	for _, m := range view.Members {
		if m.Name == member && m.Model != nil {
			model = *m.Model
		}
	}
	return agentModelOf(model)
}

// wakeTurn builds a woken turn of member: no prompt (the loop attaches the
// unattended letters before its first model request), the member's model
// and the tools a requested turn gets.
func (s *Server) wakeTurn(ctx context.Context, team, member string) (core.ModelRef, core.TurnFunc, error) {
	view, err := s.svc.Team(ctx, team)
	if err != nil {
		return core.ModelRef{}, nil, err
	}
	role := ""
	for _, m := range view.Members {
		if m.Name == member {
			role = m.Role
		}
	}
	cfg := memberModel(view, member)
	model, err := agent.NewModel(cfg, s.models.Lookup, s.models.Provider)
	if err != nil {
		return core.ModelRef{}, nil, err
	}
	spec := agent.Spec{
		Team: team, Member: member,
		System: agent.SystemText(team, view.Purpose, member, role),
		Model:  model, Tools: s.toolsFor(ctx, team, member), Logger: s.log,
	}
	return core.ModelRef{Provider: cfg.Provider, Name: cfg.Name}, agent.Turn(s.svc, spec), nil
}

// wakeMetrics count wakes: no team or member names.
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

// Woken implements core.WakeObserver.
func (m *wakeMetrics) Woken() { m.wakes.Inc() }

// WakeDelay implements core.WakeObserver.
func (m *wakeMetrics) WakeDelay(d time.Duration) { m.delay.Observe(d.Seconds()) }

// WakesQueued implements core.WakeObserver.
func (m *wakeMetrics) WakesQueued(n int) { m.queued.Set(float64(n)) }
