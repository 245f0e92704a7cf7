package httpapi

import "context"

// The archive (docs/api.md, "Mail that stays useful"): core decides what
// moves, who may move it and who may read it.

// defaultArchivePage is how many archived letters a read without limit
// returns (the spec's default).
const defaultArchivePage = 100

// ArchiveInbox moves the member's letters read through req.Body.Through
// into its archive.
func (s *Server) ArchiveInbox(ctx context.Context, req ArchiveInboxRequestObject) (ArchiveInboxResponseObject, error) {
	res, err := s.svc.ArchiveInbox(ctx, req.Team, req.Member, req.Body.Through)
	if err != nil {
		return nil, err
	}
	return ArchiveInbox200JSONResponse{Archived: res.Archived, InboxLength: res.InboxLength}, nil
}

// GetArchive returns a page of the member's archived letters, oldest
// first.
func (s *Server) GetArchive(ctx context.Context, req GetArchiveRequestObject) (GetArchiveResponseObject, error) {
	limit := defaultArchivePage
	if req.Params.Limit != nil {
		limit = *req.Params.Limit
	}
	letters, err := s.svc.ListArchive(ctx, req.Team, req.Member, deref(req.Params.After), limit)
	if err != nil {
		return nil, err
	}
	return GetArchive200JSONResponse{Letters: messagesOf(letters)}, nil
}
