package httpapi

import (
	"context"
	"encoding/json"
	"errors"

	"mailroom/internal/agent"
	"mailroom/internal/core"
)

// RunTurn runs one turn of a member with a scripted model (admin only). The
// turn is detached from the request's cancellation: once it has claimed the
// member it runs to its end and commits, even if the client goes away, so a
// member is never left half-way by a dropped connection. Only the server's
// stopping ends it early, at its next boundary, as a failed turn.
func (s *Server) RunTurn(ctx context.Context, req RunTurnRequestObject) (RunTurnResponseObject, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	steps, err := stepsFrom(req.Body.Responses)
	if err != nil {
		return nil, err
	}
	work, done, err := s.workContext(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	res, requests, err := agent.RunScriptedTurn(work, s.svc, req.Team, req.Member, deref(req.Body.Prompt), steps, agent.DefaultTools(req.Member))
	if err != nil {
		return nil, s.stoppedOr(err)
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

// workContext is the context of a turn or a scenario run: detached from the
// request's cancellation (a dropped client must not leave work half done)
// but cancelled when the server begins to stop, so that the work ends at
// its next boundary and records it. http.Server.Shutdown never cancels the
// contexts of requests in flight, hence this second source. Once stopping
// has begun, no new work starts: the error is shutting_down. done releases
// the link to stopping.
func (s *Server) workContext(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if s.stopping == nil {
		return context.WithoutCancel(ctx), func() {}, nil
	}
	if s.stopping.Err() != nil {
		return nil, nil, errShuttingDown
	}
	work, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	unlink := context.AfterFunc(s.stopping, func() { cancel(errShuttingDown) })
	return work, func() {
		unlink()
		cancel(nil)
	}, nil
}

// errShuttingDown refuses new work while the server stops; it is also the
// cancellation cause of the work that was running.
var errShuttingDown = core.Errorf(core.CodeShuttingDown, "The server is shutting down and starts no new turn or run; try again after it has restarted.")

// stoppedOr answers a turn or run that could not be carried out because
// the server began to stop as shutting_down; any other error is kept.
func (s *Server) stoppedOr(err error) error {
	if s.stopping != nil && s.stopping.Err() != nil && errors.Is(err, context.Canceled) {
		return errShuttingDown
	}
	return err
}
