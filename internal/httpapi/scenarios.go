package httpapi

import (
	"context"
	"errors"
	"fmt"

	"mailroom/internal/agent"
	"mailroom/internal/core"
	"mailroom/internal/scenario"
)

// teamsNeeded is how many teams a run of scenario name creates:
// team-protocols proves the idle-boundary close on a team of its own.
func teamsNeeded(name string) int {
	switch name {
	case scenario.AgentTeams:
		return 1
	case scenario.TeamProtocols:
		return 2
	}
	return 0
}

// ListScenarios lists the scenarios with their option defaults (any token).
func (s *Server) ListScenarios(ctx context.Context, _ ListScenariosRequestObject) (ListScenariosResponseObject, error) {
	if _, err := principalFrom(ctx); err != nil {
		return nil, err
	}
	infos := scenario.Scenarios()
	out := ScenarioList{Scenarios: make([]ScenarioInfo, 0, len(infos))}
	for _, info := range infos {
		out.Scenarios = append(out.Scenarios, ScenarioInfo{Name: ScenarioInfoName(info.Name), Title: info.Title, Description: info.Description, Options: info.Options})
	}
	return ListScenarios200JSONResponse(out), nil
}

// RunScenario runs a scenario and answers with its document (admin only).
// The run is detached from the request's cancellation: it runs to its end
// and stores its document even if the client goes away, and GET /runs/{id}
// returns it afterwards. When the server begins to stop, the run ends at
// its next boundary and its stored document, finished and not ok with an
// interrupted check, is the answer.
func (s *Server) RunScenario(ctx context.Context, req RunScenarioRequestObject) (RunScenarioResponseObject, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	if !s.host.Runs() {
		return nil, core.Errorf(core.CodeNotFound, "This server does not run scenarios.")
	}
	opts := runOptionsFrom(req.Body)
	// A model without credentials is refused before anything exists.
	model, err := s.scenarioModel(req.Body)
	if err != nil {
		return nil, err
	}
	opts.Model = model
	// Every team counts toward the team limit: a run that could not
	// create all of its teams creates none.
	if err := s.svc.TeamRoom(ctx, teamsNeeded(req.Name)); err != nil {
		return nil, err
	}
	work, done, err := s.workContext(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	doc, err := s.host.RunScenario(work, req.Name, opts)
	if err != nil && !(doc.RunID != "" && errors.Is(err, scenario.ErrInterrupted)) {
		return nil, s.stoppedOr(err)
	}
	out, err := runResultOf(doc)
	if err != nil {
		return nil, err
	}
	return RunScenario200JSONResponse(out), nil
}

// GetRun returns a run's document (admin only).
func (s *Server) GetRun(ctx context.Context, req GetRunRequestObject) (GetRunResponseObject, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	doc, err := s.host.GetRun(ctx, req.RunID)
	if err != nil {
		return nil, err
	}
	out, err := runResultOf(doc)
	if err != nil {
		return nil, err
	}
	return GetRun200JSONResponse(out), nil
}

// scenarioModel is the real model a run asks for, built from the
// server's environment, or nil for the script (no model, or the scripted
// one, which is the script).
func (s *Server) scenarioModel(b *RunOptions) (agent.Model, error) {
	if b == nil || b.Model == nil {
		return nil, nil
	}
	cfg := modelConfigFrom(b.Model)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Provider == agent.ProviderScripted {
		return nil, nil
	}
	return s.host.Model(cfg)
}

func runOptionsFrom(b *RunOptions) scenario.Options {
	if b == nil {
		return scenario.Options{}
	}
	return scenario.Options{
		Plan:     string(deref(b.Plan)),
		Decision: string(deref(b.Decision)),
		Expected: deref(b.Expected),
		StepMS:   deref(b.StepMs),
	}
}

// runResultOf converts a run's document; its outcome is one of the two
// scenario outcomes, or null while the run is in progress.
func runResultOf(d scenario.Result) (RunResult, error) {
	out := RunResult{
		RunID:         d.RunID,
		Scenario:      RunResultScenario(d.Scenario),
		Team:          d.Team,
		Ok:            d.OK,
		Checks:        make([]Check, 0, len(d.Checks)),
		ModelRequests: d.ModelRequests,
		Requests:      requestsOf(d.Requests),
		Mailboxes:     make(map[string][]Message, len(d.Mailboxes)),
	}
	for _, c := range d.Checks {
		out.Checks = append(out.Checks, Check{Name: c.Name, Ok: c.OK, Applicable: c.Applies(), Detail: c.Detail})
	}
	if d.Model != nil {
		m := ModelSettings{Provider: ModelSettingsProvider(d.Model.Provider)}
		if d.Model.Name != "" {
			name := d.Model.Name
			m.Name = &name
		}
		if d.Model.MaxTokens != 0 {
			mt := d.Model.MaxTokens
			m.MaxTokens = &mt
		}
		out.Model = &m
	}
	for member, box := range d.Mailboxes {
		out.Mailboxes[member] = messagesOf(box)
	}
	var outcome RunOutcome
	var err error
	switch o := d.Outcome.(type) {
	case nil:
		return out, nil
	case *scenario.ProtocolOutcome:
		p := ProtocolOutcome{Ran: o.Ran, Output: o.Output, Expected: o.Expected, Match: o.Match, Counter: o.Counter}
		if o.RefusedBy != nil {
			gate := ProtocolOutcomeRefusedBy(*o.RefusedBy)
			p.RefusedBy = &gate
		}
		err = outcome.FromProtocolOutcome(p)
	case *scenario.TeamsOutcome:
		err = outcome.FromTeamsOutcome(TeamsOutcome{
			LeadLetters:        o.LeadLetters,
			ReaderLetters:      o.ReaderLetters,
			ReviewerLetters:    o.ReviewerLetters,
			ReaderRereadSource: o.ReaderRereadSource,
			LeadSawReports:     o.LeadSawReports,
		})
	default:
		return RunResult{}, fmt.Errorf("httpapi: run %s has an outcome of type %T", d.RunID, d.Outcome)
	}
	if err != nil {
		return RunResult{}, err
	}
	out.Outcome = &outcome
	return out, nil
}
