package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"mailroom/internal/agent"
	"mailroom/internal/core"
	"mailroom/internal/host"
)

// cancelWait bounds how long a cancel request waits for its turn to reach
// its next boundary before it answers with the document as it is.
const cancelWait = 30 * time.Second

// RunTurn runs one turn of a member (admin only): with the scripted model
// when the body brings responses, with the team's model (or the body's)
// otherwise. The turn is detached from the request's cancellation: once
// it has claimed the member it runs to its end and commits, even if the
// client goes away, so a member is never left half-way by a dropped
// connection. Only the server's stopping (or a cancel) ends it early, at
// its next boundary. With Prefer: respond-async the answer is 202 as soon
// as the turn has started.
func (s *Server) RunTurn(ctx context.Context, req RunTurnRequestObject) (RunTurnResponseObject, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	view, err := s.svc.Team(ctx, req.Team)
	if err != nil {
		return nil, err
	}
	found := false
	names := make([]string, 0, len(view.Members))
	for _, m := range view.Members {
		names = append(names, m.Name)
		if m.Name == req.Member {
			found = true
		}
	}
	if !found {
		return nil, core.NoSuchMember(names)
	}
	model, ref, err := s.turnModel(req.Body, view, req.Member)
	if err != nil {
		return nil, err
	}
	fn := s.host.Turn(ctx, view, req.Member, deref(req.Body.Prompt), model)
	work, done, err := s.workContext(ctx)
	if err != nil {
		return nil, err
	}
	tr, err := s.svc.BeginTurn(work, req.Team, req.Member, ref)
	if err != nil {
		done()
		return nil, s.stoppedOr(err)
	}
	run := func() (core.TurnDoc, error) {
		defer done()
		return tr.Run(work, fn)
	}
	if preferAsync(req.Params.Prefer) {
		go func() {
			if _, err := run(); err != nil {
				s.log.Warn("an asynchronous turn could not record its end", "team", req.Team, "member", req.Member, "turn", tr.ID(), "err", err)
			}
		}()
		loc := BasePath + "/teams/" + req.Team + "/turns/" + tr.ID()
		return turnResponse{doc: tr.Document(), status: http.StatusAccepted, location: loc}, nil
	}
	doc, err := run()
	if err != nil {
		return nil, s.stoppedOr(err)
	}
	return turnResponse{doc: doc, status: http.StatusOK}, nil
}

// turnModel is the model a turn request asks for: the scripted one
// replaying responses, or the body's, the member's or the team's model built from the
// server's environment (model_unavailable without credentials, and for
// the scripted model without responses).
func (s *Server) turnModel(body *TurnCreate, view core.TeamView, member string) (agent.Model, core.ModelRef, error) {
	if body.Responses != nil {
		steps, err := stepsFrom(*body.Responses)
		if err != nil {
			return nil, core.ModelRef{}, err
		}
		if err := agent.ValidateSteps(steps); err != nil {
			return nil, core.ModelRef{}, err
		}
		return agent.NewScripted(steps...), core.ModelRef{Provider: agent.ProviderScripted}, nil
	}
	cfg := host.MemberModel(view, member) // the member's own model wins over the team's
	if body.Model != nil {
		cfg = modelConfigFrom(body.Model)
	}
	model, err := s.host.Model(cfg)
	if err != nil {
		return nil, core.ModelRef{}, err
	}
	return model, core.ModelRef{Provider: cfg.Provider, Name: cfg.Name}, nil
}

