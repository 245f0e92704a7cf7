package httpapi

import (
	"context"

	"mailroom/internal/core"
)

// SearchMail finds letters of the team (docs/api.md, "Search"); core parses
// the query and decides who sees which letter.
func (s *Server) SearchMail(ctx context.Context, req SearchMailRequestObject) (SearchMailResponseObject, error) {
	p := req.Params
	found, err := s.svc.Search(ctx, core.SearchInput{Team: req.Team, Q: p.Q, From: deref(p.From), To: deref(p.To), Limit: deref(p.Limit)})
	if err != nil {
		return nil, err
	}
	out := SearchMail200JSONResponse{Results: make([]SearchResult, 0, len(found))}
	for _, r := range found {
		out.Results = append(out.Results, SearchResult{Letter: messagesOf([]core.Message{r.Letter})[0], Snippet: r.Snippet})
	}
	return out, nil
}
