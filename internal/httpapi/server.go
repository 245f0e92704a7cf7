package httpapi

import (
	"bytes"
	"context"
	"log/slog"

	"mailroom/internal/core"
	"mailroom/internal/host"
)

// Server implements the generated StrictServerInterface over a core.Service.
// Each method makes one core call with the caller's principal in the
// context (core checks the rights, as it does for every door) and converts
// the result; a core error is returned as is and answered by respondError,
// the one place that maps codes to statuses.
type Server struct {
	svc    *core.Service
	log    *slog.Logger
	events *broker
	// notify publishes an event to the stream and the metrics; core's
	// events and the run events both go through it.
	notify func(core.Event)
	// host builds the turns and keeps the teams' workspaces and scenario
	// runs (internal/host).
	host *host.Host
	// stopping ends turns and runs when the server stops (see workContext);
	// nil never stops.
	stopping context.Context
	// held counts the reads for mail answered from their own goroutine
	// (inboxwait.go).
	held *HeldReads
}

var _ StrictServerInterface = (*Server)(nil)

// CreateTeam creates a team (admin only).
func (s *Server) CreateTeam(ctx context.Context, req CreateTeamRequestObject) (CreateTeamResponseObject, error) {
	spec := teamSpecFrom(req.Body)
	if err := s.teamModel(ctx, &spec, req.Body.Model); err != nil {
		return nil, err
	}
	if err := checkMemberModels(spec); err != nil {
		return nil, err
	}
	view, created, err := s.svc.CreateTeam(ctx, spec)
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
	teams := s.svc.Teams(ctx)
	out := TeamList{Teams: make([]TeamSummary, 0, len(teams))}
	for _, t := range teams {
		out.Teams = append(out.Teams, TeamSummary{Name: t.Name, Members: t.Members, CreatedAt: t.CreatedAt})
	}
	return ListTeams200JSONResponse(out), nil
}

// GetTeam returns one team (admin or a member of it).
func (s *Server) GetTeam(ctx context.Context, req GetTeamRequestObject) (GetTeamResponseObject, error) {
	view, err := s.svc.Team(ctx, req.Team)
	if err != nil {
		return nil, err
	}
	return GetTeam200JSONResponse(teamOf(view)), nil
}

// UpdateTeam changes a team's limits (admin); core decides which may
// change and announces the change.
func (s *Server) UpdateTeam(ctx context.Context, req UpdateTeamRequestObject) (UpdateTeamResponseObject, error) {
	view, err := s.svc.UpdateLimits(ctx, req.Team, limitsUpdateFrom(req.Body.Limits))
	if err != nil {
		return nil, err
	}
	return UpdateTeam200JSONResponse(teamOf(view)), nil
}

// SendMessage stores a letter from the token's member.
func (s *Server) SendMessage(ctx context.Context, req SendMessageRequestObject) (SendMessageResponseObject, error) {
	res, err := s.svc.Send(ctx, core.SendInput{Team: req.Team, To: req.Body.To, Body: req.Body.Body, IdempotencyKey: deref(req.Params.IdempotencyKey),
		InReplyTo: deref(req.Body.InReplyTo), AckRequired: deref(req.Body.AckRequired)})
	if err != nil {
		return nil, err
	}
	return SendMessage201JSONResponse{ID: res.ID, Status: SendResultStatus(res.Status)}, nil
}

// GetInbox returns a member's letters (that member or the admin).
func (s *Server) GetInbox(ctx context.Context, req GetInboxRequestObject) (GetInboxResponseObject, error) {
	if wantsJSONL(ctx) {
		// The whole inbox as the lesson's file holds it, from either
		// backend (core.TeamTx.InboxBytes).
		if req.Params.After != nil || waitOf(req.Params.Wait) > 0 || deref(req.Params.Unread) {
			return nil, core.Errorf(core.CodeValidation, "after and wait apply to the JSON form of the inbox; application/jsonl answers the whole inbox.")
		}
		data, err := s.svc.InboxBytes(ctx, req.Team, req.Member)
		if err != nil {
			return nil, err
		}
		return GetInbox200ApplicationJsonlResponse{Body: bytes.NewReader(data), ContentLength: int64(len(data))}, nil
	}
	after := deref(req.Params.After)
	if deref(req.Params.Unread) {
		var err error
		if after, err = s.unreadAfter(ctx, req); err != nil { // cursors.go
			return nil, err
		}
	}
	if wait := waitOf(req.Params.Wait); wait > 0 {
		return s.holdInbox(ctx, req.Team, req.Member, after, wait) // inboxwait.go
	}
	msgs, err := s.svc.WaitInbox(ctx, req.Team, req.Member, after, 0)
	if err != nil {
		return nil, err
	}
	return GetInbox200JSONResponse{Messages: messagesOf(msgs)}, nil
}

