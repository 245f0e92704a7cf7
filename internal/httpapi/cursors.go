package httpapi

import (
	"context"
	"strings"

	"mailroom/internal/core"
)

// GetMe says who the token is.
func (s *Server) GetMe(ctx context.Context, _ GetMeRequestObject) (GetMeResponseObject, error) {
	id, err := s.svc.Me(ctx)
	if err != nil {
		return nil, err
	}
	out := GetMe200JSONResponse{}
	if id.Admin {
		out.Admin = &id.Admin
		return out, nil
	}
	out.Team, out.Member, out.Role = &id.Team, &id.Member, &id.Role
	return out, nil
}

// MarkRead moves the token's member's read cursor.
func (s *Server) MarkRead(ctx context.Context, req MarkReadRequestObject) (MarkReadResponseObject, error) {
	rs, err := s.svc.MarkRead(ctx, req.Team, req.Member, req.Body.Through)
	if err != nil {
		return nil, err
	}
	return MarkRead200JSONResponse(readStateOf(rs)), nil
}

// GetReceipts says which of the asked letters were read.
func (s *Server) GetReceipts(ctx context.Context, req GetReceiptsRequestObject) (GetReceiptsResponseObject, error) {
	ids := strings.Split(req.Params.Ids, ",")
	for _, id := range ids {
		if id == "" {
			return nil, core.Errorf(core.CodeValidation, "ids must be letter ids separated by single commas.")
		}
	}
	rs, err := s.svc.Receipts(ctx, req.Team, ids)
	if err != nil {
		return nil, err
	}
	out := GetReceipts200JSONResponse{Receipts: make([]Receipt, len(rs))}
	for i, r := range rs {
		out.Receipts[i] = receiptOf(r)
	}
	return out, nil
}

func readStateOf(rs core.ReadState) ReadState {
	return ReadState{ReadThrough: rs.ReadThrough, Unread: rs.Unread}
}

// unreadAfter resolves GET inbox's `unread` into its `after`: the id of
// the last letter the member has read, taken when the read begins.
func (s *Server) unreadAfter(ctx context.Context, req GetInboxRequestObject) (string, error) {
	if req.Params.After != nil {
		return "", core.Errorf(core.CodeValidation, "unread and after cannot be used together.")
	}
	return s.svc.UnreadAfter(ctx, req.Team, req.Member)
}
