package httpapi

import (
	"context"
	"encoding/json"

	"mailroom/internal/agent"
	"mailroom/internal/core"
)

// RunTurn runs one turn of a member with a scripted model (admin only). The
// turn is detached from the request's cancellation: once it has claimed the
// member it runs to its end and commits, even if the client goes away, so a
// member is never left half-way by a dropped connection.
func (s *Server) RunTurn(ctx context.Context, req RunTurnRequestObject) (RunTurnResponseObject, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	steps, err := stepsFrom(req.Body.Responses)
	if err != nil {
		return nil, err
	}
	res, requests, err := agent.RunScriptedTurn(context.WithoutCancel(ctx), s.svc, req.Team, req.Member, deref(req.Body.Prompt), steps, agent.DefaultTools(req.Member))
	if err != nil {
		return nil, err
	}
	return RunTurn200JSONResponse{Member: res.Member, Status: TurnResultStatus(res.Status), Text: res.Text, ModelRequests: requests}, nil
}

// stepsFrom turns the schema's steps (a tool call or a text each) into the
// scripted model's steps; both use the same JSON field names. Whether each
// step is exactly one of the two is checked by agent.ValidateSteps.
func stepsFrom(in []Step) ([]agent.Step, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, core.Errorf(core.CodeValidation, "The steps cannot be read.")
	}
	out := []agent.Step{}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, core.Errorf(core.CodeValidation, "The steps cannot be read.")
	}
	return out, nil
}
