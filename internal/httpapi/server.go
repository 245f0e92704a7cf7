package httpapi

import (
	"context"
	"log/slog"

	"mailroom/internal/core"
	"mailroom/internal/scenario"
)

// Server implements the generated StrictServerInterface over a core.Service.
// Each method checks the caller's rights, makes one core call and converts
// the result; a core error is returned as is and answered by respondError,
// the one place that maps codes to statuses.
type Server struct {
	svc    *core.Service
	log    *slog.Logger
	events *broker
	// notify publishes an event to the stream and the metrics; core's
	// events and the run events both go through it.
	notify func(core.Event)
	// runner runs scenarios; nil when the server has no data directory.
	runner *scenario.Runner
}

var _ StrictServerInterface = (*Server)(nil)

// CreateTeam creates a team (admin only).
func (s *Server) CreateTeam(ctx context.Context, req CreateTeamRequestObject) (CreateTeamResponseObject, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	view, created, err := s.svc.CreateTeam(ctx, teamSpecFrom(req.Body))
	if err != nil {
		return nil, err
	}
	return CreateTeam201JSONResponse(createdTeamOf(view, created)), nil
}

// ListTeams lists every team (admin only).
func (s *Server) ListTeams(ctx context.Context, _ ListTeamsRequestObject) (ListTeamsResponseObject, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	teams := s.svc.Teams()
	out := TeamList{Teams: make([]TeamSummary, 0, len(teams))}
	for _, t := range teams {
		out.Teams = append(out.Teams, TeamSummary{Name: t.Name, Members: t.Members, CreatedAt: t.CreatedAt})
	}
	return ListTeams200JSONResponse(out), nil
}

// GetTeam returns one team (admin or a member of it).
func (s *Server) GetTeam(ctx context.Context, req GetTeamRequestObject) (GetTeamResponseObject, error) {
	if err := requireReader(ctx, req.Team); err != nil {
		return nil, err
	}
	view, err := s.svc.Team(ctx, req.Team)
	if err != nil {
		return nil, err
	}
	return GetTeam200JSONResponse(teamOf(view)), nil
}

// SendMessage stores a letter from the token's member.
func (s *Server) SendMessage(ctx context.Context, req SendMessageRequestObject) (SendMessageResponseObject, error) {
	sender, err := requireMember(ctx, req.Team)
	if err != nil {
		return nil, err
	}
	res, err := s.svc.Send(ctx, req.Team, sender, req.Body.To, req.Body.Body, deref(req.Params.IdempotencyKey))
	if err != nil {
		return nil, err
	}
	return SendMessage201JSONResponse{ID: res.ID, Status: SendResultStatus(res.Status)}, nil
}

// GetInbox returns a member's letters (that member or the admin).
func (s *Server) GetInbox(ctx context.Context, req GetInboxRequestObject) (GetInboxResponseObject, error) {
	if err := requireSelfOrAdmin(ctx, req.Team, req.Member); err != nil {
		return nil, err
	}
	msgs, err := s.svc.WaitInbox(ctx, req.Team, req.Member, deref(req.Params.After), waitOf(req.Params.Wait))
	if err != nil {
		return nil, err
	}
	return GetInbox200JSONResponse{Messages: messagesOf(msgs)}, nil
}

// ConsumeInbox matches the protocol responses of the token's own inbox.
func (s *Server) ConsumeInbox(ctx context.Context, req ConsumeInboxRequestObject) (ConsumeInboxResponseObject, error) {
	if err := requireSelf(ctx, req.Team, req.Member); err != nil {
		return nil, err
	}
	results, err := s.svc.Consume(ctx, req.Team, req.Member)
	if err != nil {
		return nil, err
	}
	return ConsumeInbox200JSONResponse{Results: matchResultsOf(results)}, nil
}

// OpenRequest opens a plan or shutdown request from the token's member.
func (s *Server) OpenRequest(ctx context.Context, req OpenRequestRequestObject) (OpenRequestResponseObject, error) {
	sender, err := requireMember(ctx, req.Team)
	if err != nil {
		return nil, err
	}
	b := req.Body
	res, err := s.svc.OpenRequest(ctx, req.Team, sender, b.Target, string(b.Kind), b.Payload, deref(req.Params.IdempotencyKey))
	if err != nil {
		return nil, err
	}
	return OpenRequest201JSONResponse{RequestID: res.RequestID, Status: OpenResultStatus(res.Status)}, nil
}

// ListRequests lists a team's requests (admin or a member of it).
func (s *Server) ListRequests(ctx context.Context, req ListRequestsRequestObject) (ListRequestsResponseObject, error) {
	if err := requireReader(ctx, req.Team); err != nil {
		return nil, err
	}
	reqs, err := s.svc.Requests(ctx, req.Team)
	if err != nil {
		return nil, err
	}
	return ListRequests200JSONResponse{Requests: requestsOf(reqs)}, nil
}

// GetRequest returns one request (admin or a member of its team).
func (s *Server) GetRequest(ctx context.Context, req GetRequestRequestObject) (GetRequestResponseObject, error) {
	if err := requireReader(ctx, req.Team); err != nil {
		return nil, err
	}
	r, err := s.svc.Request(ctx, req.Team, req.RequestID)
	if err != nil {
		return nil, err
	}
	return GetRequest200JSONResponse(requestOf(r)), nil
}

// ReplyRequest answers a request as the token's member.
func (s *Server) ReplyRequest(ctx context.Context, req ReplyRequestRequestObject) (ReplyRequestResponseObject, error) {
	actor, err := requireMember(ctx, req.Team)
	if err != nil {
		return nil, err
	}
	b := req.Body
	res, err := s.svc.Reply(ctx, req.Team, req.RequestID, actor, b.Approve, deref(b.Feedback), deref(req.Params.IdempotencyKey))
	if err != nil {
		return nil, err
	}
	out := ReplyRequest200JSONResponse{RequestID: res.RequestID, Status: ReplyResultStatus(res.Status)}
	if res.Receipt != "" {
		out.Receipt = &res.Receipt
	}
	return out, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