// ConsumeInbox matches the protocol responses of the token's own inbox.
func (s *Server) ConsumeInbox(ctx context.Context, req ConsumeInboxRequestObject) (ConsumeInboxResponseObject, error) {
	// The path names the inbox; core consumes the caller's own, so a
	// path naming another member is refused here with the same check
	// every door uses.
	if err := core.CheckSelf(ctx, req.Team, req.Member); err != nil {
		return nil, err
	}
	results, err := s.svc.Consume(ctx, req.Team)
	if err != nil {
		return nil, err
	}
	return ConsumeInbox200JSONResponse{Results: matchResultsOf(results)}, nil
}

// OpenRequest opens a plan or shutdown request from the token's member.
func (s *Server) OpenRequest(ctx context.Context, req OpenRequestRequestObject) (OpenRequestResponseObject, error) {
	b := req.Body
	res, err := s.svc.OpenRequest(ctx, core.OpenInput{Team: req.Team, Target: b.Target, Kind: string(b.Kind), Payload: b.Payload, IdempotencyKey: deref(req.Params.IdempotencyKey)})
	if err != nil {
		return nil, err
	}
	return OpenRequest201JSONResponse{RequestID: res.RequestID, Status: OpenResultStatus(res.Status)}, nil
}

// ListRequests lists a team's requests (admin or a member of it).
func (s *Server) ListRequests(ctx context.Context, req ListRequestsRequestObject) (ListRequestsResponseObject, error) {
	reqs, err := s.svc.Requests(ctx, req.Team)
	if err != nil {
		return nil, err
	}
	return ListRequests200JSONResponse{Requests: requestsOf(reqs)}, nil
}

// GetRequest returns one request (admin or a member of its team).
func (s *Server) GetRequest(ctx context.Context, req GetRequestRequestObject) (GetRequestResponseObject, error) {
	r, err := s.svc.Request(ctx, req.Team, req.RequestID)
	if err != nil {
		return nil, err
	}
	return GetRequest200JSONResponse(requestOf(r)), nil
}

// ReplyRequest answers a request as the token's member.
func (s *Server) ReplyRequest(ctx context.Context, req ReplyRequestRequestObject) (ReplyRequestResponseObject, error) {
	b := req.Body
	res, err := s.svc.Reply(ctx, core.ReplyInput{Team: req.Team, RequestID: req.RequestID, Approve: b.Approve, Feedback: deref(b.Feedback), IdempotencyKey: deref(req.Params.IdempotencyKey)})
	if err != nil {
		return nil, err
	}
	out := ReplyRequest200JSONResponse{RequestID: res.RequestID, Status: ReplyResultStatus(res.Status)}
	if res.Receipt != "" {
		out.Receipt = &res.Receipt
	}
	return out, nil
}

// DeleteTeam deletes a team with its inboxes, tokens and what the host
// keeps of it (admin only; host.DeleteTeam).
func (s *Server) DeleteTeam(ctx context.Context, req DeleteTeamRequestObject) (DeleteTeamResponseObject, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	if err := s.host.DeleteTeam(ctx, req.Team); err != nil {
		return nil, err
	}
	return DeleteTeam204Response{}, nil
}

// ResetMember makes a stopped or failed member idle again (admin only),
// emptying its history with {"history": "clear"}.
func (s *Server) ResetMember(ctx context.Context, req ResetMemberRequestObject) (ResetMemberResponseObject, error) {
	var opts core.ResetOptions
	if req.Body != nil && req.Body.History != nil {
		opts.ClearHistory = *req.Body.History == Clear
	}
	m, err := s.svc.ResetMemberWith(ctx, req.Team, req.Member, opts)
	if err != nil {
		return nil, err
	}
	return ResetMember200JSONResponse(memberOf(m)), nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