// teamModel sets the model of a team being created: the body's, checked,
// or the server's default. Only the admin creates teams; that is checked
// first, so that a member never learns what a model check would say.
func (s *Server) teamModel(ctx context.Context, spec *core.TeamSpec, body *ModelSettings) error {
	if err := requireAdmin(ctx); err != nil {
		return err
	}
	cfg := s.host.Models().DefaultModel()
	if body != nil {
		cfg = modelConfigFrom(body)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	spec.Model = &core.ModelSettings{Provider: cfg.Provider, Name: cfg.Name, MaxTokens: cfg.MaxTokens}
	return nil
}

func modelConfigFrom(m *ModelSettings) agent.ModelConfig {
	cfg := agent.ModelConfig{Provider: string(m.Provider), Name: deref(m.Name)}
	if m.MaxTokens != nil {
		cfg.MaxTokens = *m.MaxTokens
	}
	return cfg
}

// preferAsync reports whether a Prefer header (RFC 7240) asks for
// respond-async; preferences are comma-separated and case-insensitive.
func preferAsync(prefer *string) bool {
	if prefer == nil {
		return false
	}
	for _, p := range strings.Split(*prefer, ",") {
		token, _, _ := strings.Cut(p, ";")
		if strings.EqualFold(strings.TrimSpace(token), "respond-async") {
			return true
		}
	}
	return false
}

// ListTurns lists the team's turn documents, newest first (admin or a
// member of the team).
func (s *Server) ListTurns(ctx context.Context, req ListTurnsRequestObject) (ListTurnsResponseObject, error) {
	if err := requireReader(ctx, req.Team); err != nil {
		return nil, err
	}
	docs, err := s.svc.Turns(ctx, req.Team)
	if err != nil {
		return nil, err
	}
	return turnListResponse{Turns: docs}, nil
}

// GetTurn returns one turn document (admin or a member of the team).
func (s *Server) GetTurn(ctx context.Context, req GetTurnRequestObject) (GetTurnResponseObject, error) {
	if err := requireReader(ctx, req.Team); err != nil {
		return nil, err
	}
	doc, err := s.svc.TurnDocument(ctx, req.Team, req.TurnID)
	if err != nil {
		return nil, err
	}
	return turnResponse{doc: doc, status: http.StatusOK}, nil
}

// CancelTurn cancels a running turn (admin) and answers with its document
// once it has ended, or after cancelWait with the document as it is.
func (s *Server) CancelTurn(ctx context.Context, req CancelTurnRequestObject) (CancelTurnResponseObject, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	wait, cancel := context.WithTimeout(ctx, cancelWait)
	defer cancel()
	doc, err := s.svc.CancelTurn(wait, req.Team, req.TurnID)
	if err != nil {
		return nil, err
	}
	return turnResponse{doc: doc, status: http.StatusOK}, nil
}

// turnResponse writes core's turn document as it is: its JSON is the
// contract's (steps shaped by kind), which the generated type, all
// optional pointers, would only copy.
type turnResponse struct {
	doc      core.TurnDoc
	status   int
	location string
}

func (r turnResponse) write(w http.ResponseWriter) error {
	return writeJSON(w, r.status, r.doc, func(h http.Header) {
		if r.location != "" {
			h.Set("Location", r.location)
			h.Set("Preference-Applied", "respond-async")
		}
	})
}

// VisitRunTurnResponse implements RunTurnResponseObject.
func (r turnResponse) VisitRunTurnResponse(w http.ResponseWriter) error { return r.write(w) }

// VisitGetTurnResponse implements GetTurnResponseObject.
func (r turnResponse) VisitGetTurnResponse(w http.ResponseWriter) error { return r.write(w) }

// VisitCancelTurnResponse implements CancelTurnResponseObject.
func (r turnResponse) VisitCancelTurnResponse(w http.ResponseWriter) error { return r.write(w) }

type turnListResponse struct {
	Turns []core.TurnDoc `json:"turns"`
}

// VisitListTurnsResponse implements ListTurnsResponseObject.
func (r turnListResponse) VisitListTurnsResponse(w http.ResponseWriter) error {
	return writeJSON(w, http.StatusOK, r, nil)
}

func writeJSON(w http.ResponseWriter, status int, v any, headers func(http.Header)) error {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	if headers != nil {
		headers(w.Header())
	}
	w.WriteHeader(status)
	_, err := buf.WriteTo(w)
	return err
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
